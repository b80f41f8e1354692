"""Which pending approvals a restart of the grants authority keeps: the table of :mod:`...grants.orphans`, every row."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ouroactors.authorities.grants import approvals as book
from ouroactors.authorities.grants.orphans import KEEP, ORPHANED, Missing, Undecodable, judge
from ouroactors.authorities.session_facts import SessionFacts
from ouroactors.runtime.coordinator.facts import facts_of
from ouroactors.runtime.coordinator.record import PendingWait, PinnedVersions, SessionRecord
from ouroactors.runtime.coordinator.workflow import TERMINAL, State

DIGEST, OTHER = "d" * 64, "e" * 64
VERSION = 7
PINNED = PinnedVersions(prompt="p", model="m", tools="t", workflow="w", policy="pol")


def pending(session_id: str = "s1", version: int = VERSION, digest: str = DIGEST) -> book.Approval:
    return book.request([], approval_id="approval-1", session_id=session_id, tool="shell", call_digest=digest,
                        state_version=version, answerers=("op",), deadline_ns=10_000, now_ns=0, max_pending=8)


def wait(kind: str = "approval", digest: str | None = DIGEST, version: int = VERSION) -> PendingWait:
    return PendingWait(kind=kind, wait_id=f"ask.v{version}.{(digest or 'x')[:16]}" if kind == "approval" else "w1",
                       issued_at_version=version, proposal_digest=digest)


def session(state: State = State.WAITING_APPROVAL, version: int = VERSION,
            waits: tuple[PendingWait, ...] | None = None) -> SessionFacts:
    """What the coordinator's reader (``facts.reader``) hands grants for such a record."""
    if waits is None:
        waits = (wait(),) if state is State.WAITING_APPROVAL else ()
    return facts_of(SessionRecord(session_id="s1", node="n1", state=state, state_version=version, revision=3,
                                  pinned=PINNED, principal="alice", tenant="t", channels=("cli",), waits=waits))


def test_the_session_still_waiting_durably_on_the_approval_keeps_it():
    assert judge(pending(), session()) is KEEP
    # among other waits too (the coordinator may hold more than one)
    assert judge(pending(), session(waits=(wait(digest=OTHER), wait()))) is KEEP


@pytest.mark.parametrize("status", ["approved", "denied", "expired", "consumed"])
def test_an_approval_no_longer_pending_is_not_decided(status):
    decided = replace(pending(), status=status)
    assert judge(decided, Missing()) is None
    assert judge(decided, session()) is None
    assert judge(decided, Undecodable("x")) is None


def test_no_session_record_means_its_waiter_was_in_memory_and_died():
    why = judge(pending(), Missing())
    assert isinstance(why, str) and why.startswith(ORPHANED) and "no durable record" in why


def test_an_undecodable_session_record_fails_closed_and_says_which():
    why = judge(pending(), Undecodable("corrupt record sessions/s1: bad bytes (quarantined)"))
    assert isinstance(why, str) and why.startswith(ORPHANED)
    assert "does not decode" in why and "sessions/s1" in why


@pytest.mark.parametrize("state", sorted(TERMINAL, key=lambda s: s.value))
def test_a_terminal_session_waits_for_nothing(state):
    why = judge(pending(), session(state=state))
    assert isinstance(why, str) and why.startswith(ORPHANED) and state.value in why


@pytest.mark.parametrize("state", [s for s in State if s not in TERMINAL and s is not State.WAITING_APPROVAL])
def test_a_live_session_not_waiting_on_an_approval_is_not_waiting_on_this_one(state):
    why = judge(pending(), session(state=state, waits=(wait(kind="timer"),) if state.wait == "timer" else ()))
    assert isinstance(why, str) and why.startswith(ORPHANED) and "not waiting on an approval" in why


@pytest.mark.parametrize("version", [VERSION - 1, VERSION + 1])
def test_a_session_waiting_at_another_state_version_moved_on(version):
    record = session(version=version, waits=(wait(version=version),))
    why = judge(pending(), record)
    assert isinstance(why, str) and f"waits at state version {version}" in why and f"asked at {VERSION}" in why


@pytest.mark.parametrize("waits", [
    (),  # waiting on nothing (a record the coordinator would not write, read anyway)
    (wait(digest=OTHER),),  # another call
    (wait(version=VERSION - 1),),  # this call, issued at another version
    (wait(digest=None),),  # an approval wait that binds no call
    (PendingWait(kind="external_job", wait_id="job-1", issued_at_version=VERSION, proposal_digest=DIGEST),),
], ids=["none", "other-call", "other-version", "no-digest", "other-kind"])
def test_a_session_waiting_on_another_call_does_not_keep_this_approval(waits):
    why = judge(pending(), session(waits=waits))
    assert isinstance(why, str) and why.startswith(ORPHANED) and "waits on another call" in why


def test_every_pending_row_of_the_table_is_keep_or_a_reason():
    """Exhaustive over the record's shape: state × version × wait; only the one matching row keeps."""
    for state in State:
        for version in (VERSION - 1, VERSION, VERSION + 1):
            for waits in ((), (wait(),), (wait(digest=OTHER),), (wait(version=version),)):
                if state is not State.WAITING_APPROVAL and any(w.kind == "approval" for w in waits):
                    waits = ()
                verdict = judge(pending(), session(state=state, version=version, waits=waits))
                kept = (state is State.WAITING_APPROVAL and version == VERSION
                        and any(w.proposal_digest == DIGEST and w.issued_at_version == VERSION for w in waits))
                assert (verdict is KEEP) == kept, (state, version, waits, verdict)
                assert verdict is KEEP or (isinstance(verdict, str) and verdict.startswith(ORPHANED))


def test_a_review_judges_by_the_same_table_and_says_it_was_a_review():
    """A review (a coordinator cancelling its session) denies by the same rows; its reason says what happened."""
    from ouroactors.authorities.grants.orphans import REVIEWED

    assert judge(pending(), session(), REVIEWED) is KEEP
    why = judge(pending(), session(State.CANCELLED), REVIEWED)
    assert isinstance(why, str) and why.startswith(REVIEWED) and "cancelled" in why and ORPHANED not in why
