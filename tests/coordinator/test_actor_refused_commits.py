"""A commit an authority refuses (``CommitRejected``: nothing changed) is asked again where the request is keyed, so a
turn does not stop on one refused commit (found by ``enumerate-sessions --action commit_rejected --hits all``: the
workspace refused the lease's commit once, and the session suspended with "the turn did not start … `resume` runs
it")."""

from __future__ import annotations

import pytest

from ouroactors.core.errors import OuroactorsError
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule
from ouroactors.sessions import Sessions

from .actor_support import agent_tree, session_config, slow_script, three_word_session, wait_for
from .test_actor_recovery import child_path, committed_at_least

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


@pytest.mark.slow
def test_a_workspace_that_crashes_on_a_recovery_reclaim_restarts_the_coordinator_and_the_turn_completes(
        actor_system, tmp_path):
    """The same crash on recovery's way: the runtime is killed mid-turn, the workspace reserves its lease, and the
    workspace stops (a commit of unknown outcome) answering the replacement's reclaim. The coordinator, told
    ``ActorCrashed``, parked the session ("replacement refused") just before rest_for_one restarted it, and the
    restarted one left it parked: an operator had to resume a turn nothing prevented (in 1 of 4 runs: the race with
    the termination is the box's; ``test_recovery_authority_crash`` pins the rule). It stops now; the next
    coordinator's recovery reclaims with the same key (the committed reclaim is found) and completes the turn."""
    ws = tmp_path / "ws"
    ws.mkdir()
    actor_system.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(actor_system)
    sessions.new("s1", session_config(ws, model={"kind": "scripted", "script": str(
        slow_script(tmp_path / "slow.toml"))}))
    sessions.send("s1", "talk slowly")
    wait_for("some output committed", committed_at_least(sessions, "s1", 4))
    # after the kill the workspace records two lease decisions: the dead owner's reservation, then the reclaim
    actor_system.arm_faults("agent/workspace", FaultPlan((FaultRule("workspace.lease_recorded",
                                                                     FaultAction.COMMIT_UNKNOWN, nth=2),)))
    actor_system.kill(child_path(actor_system, "agent/execution"))
    # waited on in the committed log (read here, not asked of the directory, which the restart replaces)
    wait_for("the turn settled", lambda: "turn_settled" in [e.kind for e in sessions.events("s1")], timeout=90)
    view = wait_for("the session suspended", lambda: (v := sessions.show("s1")).state != "running" and v)
    assert view.state == "suspended" and view.reason is None, (view.state, view.reason)
    settled = [e for e in sessions.events("s1") if e.kind == "turn_settled"]
    assert settled and settled[-1].data["status"] == "completed"
    actor_system.events.poll()
    fired = [e for e in actor_system.events.all() if e.kind == "fault_fired"]
    assert [(e.path, e.fields["action"]) for e in fired] == [("agent/workspace", "commit_unknown")]
