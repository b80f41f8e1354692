"""A ``simple_one_for_one`` supervisor imports its worker template's module once it has started, so its first child
is forked from a process that has it, as every later one is (0.2-0.3 s on the first session's clock otherwise)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ouroactors import supervisor, worker
from ouroactors.core.errors import StartFailed

from .helpers import read_lines, wait_until

pytestmark = pytest.mark.multiproc

PROBE = "tests.actor.preload_probe:Probe"


def test_the_template_module_is_imported_by_the_supervisor_before_its_first_child(actor_system_factory, tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch):
    log = tmp_path / "imports.txt"
    monkeypatch.setenv("OUROACTORS_TEST_IMPORT_LOG", str(log))
    system = actor_system_factory()  # its processes inherit the variable; none has imported the probe
    spec = supervisor("pool", [worker("w", PROBE)], strategy="simple_one_for_one")  # imports it here, in the test
    assert read_lines(log) == [str(os.getpid())]
    system.start_tree(spec)
    wait_until(lambda: len(read_lines(log)) == 2, what="the supervisor to import the template's module")
    [_, supervisor_pid] = read_lines(log)
    assert supervisor_pid != str(os.getpid())
    pids = {system.start_child("pool", ()).pid for _ in range(3)}
    assert len(pids) == 3 and str(next(iter(pids))) != supervisor_pid
    assert read_lines(log) == [str(os.getpid()), supervisor_pid]  # the children inherited it: nobody imported again


def test_a_template_that_does_not_import_fails_its_start_with_the_reason(actor_system):
    """Preloading is best effort: the supervisor boots and answers, and the start that needs the module fails with
    the import's error (a spec built where the module imported, run where it does not). It used to fail with a child
    that exited before reporting its start, the reason only in the admin's log."""
    spec = supervisor("pool", [worker("w", PROBE)], strategy="simple_one_for_one")
    template = spec.children[0].model_copy(update={"actor": "tests.actor.nowhere:X"})  # not validated: no import
    actor_system.start_tree(spec.model_copy(update={"children": (template,)}))
    assert actor_system.which_children("pool") == []
    with pytest.raises(StartFailed, match=r"failed_to_start_child.*tests\.actor\.nowhere:X.*does not import"):
        actor_system.start_child("pool", ())
    assert actor_system.which_children("pool") == [] and actor_system.count_children("pool")["specs"] == 1
