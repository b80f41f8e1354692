"""An approval asked in the middle of a turn is a durable wait of the coordinator: the runtime's process goes
away, the approval carries the session's state version, a stale answer (another version) is refused and recorded
and resumes nothing, a coordinator killed meanwhile changes nothing, and the fresh answer resumes the session from
durable state with a new runtime whose call finds its approval (the operator is not asked twice)."""

from __future__ import annotations

import pytest

from ouroactors.authorities.asking import ask_authority
from ouroactors.authorities.grants.approvals import ApprovalRefused
from ouroactors.authorities.grants.messages import RequestApproval
from ouroactors.runtime.coordinator.commands import CoordinatorError
from ouroactors.runtime.coordinator.messages import ControlSession
from ouroactors.sessions import GRANTS, SessionRejected
from ouroactors.supervision.events import EventReader

from ..journal_support import journal_kinds, replay_cli
from .actor_support import wait_for, waiting_on_an_approval

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]


def runtimes(system) -> list:
    return [c for c in system.which_children("agent/execution") if c.status == "running"]


def test_an_approval_wait_holds_no_runtime_refuses_stale_answers_and_resumes_once(actor_system, tmp_path):
    # The turn the wait interrupted is left unsettled and re-run from the checkpoint: the model is not asked again —
    # its answer (the call) rode in the commit that recorded the ask, and the re-run takes it from the journal — and
    # the same call finds its approval answered.
    # (asked first, then made visible with the session's move to waiting in the checkpoint's transaction)
    sessions, ws = waiting_on_an_approval(actor_system, tmp_path, "touch approved.txt", "ask:Bash(touch *)", "done")
    view = sessions.show("s1")
    [pending] = sessions.approvals("s1")
    assert view.runtime_id is None and view.waits == (f"approval ask.v{view.state_version}.{pending.call_digest[:16]}",)
    assert pending.state_version == view.state_version  # the session's real version, not 0
    wait_for("the runtime's process gone", lambda: not runtimes(actor_system))

    # At the authority: an answer for an old version is refused and recorded on the approval.
    with pytest.raises(ApprovalRefused, match="state version"):
        sessions.approve("s1", pending.approval_id, expected_version=pending.state_version - 1)
    # At the coordinator: an approval of the same call asked at an old version, validly answered there, is a
    # stale resume event: rejected and recorded in the session.
    old = ask_authority(actor_system, GRANTS, RequestApproval("s1", pending.tool, pending.arguments,
                                                              view.state_version - 1))
    with pytest.raises(SessionRejected, match="stale"):
        sessions.approve("s1", old.approval_id, "an old question")
    after = sessions.show("s1")
    assert (after.state, after.state_version, after.rejections) == ("waiting:approval", view.state_version, 1)
    assert not (ws / "approved.txt").exists() and not runtimes(actor_system)

    # A coordinator killed while the session waits: the new one picks the wait up from the record.
    [coordinator] = [c for c in actor_system.which_children("agent/coordinator") if c.status == "running"]
    path = f"agent/coordinator/{coordinator.id}"
    old_pid = actor_system.kill(path)
    wait_for("a new coordinator", lambda: actor_system.pid_of(path) not in (None, old_pid))

    assert sessions.approve("s1", pending.approval_id, "looks fine").status == "approved"
    events = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=30))
    assert [e.data["status"] for e in events if e.kind == "tool_result"] == ["ok"]
    assert (ws / "approved.txt").exists() and events[-1].data["status"] == "completed"
    # the interrupted turn ran again, on a new runtime, and published only what it had not: the start, the call
    # and the ask are in the log once; its marker says how many events it repeated and which answered ask it took
    kinds = [e.kind for e in events]
    assert [kinds.count(k) for k in ("turn_started", "tool_call", "approval_needed", "turn_resumed")] == [1, 1, 1, 1]
    [resumed] = [e for e in events if e.kind == "turn_resumed"]
    assert resumed.data == {"not_repeated": kinds.index("turn_resumed"), "asks": [pending.call_digest]}
    assert kinds[kinds.index("turn_resumed") + 1] == "tool_result"
    used = {a.approval_id: a.status for a in sessions.approvals("s1", None)}
    assert used == {pending.approval_id: "consumed", old.approval_id: "approved"}  # not asked twice
    assert wait_for("suspended", lambda: (v := sessions.show("s1")).state == "suspended" and v).rejections == 1
    reused = [e.fields for e in EventReader(str(actor_system.data_dir / "events.jsonl")).poll()
              if e.kind == "model_call_reused"]
    assert [(f["turn"], f["index"]) for f in reused] == [(1, 0)]  # the model's call taken from the journal


def test_a_denied_approval_resumes_the_turn_and_the_call_is_denied_without_asking_again(actor_system, tmp_path):
    sessions, ws = waiting_on_an_approval(actor_system, tmp_path, "touch denied.txt", "ask:Bash(touch *)",
                                          "understood")
    [pending] = sessions.approvals("s1")
    assert sessions.deny("s1", pending.approval_id, "not today").status == "denied"
    events = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=30))
    assert [e.data["status"] for e in events if e.kind == "tool_result"] == ["denied"]
    assert [e.kind for e in events].count("approval_needed") == 1  # the answered ask is not published again
    assert not (ws / "denied.txt").exists() and events[-1].data["status"] == "completed"
    assert [a.status for a in sessions.approvals("s1", None)] == ["denied"]  # one approval: not asked again
    assert wait_for("suspended", lambda: sessions.show("s1").state == "suspended")


def test_cancelling_a_session_in_an_approval_wait_denies_its_pending_approval(actor_system, tmp_path):
    """An operator must not find a cancelled session's approval pending (answering it into nothing, told only then
    that the session is gone): the cancel has grants judge the session's pending approvals again, and the approval
    no durable session waits on is denied at once, with why."""
    sessions, ws = waiting_on_an_approval(actor_system, tmp_path, "touch never.txt", "ask:Bash(touch *)", "x")
    [pending] = sessions.approvals("s1")
    with pytest.raises(CoordinatorError, match=r"only a running one is suspended \(a waiting session holds no"):
        sessions.suspend("s1")  # nothing runs to suspend: told what would move it instead
    assert sessions.cancel("s1").view.state == "cancelled"
    [denied] = sessions.approvals("s1", None)
    assert (denied.approval_id, denied.status, denied.answered_by) == (pending.approval_id, "denied", "authority")
    assert "its session was reviewed" in denied.reason and "is cancelled" in denied.reason
    with pytest.raises(ApprovalRefused, match="approval is denied by authority already"):
        sessions.approve("s1", pending.approval_id)
    assert not (ws / "never.txt").exists()
    # the turn that waited ends in the log, in the cancel's own commit: a subscriber sees it settle, and last
    events = list(sessions.events("s1"))
    assert [e.kind for e in events][-2:] == ["approval_needed", "turn_settled"]
    assert events[-1].turn == events[-2].turn and events[-1].cursor == sessions.show("s1").committed_cursor
    assert events[-1].data == {"status": "cancelled", "reason": f"cancelled by {sessions.principal}",
                               "settled_by": "coordinator"}
    # the question the run asked is in its journal: it rode in the commit that recorded the ask, before anyone was
    # asked (staged after it, it was lost with the runtime the wait closed, and no re-run would ever record it)
    # ... and the cancel ended the turn there too (turn_ended, in the same commit): a replay verifies the
    # whole journal and names the ended turn, instead of stopping at an unsettled one
    assert journal_kinds(actor_system.data_dir, "s1")[-3:] == ["tool_call", "approval", "turn_ended"]
    code, out = replay_cli(actor_system.data_dir, "s1")
    assert code == 0 and "replay ok" in out, out
    assert f"turn {events[-1].turn} was ended by its coordinator" in out and "(cancelled: cancelled by" in out, out


def test_an_approval_is_bound_to_the_workspace_it_was_judged_against(actor_system, tmp_path):
    """The audit: an answer given about one workspace was applied to another. The proposal carries the digest of
    the lease root (an execute call) in its arguments: when the tree changed before the re-run, the answered
    approval is not the call's any more, the command does not run, and the operator is asked again."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "build.sh").write_text("touch built.txt\n")
    sessions, ws = waiting_on_an_approval(actor_system, tmp_path, "sh build.sh", "ask:Bash(sh *)", "built",
                                          call_id="call_build")
    [first] = sessions.approvals("s1")
    bound = first.arguments["_judged_against"]
    assert bound["workspace"] == str(ws.resolve()) and len(bound["sha256"]) == 64

    (ws / "build.sh").write_text("touch built.txt; touch surprise.txt\n")  # changed after the question
    assert sessions.approve("s1", first.approval_id, "build.sh looked fine").status == "approved"
    asked_again = wait_for("asked again", lambda: [a for a in sessions.approvals("s1")
                                                   if a.approval_id != first.approval_id])
    [second] = asked_again
    assert second.call_digest != first.call_digest and second.arguments["command"] == "sh build.sh"
    assert second.arguments["_judged_against"]["sha256"] != bound["sha256"]
    assert not (ws / "built.txt").exists() and not (ws / "surprise.txt").exists()  # the old answer ran nothing

    assert sessions.approve("s1", second.approval_id, "the new build.sh").status == "approved"
    events = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=30))
    assert events[-1].data["status"] == "completed" and (ws / "surprise.txt").exists()
    used = {a.approval_id: a.status for a in sessions.approvals("s1", None)}
    assert used == {first.approval_id: "approved", second.approval_id: "consumed"}


def test_a_coordinator_killed_right_after_the_cancel_commits_leaves_the_turn_ended_in_the_journal(actor_system,
                                                                                                     tmp_path):
    """The journal's ``turn_ended`` commits with the log's settlement, in one transaction: a coordinator that dies
    the moment the cancel's checkpoint has committed (before it could write anything more) leaves a journal whose
    replay names the ended turn, not one that stops at an unsettled turn as a crash's would."""
    from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule

    sessions, _ = waiting_on_an_approval(actor_system, tmp_path, "touch never.txt", "ask:Bash(touch *)", "x")
    [coordinator] = [c for c in actor_system.which_children("agent/coordinator") if c.status == "running"]
    path = f"agent/coordinator/{coordinator.id}"
    actor_system.arm_faults(path, FaultPlan((FaultRule("coordinator.checkpoint_committed", FaultAction.EXIT),)))
    cancel = ControlSession("s1", "cancel", sessions.principal, token=sessions.token)
    with pytest.raises(Exception):  # noqa: B017 - the coordinator exits before it answers; how we hear is not the point
        actor_system.ask(sessions.directory, cancel, 3)
    assert wait_for("cancelled", lambda: sessions.show("s1").state == "cancelled")
    # (its restart found the session terminal and stopped: the journal is as the dead coordinator left it)
    assert journal_kinds(actor_system.data_dir, "s1")[-2:] == ["approval", "turn_ended"]
    code, out = replay_cli(actor_system.data_dir, "s1")
    assert code == 0 and "was ended by its coordinator" in out, out
