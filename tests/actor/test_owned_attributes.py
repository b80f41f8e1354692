"""A worker's ``path``, ``generation``, ``context`` and ``authorities`` are the framework's (.supervision.owned).

``self.path = path`` for a store's file used to succeed and silently rename the actor: its events, log lines,
fault points (``message.<path>``) and answers named the file. Now the start fails, naming the attribute and what to
do instead; a worker that keeps its file under another name reads its own path as before.
"""

from __future__ import annotations

import pytest

from ouroactors import StartFailed, supervisor, worker
from ouroactors.supervision.owned import Owned, set_owned


def test_assigning_the_tree_path_in_on_start_fails_the_start_naming_it(simple_system, tmp_path):
    with pytest.raises(StartFailed) as failed:
        simple_system.start_tree(supervisor("app", [worker("store", "tests.actor.owned_workers:KeepsItsFileAsPath",
                                                           args=(str(tmp_path / "store.json"),))]))
    text = str(failed.value)
    assert "KeepsItsFileAsPath.path is the actor's tree path, set by ouroactors" in text, text
    assert "self.path_" in text  # what to do instead


def test_a_worker_reads_what_the_framework_set(simple_system, tmp_path):
    simple_system.start_tree(supervisor("app", [worker("store", "tests.actor.owned_workers:KeepsItsFile",
                                                       args=(str(tmp_path / "f.json"),))]))
    seen = simple_system.ask("app/store", "look", timeout=5)
    assert seen["path"] == "app/store" and seen["file"] == str(tmp_path / "f.json")
    assert seen["generation"] == simple_system.child_info("app/store").generation
    assert seen["authorities"] == {} and seen["data_dir"] == str(simple_system.data_dir)


def test_the_descriptor_reads_its_default_then_the_value_set_and_refuses_assignment():
    class Thing:
        path = Owned("", "the tree path")
        generation = Owned(None, "the generation")

    thing = Thing()
    assert (thing.path, thing.generation) == ("", None) and isinstance(Thing.path, Owned)
    set_owned(thing, "path", "app/w")
    assert thing.path == "app/w"
    for name in ("path", "generation"):
        with pytest.raises(AttributeError, match=f"Thing.{name} is the"):
            setattr(thing, name, "x")
    assert thing.path == "app/w"
