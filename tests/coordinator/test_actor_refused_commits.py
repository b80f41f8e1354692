"""A commit an authority refuses (``CommitRejected``: nothing changed) is asked again where the request is keyed, so a
turn does not stop on one refused commit (found by ``enumerate-sessions --action commit_rejected --hits all``: the
workspace refused the lease's commit once, and the session suspended with "the turn did not start … `resume` runs
it")."""

from __future__ import annotations

import pytest

from ouroactors.core.errors import OuroactorsError
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule

from .actor_support import three_word_session, wait_for

pytestmark = [pytest.mark.multiproc]


def test_a_lease_whose_commit_the_workspace_refused_once_is_asked_again_and_the_turn_runs(actor_system, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    sessions = three_word_session(actor_system, tmp_path, ws)
    # the workspace's next commit is the turn's lease: refused once
    actor_system.arm_faults("agent/workspace", FaultPlan((FaultRule("storage.before_commit",
                                                                     FaultAction.COMMIT_REJECTED, nth=1),)))
    sessions.send("s1", "go")
    wait_for("the turn settled", lambda: "turn_settled" in [e.kind for e in sessions.events("s1")], timeout=30)
    assert sessions.show("s1").state == "suspended" and sessions.show("s1").reason is None
    actor_system.events.poll()
    fired = [e for e in actor_system.events.all() if e.kind == "fault_fired"]
    assert [(e.path, e.fields["action"]) for e in fired] == [("agent/workspace", "commit_rejected")]


def test_a_workspace_that_crashes_leasing_restarts_the_coordinator_and_the_turn_runs(actor_system, tmp_path):
    """The workspace stops on a lease commit of unknown outcome; rest_for_one restarts everything after it. The
    coordinator, told ``ActorCrashed``, had suspended the session ("the turn did not start") just before it was
    restarted, so the turn never ran (found by ``enumerate-sessions --action commit_unknown --suspend``). It stops
    now, leaving the session running with no runtime: its recovery runs the turn."""
    ws = tmp_path / "ws"
    ws.mkdir()
    sessions = three_word_session(actor_system, tmp_path, ws)
    actor_system.arm_faults("agent/workspace", FaultPlan((FaultRule("storage.before_commit",
                                                                     FaultAction.COMMIT_UNKNOWN, nth=1),)))
    with pytest.raises(OuroactorsError, match=r"crashed|stopped"):  # taken; its turn did not start here
        sessions.send("s1", "go", event_id="m-1")
    # nobody sends it again: the recovery of the restarted coordinator runs the turn
    wait_for("the turn settled", lambda: "turn_settled" in [e.kind for e in sessions.events("s1")], timeout=60)
    assert sessions.show("s1").reason is None
