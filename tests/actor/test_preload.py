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

PROBE = "tests.actor.preload_probe:Probe"  # imported by one test only: it watches who imports the module


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
    spec = supervisor("pool", [worker("w", "ouroactors.examples.workers:Echo")], strategy="simple_one_for_one")
    template = spec.children[0].model_copy(update={"actor": "tests.actor.nowhere:X"})  # not validated: no import
    actor_system.start_tree(spec.model_copy(update={"children": (template,)}))
    assert actor_system.which_children("pool") == []
    with pytest.raises(StartFailed, match=r"failed_to_start_child.*tests\.actor\.nowhere:X.*does not import"):
        actor_system.start_child("pool", ())
    assert actor_system.which_children("pool") == [] and actor_system.count_children("pool")["specs"] == 1


def test_the_template_is_warmed_once_in_the_supervisors_process(actor_system_factory, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch):
    log = tmp_path / "imports.txt"
    monkeypatch.setenv("OUROACTORS_TEST_IMPORT_LOG", str(log))
    system = actor_system_factory()
    system.start_tree(supervisor("pool", [worker("w", "tests.actor.warm_probe:Warmed")],
                                 strategy="simple_one_for_one"))
    wait_until(lambda: any(line.startswith("preload ") for line in read_lines(log)), what="the warm-up")
    assert [line for line in read_lines(log) if line.startswith("preload ")] == [f"preload {system.pid_of('pool')}"]
    for _ in range(2):
        system.start_child("pool", ())
    assert sum(line.startswith("preload ") for line in read_lines(log)) == 1  # not again, not in the children


def test_a_warm_up_that_raises_changes_nothing_else(actor_system):
    actor_system.start_tree(supervisor("pool", [worker("w", "tests.actor.warm_probe:FailsToWarm")],
                                       strategy="simple_one_for_one"))
    assert actor_system.start_child("pool", ()).status == "running"
    assert len(actor_system.which_children("pool")) == 1


def test_the_doors_checks_are_resolved_in_the_supervisor_and_inherited(actor_system_factory, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch):
    """A child's first message of a kind resolved its class's annotations (1-2 ms for a session's OpenSession); the
    supervisor resolves its template's protocol, nested message classes included, before it forks children."""
    from .warm_probe import DoorQuestion

    log = tmp_path / "imports.txt"
    monkeypatch.setenv("OUROACTORS_TEST_IMPORT_LOG", str(log))
    system = actor_system_factory()
    system.start_tree(supervisor("pool", [worker("w", "tests.actor.warm_probe:DoorReady")],
                                 strategy="simple_one_for_one"))
    wait_until(lambda: any(line.startswith("door-preload ") for line in read_lines(log)), what="the warm-up")
    child = system.start_child("pool", ())
    assert system.ask(f"pool/{child.id}", DoorQuestion(), timeout=10) == {"DoorQuestion": True, "Part": True}
