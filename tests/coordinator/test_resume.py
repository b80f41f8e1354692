"""Resume events: identity, authority, freshness, ordering/duplicates and scope, each refusal typed."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from ouroactors.runtime.coordinator.record import PendingWait
from ouroactors.runtime.coordinator.resume import (
    Accept,
    ActorKind,
    Code,
    Kind,
    Refuse,
    ResumeEvent,
    VerifiedActor,
    check,
    system_actor,
    verified_operator,
    verified_principal,
)
from ouroactors.runtime.coordinator.workflow import Event, State

from .support import new_record

OPS = {"bob": hashlib.sha256(b"bob-token").hexdigest(), "carol": hashlib.sha256(b"carol-token").hexdigest()}
BOB = VerifiedActor("bob", ActorKind.OPERATOR)
APPROVAL = PendingWait(kind="approval", wait_id="ap1", issued_at_version=5, authorized=("bob",),
                       proposal_digest="prop-1")


def waiting(**changes: Any):
    base: dict[str, Any] = dict(state=State.WAITING_APPROVAL, state_version=5, waits=(APPROVAL,))
    base.update(changes)
    return new_record(**base)


def approval(**changes: Any) -> ResumeEvent:
    base: dict[str, Any] = dict(event_id="ev1", kind=Kind.APPROVAL, session_id="s1", channel="cli", tenant="t",
                                actor="bob", expected_version=5, wait_id="ap1", proposal_digest="prop-1",
                                payload={"decision": "approve"})
    base.update(changes)
    return ResumeEvent(**base)


def refused(result: Accept | Refuse) -> Code:
    assert isinstance(result, Refuse), result
    assert result.detail
    return result.code


def test_a_fresh_authorised_approval_is_accepted() -> None:
    assert check(waiting(), approval(), BOB, seen=False, now_ns=0) == Accept(Event.APPROVAL_ANSWERED, APPROVAL)


def test_a_stale_approval_for_an_old_state_version_does_not_resume() -> None:
    assert refused(check(waiting(state_version=7), approval(), BOB, seen=False, now_ns=0)) is Code.STALE


def test_an_answer_to_another_proposal_is_stale() -> None:
    assert refused(check(waiting(), approval(proposal_digest="prop-0"), BOB, seen=False, now_ns=0)) is Code.STALE


@pytest.mark.parametrize(("changes", "code"), [
    ({"session_id": "s2"}, Code.SCOPE),
    ({"tenant": "other"}, Code.SCOPE),
    ({"channel": "slack"}, Code.SCOPE),
    ({"actor": "carol"}, Code.IDENTITY),  # claims carol, bob was verified
    ({"wait_id": "ap9"}, Code.ORDERING),
    ({"wait_id": None}, Code.ORDERING),
])
def test_refusals_by_field(changes: dict[str, Any], code: Code) -> None:
    assert refused(check(waiting(), approval(**changes), BOB, seen=False, now_ns=0)) is code


def test_duplicates_are_named_before_staleness() -> None:
    assert refused(check(waiting(state_version=9), approval(), BOB, seen=True, now_ns=0)) is Code.DUPLICATE


def test_authority_only_the_named_operator_and_never_a_principal() -> None:
    carol = VerifiedActor("carol", ActorKind.OPERATOR)
    assert refused(check(waiting(), approval(actor="carol"), carol, seen=False, now_ns=0)) is Code.AUTHORITY
    alice = verified_principal("bob")  # a principal who happens to be called bob is not the operator bob
    assert refused(check(waiting(), approval(), alice, seen=False, now_ns=0)) is Code.AUTHORITY
    anyone = PendingWait(kind="approval", wait_id="ap1", issued_at_version=5, proposal_digest="prop-1")
    assert isinstance(check(waiting(waits=(anyone,)), approval(actor="carol"), carol, seen=False, now_ns=0), Accept)


def test_operator_identity_is_verified_from_credentials() -> None:
    assert verified_operator(OPS, "bob", "bob-token") == BOB
    assert verified_operator(OPS, "bob", "carol-token") is None
    assert verified_operator(OPS, "mallory", "x") is None


def test_state_checks() -> None:
    for state in (State.COMPLETED, State.CANCELLED, State.RUNNING, State.SUSPENDED, State.PARKED):
        assert refused(check(new_record(state=state, state_version=5), approval(), BOB, seen=False, now_ns=0)) \
            is Code.STATE
    timer = new_record(state=State.WAITING_TIMER, state_version=5)
    assert refused(check(timer, approval(), BOB, seen=False, now_ns=0)) is Code.STATE


@pytest.mark.parametrize(("state", "instead"), [
    (State.RUNNING, "a steer adds to the running turn"),
    (State.WAITING_APPROVAL, "answer its approval first"),
    (State.WAITING_TIMER, "when its timer fires"),
    (State.WAITING_JOB, "when its job completes"),
    (State.RECOVERING, "once the recovery has suspended"),
    (State.PARKED, "then session resume"),
])
def test_a_message_refused_for_the_state_says_what_to_do_instead(state: State, instead: str) -> None:
    # a second `session send` while the first turn ran was told only "this one is running"
    record = new_record(state=state, state_version=2)
    message = ResumeEvent(event_id="m1", kind=Kind.MESSAGE, session_id="s1", channel="cli", tenant="t",
                          actor="alice", expected_version=2, payload={"text": "go on"})
    refusal = check(record, message, verified_principal("alice"), seen=False, now_ns=0)
    assert refused(refusal) is Code.STATE
    assert isinstance(refusal, Refuse) and f"this one is {state.value} (" in refusal.detail
    assert instead in refusal.detail


def test_messages_resume_a_suspended_session_from_its_principal_only() -> None:
    record = new_record(state=State.SUSPENDED, state_version=2)
    message = ResumeEvent(event_id="m1", kind=Kind.MESSAGE, session_id="s1", channel="cli", tenant="t",
                          actor="alice", expected_version=2, payload={"text": "go on"})
    assert check(record, message, verified_principal("alice"), seen=False, now_ns=0) == Accept(Event.MESSAGE, None)
    mallory = ResumeEvent(**{**message.__dict__, "actor": "mallory"})
    assert refused(check(record, mallory, verified_principal("mallory"), seen=False, now_ns=0)) is Code.AUTHORITY
    assert refused(check(record, message, BOB, seen=False, now_ns=0)) is Code.IDENTITY


def test_timers_fire_only_when_due_and_only_from_the_system() -> None:
    record = new_record(state=State.WAITING_TIMER, state_version=3)  # timer w1 due at 1000
    fire = ResumeEvent(event_id="t1", kind=Kind.TIMER, session_id="s1", channel="cli", tenant="t",
                       actor=system_actor().name, expected_version=3, wait_id="w1")
    assert refused(check(record, fire, system_actor(), seen=False, now_ns=999)) is Code.ORDERING
    assert check(record, fire, system_actor(), seen=False, now_ns=1000) == Accept(Event.TIMER_FIRED, record.waits[0])
    forged = ResumeEvent(**{**fire.__dict__, "actor": "bob"})
    assert refused(check(record, forged, BOB, seen=False, now_ns=1000)) is Code.AUTHORITY


def test_jobs_complete_through_a_resume_event() -> None:
    record = new_record(state=State.WAITING_JOB, state_version=4)
    done = ResumeEvent(event_id="j1", kind=Kind.JOB, session_id="s1", channel="cli", tenant="t",
                       actor=system_actor().name, expected_version=4, wait_id="w1", payload={"result": "ok"})
    assert check(record, done, system_actor(), seen=False, now_ns=0) == Accept(Event.JOB_COMPLETED, record.waits[0])


def test_the_principal_completes_the_job_it_waits_on_and_nobody_else_does() -> None:
    record = new_record(state=State.WAITING_JOB, state_version=4)
    done = ResumeEvent(event_id="j1", kind=Kind.JOB, session_id="s1", channel="cli", tenant="t", actor="alice",
                       expected_version=4, wait_id="w1")
    assert check(record, done, verified_principal("alice"), seen=False, now_ns=0) == \
        Accept(Event.JOB_COMPLETED, record.waits[0])
    mallory = ResumeEvent(**{**done.__dict__, "actor": "mallory"})
    assert refused(check(record, mallory, verified_principal("mallory"), seen=False, now_ns=0)) is Code.AUTHORITY
    assert refused(check(record, done, verified_principal("alice"), seen=True, now_ns=0)) is Code.DUPLICATE


def test_an_approval_the_authority_closed_itself_resumes_but_never_approves() -> None:
    expired = approval(actor=system_actor().name, payload={"status": "expired"})
    assert check(waiting(), expired, system_actor(), seen=False, now_ns=0) == Accept(Event.APPROVAL_ANSWERED, APPROVAL)
    forged = approval(actor=system_actor().name, payload={"status": "approved"})
    assert refused(check(waiting(), forged, system_actor(), seen=False, now_ns=0)) is Code.AUTHORITY


def test_bad_events_are_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="event_id"):
        approval(event_id="a/b")
    with pytest.raises(ValueError, match="expected_version"):
        approval(expected_version=-1)
    with pytest.raises(ValueError):
        approval(kind="nope")


def job_waiting(due_ns: int | None = 1000):
    wait = PendingWait(kind="external_job", wait_id="w1", issued_at_version=4, due_ns=due_ns)
    return new_record(state=State.WAITING_JOB, state_version=4, waits=(wait,))


def test_a_job_completion_after_its_expiry_is_refused_even_before_the_expiry_is_applied() -> None:
    record = job_waiting(due_ns=1000)
    done = ResumeEvent(event_id="j1", kind=Kind.JOB, session_id="s1", channel="cli", tenant="t", actor="alice",
                       expected_version=4, wait_id="w1")
    assert check(record, done, verified_principal("alice"), seen=False, now_ns=999) == \
        Accept(Event.JOB_COMPLETED, record.waits[0])
    late = check(record, done, verified_principal("alice"), seen=False, now_ns=1000)
    assert refused(late) is Code.EXPIRED and "expired at 1970-01-01T00:00:00.000Z (1000 ns)" in late.detail
    # once the expiry is applied (the session suspended with its reason), the completion is still told why
    expired = record.model_copy(update={"state": State.SUSPENDED, "state_version": 5, "waits": (),
                                        "reason": "external job 'w1' expired before it completed (due …)"})
    later = check(expired, done, verified_principal("alice"), seen=False, now_ns=2000)
    assert refused(later) is Code.EXPIRED and later.detail.startswith("external job 'w1' expired before it completed")
    other = ResumeEvent(**{**done.__dict__, "wait_id": "w2"})  # another job id: the state is what refuses it
    assert refused(check(expired, other, verified_principal("alice"), seen=False, now_ns=2000)) is Code.STATE


def test_only_the_system_expires_a_job_and_only_once_it_is_due() -> None:
    record = job_waiting(due_ns=1000)
    expiry = ResumeEvent(event_id="x1", kind=Kind.JOB_EXPIRY, session_id="s1", channel="cli", tenant="t",
                         actor=system_actor().name, expected_version=4, wait_id="w1")
    accepted = check(record, expiry, system_actor(), seen=False, now_ns=1000)
    assert isinstance(accepted, Accept) and accepted.event is Event.JOB_EXPIRED and "'w1' expired" in accepted.reason
    assert refused(check(record, expiry, system_actor(), seen=False, now_ns=999)) is Code.ORDERING
    by_owner = ResumeEvent(**{**expiry.__dict__, "actor": "alice"})  # the principal cannot expire its own job
    assert refused(check(record, by_owner, verified_principal("alice"), seen=False, now_ns=5000)) is Code.AUTHORITY
    # a wait with no expiry (a record from before expiries) never expires
    assert refused(check(job_waiting(None), expiry, system_actor(), seen=False, now_ns=10**18)) is Code.ORDERING
