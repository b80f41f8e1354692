"""The heartbeat's look at an approval wait leaves an operator's fresh answer to the nudge that follows it.

The operator path answers the approval at grants and then nudges the coordinator through the directory, which offers
its spare runtime with the nudge. A look that took the answer in between started a runtime of its own and left the
spare unused (seen in CI under load: the enumeration's reference resumed on runtime#4 instead of the spare #2, and two
of its sites were then never reached). A nudge that never comes is still made up for by a later look."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ouroactors.authorities.asking import ask_authority
from ouroactors.authorities.grants.actor import AnswerApproval
from ouroactors.authorities.grants.operators import read_credentials
from ouroactors.runtime.coordinator.messages import ApprovalAnswered
from ouroactors.runtime.coordinator.waits import NUDGE_GRACE_S, left_for_nudge
from ouroactors.sessions import GRANTS
from ouroactors.supervision.events import EventReader

from .actor_support import wait_for, waiting_on_an_approval

S = 1_000_000_000


def approval(by: str | None, at: int | None) -> SimpleNamespace:
    return SimpleNamespace(answered_by=by, answered_ns=at, approval_id="a1")


@pytest.mark.parametrize(("by", "age_s", "left"), [
    ("alice", 0.0, True), ("alice", NUDGE_GRACE_S - 0.01, True),  # fresh: its nudge is on its way
    ("alice", NUDGE_GRACE_S, False), ("alice", 60.0, False),  # the nudge was lost: taken now
    ("authority", 0.0, False), (None, 0.0, False),  # grants answered itself (an expiry): no nudge comes
    ("alice", -1.0, False),  # answered "in the future" (a clock stepped back): not waited for
])
def test_which_answers_a_look_leaves_to_the_nudge(by, age_s, left):
    now = 1_000 * S
    assert left_for_nudge(approval(by, now - int(age_s * S)), now) is left


def test_an_answer_of_unknown_time_is_taken_at_once():
    assert left_for_nudge(approval("alice", None), 5 * S) is False
    assert left_for_nudge(SimpleNamespace(), 5 * S) is False


def events_of(system, kind: str) -> list:
    return [e for e in EventReader(str(system.data_dir / "events.jsonl")).poll() if e.kind == kind]


def answer_at_grants(system, sessions) -> str:
    """Approve s1's pending call at grants as the operator path does, without its nudge; the approval's id."""
    [pending] = sessions.approvals("s1")
    name, token = read_credentials(system.data_dir)
    ask_authority(system, GRANTS, AnswerApproval(pending.approval_id, True, name, token, pending.call_digest,
                                                 pending.state_version, "fine"))
    return pending.approval_id


@pytest.mark.multiproc
@pytest.mark.slow
def test_a_look_leaves_a_fresh_answer_to_the_nudge_which_resumes_on_the_spare(actor_system_factory, monkeypatch,
                                                                              tmp_path):
    from ouroactors.runtime.coordinator import actor, waits

    monkeypatch.setattr(actor, "HEARTBEAT_S", 0.05)  # before the system starts: its actors inherit it
    monkeypatch.setattr(actor, "APPROVAL_POLL_S", 0.1)  # a look at every other beat
    monkeypatch.setattr(waits, "NUDGE_GRACE_S", 3600.0)
    system = actor_system_factory("multiproc")
    sessions, ws = waiting_on_an_approval(system, tmp_path, "touch approved.txt", "ask:Bash(touch *)", "done",
                                          spares=1)
    approval_id = answer_at_grants(system, sessions)
    wait_for("a look that leaves the answer", lambda: events_of(system, "approval_left_for_nudge"), timeout=20)
    assert sessions.show("s1").state == "waiting:approval" and not (ws / "approved.txt").exists()
    spare = wait_for("a spare kept", lambda: events_of(system, "spare_kept"), timeout=20)[-1].fields["runtime"]

    sessions._ask(ApprovalAnswered("s1", approval_id))  # the nudge, late
    wait_for("the turn settled", lambda: sessions.show("s1").state == "suspended", timeout=30)
    assert (ws / "approved.txt").exists()
    opened = [e.path for e in events_of(system, "runtime_opened") if e.fields.get("session") == "s1"]
    assert len(opened) == 2 and opened[-1] == spare, (opened, spare)  # the re-run took the spare offered


@pytest.mark.multiproc
@pytest.mark.slow
def test_a_lost_nudge_is_made_up_for_by_a_later_look(actor_system_factory, monkeypatch, tmp_path):
    from ouroactors.runtime.coordinator import actor, waits

    monkeypatch.setattr(actor, "HEARTBEAT_S", 0.05)
    monkeypatch.setattr(actor, "APPROVAL_POLL_S", 0.1)
    assert waits.NUDGE_GRACE_S == 2.0  # the default: the first looks come well within it, on a loaded box too
    system = actor_system_factory("multiproc")
    sessions, ws = waiting_on_an_approval(system, tmp_path, "touch approved.txt", "ask:Bash(touch *)", "done")
    answer_at_grants(system, sessions)  # and no nudge at all
    wait_for("the turn settled by a look", lambda: sessions.show("s1").state == "suspended", timeout=30)
    assert (ws / "approved.txt").exists()
    assert events_of(system, "approval_left_for_nudge")  # the first looks left it, a later one took it
