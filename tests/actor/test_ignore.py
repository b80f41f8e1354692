"""OTP's ``ignore``: a child whose ``on_start`` answers IGNORE is not started, and that is not a failure."""

from __future__ import annotations

import pytest

from ouroactors import supervisor, worker

pytestmark = pytest.mark.multiproc

IGNORES = "ouroactors.examples.workers:IgnoresStart"


def test_an_ignoring_child_is_kept_as_a_spec_and_the_tree_boots(actor_system):
    actor_system.start_tree(supervisor("app", [worker("quiet", IGNORES), worker("echo", IGNORES,
                                                                               kwargs={"ignore": False})]))
    rows = {c.id: c for c in actor_system.which_children("app")}
    assert rows["quiet"].status == "undefined" and rows["quiet"].pid is None  # OTP: {quiet, undefined, ...}
    assert rows["echo"].status == "running"
    assert actor_system.count_children("app")["specs"] == 2
    assert actor_system.get_childspec("app", "quiet").actor == IGNORES
    assert [e.kind for e in actor_system.events.all() if e.path == "app/quiet"] == ["start_ignored"]


def test_a_dynamic_child_that_ignores_adds_nothing(actor_system):
    actor_system.start_tree(supervisor("app", [worker("w", IGNORES)], strategy="simple_one_for_one"))
    info = actor_system.start_child("app", ())
    assert info.pid is None and info.status == "undefined"  # OTP's {ok, undefined}
    assert actor_system.which_children("app") == []
