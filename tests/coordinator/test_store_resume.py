"""Resume events and durable timers through the store: applied or logged in one transaction, never twice."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ouroactors.authorities.storage.commit import Committed
from ouroactors.authorities.storage.env import close_env, open_env
from ouroactors.core import clock
from ouroactors.runtime.coordinator.errors import UnknownSession
from ouroactors.runtime.coordinator.record import PendingWait
from ouroactors.runtime.coordinator.resume import ActorKind, Kind, ResumeEvent, VerifiedActor
from ouroactors.runtime.coordinator.store import SessionStore
from ouroactors.runtime.coordinator.timers import due, fire_due, next_due, timer_event
from ouroactors.runtime.coordinator.workflow import Event, State

from .support import new_record

BOB = VerifiedActor("bob", ActorKind.OPERATOR)


def committed(outcome):
    assert isinstance(outcome, Committed), outcome
    return outcome.value


def waiting_approval(store: SessionStore):
    rec = committed(store.create(new_record()))
    rec = committed(store.transition("s1", rec.revision, Event.MESSAGE))
    wait = PendingWait(kind="approval", wait_id="ap1", issued_at_version=2, authorized=("bob",))
    return committed(store.transition("s1", rec.revision, Event.WAIT_APPROVAL, waits=(wait,)))


def answer(event_id: str = "ev1", version: int = 2) -> ResumeEvent:
    return ResumeEvent(event_id=event_id, kind=Kind.APPROVAL, session_id="s1", channel="cli", tenant="t",
                       actor="bob", expected_version=version, wait_id="ap1", payload={"decision": "approve"})


def test_an_accepted_answer_resumes_once_and_its_duplicate_is_logged(store, config) -> None:
    rec = waiting_approval(store)
    applied = committed(store.resume("s1", answer(), BOB))
    assert applied.accepted and applied.record.state is State.RUNNING and applied.record.waits == ()
    assert applied.record.state_version == rec.state_version + 1 and store.seen("s1", "ev1")
    close_env(config)
    store = SessionStore(open_env(config))  # duplicates are known across restarts
    again = committed(store.resume("s1", answer(version=applied.record.state_version), BOB))
    assert not again.accepted and again.rejection.code == "duplicate"
    assert store.get("s1") == applied.record  # a rejection does not bump the revision


def test_a_stale_approval_does_not_resume_and_is_recorded(store) -> None:
    rec = waiting_approval(store)
    stale = committed(store.resume("s1", answer("old", version=1), BOB))
    assert not stale.accepted and store.get("s1") == rec
    forged = committed(store.resume("s1", answer("forged"), VerifiedActor("carol", ActorKind.OPERATOR)))
    log = store.rejections("s1")
    assert [(r.seq, r.event_id, r.code, r.expected_version, r.found_version) for r in log] == [
        (1, "old", "stale", 1, 2), (2, "forged", "identity", 2, 2)]
    assert forged.rejection == log[1]
    assert not store.seen("s1", "old")


def test_resume_of_an_unknown_session(store) -> None:
    with pytest.raises(UnknownSession):
        store.resume("s1", answer(), BOB)


def test_timer_schedule_is_pure() -> None:
    waits = [PendingWait(kind="timer", wait_id="b", issued_at_version=0, due_ns=20),
             PendingWait(kind="timer", wait_id="a", issued_at_version=0, due_ns=10),
             PendingWait(kind="approval", wait_id="c", issued_at_version=0, due_ns=5)]
    assert [w.wait_id for w in due(waits, 15)] == ["a"]
    assert [w.wait_id for w in due(waits, 20)] == ["a", "b"]
    assert next_due(waits) == 10 and next_due(waits[2:]) is None


def timer_session(store: SessionStore, sid: str, due_ns: int):
    rec = committed(store.create(new_record(sid)))
    rec = committed(store.transition(sid, rec.revision, Event.MESSAGE))
    wait = PendingWait(kind="timer", wait_id="t1", issued_at_version=rec.state_version + 1, due_ns=due_ns)
    return committed(store.transition(sid, rec.revision, Event.WAIT_TIMER, waits=(wait,)))


def test_durable_timers_fire_once_after_a_restart(store, config) -> None:
    timer_session(store, "s1", 1_000)
    timer_session(store, "s2", 5_000)
    close_env(config)
    store = SessionStore(open_env(config))
    assert store.timers_due(999) == []
    assert store.timers_due(5_000) == [(1_000, "s1"), (5_000, "s2")]
    fired = fire_due(store, now_ns=1_500)
    assert [(f.session_id, f.accepted) for f in fired] == [("s1", True)]
    assert store.get("s1").state is State.RUNNING and store.timers_due(1_500) == []
    assert fire_due(store, now_ns=1_500) == []  # the index moved with the transition
    rec = store.get("s2")
    replay = store.resume("s2", timer_event(rec, rec.waits[0]), VerifiedActor("system:coordinator",
                                                                               ActorKind.SYSTEM), now_ns=4_000)
    assert replay.value.rejection.code == "ordering"  # not due yet


def test_timers_run_on_the_simulated_clock(store) -> None:
    virtual = clock.VirtualClock()
    previous = clock.install(virtual)
    try:
        start = clock.time_ns()
        timer_session(store, "s1", start + 10_000_000_000)  # due in 10 virtual seconds
        assert fire_due(store) == []
        virtual.advance(10_000_000_000)
        assert [f.accepted for f in fire_due(store)] == [True]
    finally:
        clock.install(previous)


def test_what_resumed_the_session_survives_a_crash(store, config) -> None:
    waiting_approval(store)
    committed(store.resume("s1", answer(), BOB, now_ns=77))
    close_env(config)
    store = SessionStore(open_env(config))
    record = store.get("s1")
    assert record.resumed_by == "ev1"
    accepted = store.accepted("s1", record.resumed_by)
    assert (accepted.actor, accepted.payload, accepted.from_version, accepted.at_ns) == (
        "bob", {"decision": "approve"}, 2, 77)
    assert accepted.at_cursor == 0  # the log's cursor when it was accepted: nothing published yet
    assert store.accepted("s1", "never") is None


def test_an_event_accepted_before_the_cursor_was_kept_reads_back_with_none() -> None:
    """Version 1 of the accepted-event record had no ``at_cursor``: it decodes, with only its time to go by."""
    import msgpack

    from ouroactors.core.codec import decode, encode
    from ouroactors.runtime.coordinator.record import AcceptedEvent

    now = AcceptedEvent(event_id="e", kind="message", actor="bob", channel="cli", wait_id=None, payload={},
                        from_version=1, at_ns=5, at_cursor=3)
    schema, version, *values = msgpack.unpackb(encode(now), raw=False)
    assert version == 2 and values[-1] == 3
    old = msgpack.packb([schema, 1, *values[:-1]], use_bin_type=True)
    assert decode(old, AcceptedEvent) == now.model_copy(update={"at_cursor": None})


_EXAMPLES = iter(range(10**6))
SYSTEM = VerifiedActor("system:coordinator", ActorKind.SYSTEM)
ACTORS = {"bob": BOB, "carol": VerifiedActor("carol", ActorKind.OPERATOR), "alice": VerifiedActor("alice",
                                                                                                    ActorKind.PRINCIPAL)}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["e1", "e2", "e3", "e4"]), st.sampled_from(sorted(ACTORS)),
                          st.integers(min_value=1, max_value=4), st.sampled_from(["approval", "message"])),
                min_size=1, max_size=12))
def test_no_resume_event_is_acted_on_twice(store, events) -> None:
    """Whatever arrives (replays, stale versions, strangers), each event id moves the session at most once,
    every refusal is logged, and a refusal never moves the record."""
    sid = f"p{next(_EXAMPLES)}"
    rec = committed(store.create(new_record(sid)))
    rec = committed(store.transition(sid, rec.revision, Event.MESSAGE))
    wait = PendingWait(kind="approval", wait_id="ap1", issued_at_version=2, authorized=("bob",))
    rec = committed(store.transition(sid, rec.revision, Event.WAIT_APPROVAL, waits=(wait,)))
    accepted: list[str] = []
    refused = 0
    for event_id, who, version, kind in events:
        before = store.get(sid)
        event = ResumeEvent(event_id=event_id, kind=Kind(kind), session_id=sid, channel="cli", tenant="t",
                            actor=who, expected_version=version, wait_id="ap1" if kind == "approval" else None)
        applied = committed(store.resume(sid, event, ACTORS[who]))
        if applied.accepted:
            accepted.append(event_id)
            assert applied.record.state_version == before.state_version + 1
        else:
            refused += 1
            assert store.get(sid) == before
    assert len(accepted) == len(set(accepted))
    assert store.get(sid).state_version == rec.state_version + len(accepted)
    assert len(store.rejections(sid)) == refused


def test_a_corrupt_waiting_session_does_not_stop_the_other_timers(store, env) -> None:
    from ouroactors.authorities.storage.env import db

    timer_session(store, "s1", 1_000)
    timer_session(store, "s2", 2_000)
    with env.begin(write=True) as txn:
        txn.put(b"s1", b"junk", db=db(env, b"sessions"))
    fired = fire_due(store, now_ns=3_000)
    assert [(f.session_id, f.accepted) for f in fired] == [("s1", False), ("s2", True)]
    assert "corrupt" in fired[0].detail and "sessions/s1" in store.quarantined


def test_the_rejection_log_keeps_the_latest_entries_and_counts_them_all(store, monkeypatch) -> None:
    from ouroactors.runtime.coordinator import store as store_module

    monkeypatch.setattr(store_module, "REJECTIONS_KEPT", 3)  # a stranger's refused events must not grow it forever
    waiting_approval(store)
    for i in range(7):
        assert not committed(store.resume("s1", answer(f"old{i}", version=1), BOB)).accepted
    assert [r.event_id for r in store.rejections("s1")] == ["old4", "old5", "old6"]
    assert [r.seq for r in store.rejections("s1")] == [5, 6, 7] and store.rejection_count("s1") == 7
    assert store.rejection_count("no-such") == 0


def job_session(store: SessionStore, sid: str, due_ns: int):
    rec = committed(store.create(new_record(sid)))
    wait = PendingWait(kind="external_job", wait_id="build-7", issued_at_version=rec.state_version + 1,
                       due_ns=due_ns, text="the build finished")
    return committed(store.transition(sid, rec.revision, Event.WAIT_JOB, waits=(wait,)))


def test_an_expired_job_wait_suspends_the_session_once_with_the_reason_after_a_restart(store, config) -> None:
    waiting = job_session(store, "s1", 1_000)
    close_env(config)
    store = SessionStore(open_env(config))
    assert store.timers_due(1_000) == [(1_000, "s1")]  # the expiry is indexed like a timer
    assert fire_due(store, now_ns=999) == []
    fired = fire_due(store, now_ns=1_000)
    assert [(f.session_id, f.wait_id, f.accepted, f.detail) for f in fired] == [("s1", "build-7", True, "expired")]
    after = store.get("s1")
    assert after.state is State.SUSPENDED and after.waits == () and after.state_version == waiting.state_version + 1
    assert "'build-7' expired" in after.reason and store.timers_due(10**18) == []
    late = ResumeEvent(event_id="j-late", kind=Kind.JOB, session_id="s1", channel="cli", tenant="t", actor="alice",
                       expected_version=after.state_version, wait_id="build-7")
    refusal = store.resume("s1", late, VerifiedActor("alice", ActorKind.PRINCIPAL), now_ns=2_000).value
    assert not refusal.accepted and refusal.rejection.code == "expired"  # recorded, nothing moved, told why
    assert refusal.rejection.detail.startswith("external job 'build-7' expired before it completed (due 1970-")
    assert store.get("s1").state is State.SUSPENDED
    # a message afterwards resumes it and clears the reason
    message = ResumeEvent(event_id="m1", kind=Kind.MESSAGE, session_id="s1", channel="cli", tenant="t",
                          actor="alice", expected_version=after.state_version, payload={"text": "go on"})
    resumed = store.resume("s1", message, VerifiedActor("alice", ActorKind.PRINCIPAL), now_ns=3_000).value
    assert resumed.accepted and resumed.record.state is State.RUNNING and resumed.record.reason is None


def _job_done(event_id: str, version: int) -> ResumeEvent:
    return ResumeEvent(event_id=event_id, kind=Kind.JOB, session_id="s1", channel="cli", tenant="t", actor="alice",
                       expected_version=version, wait_id="build-7", payload={"result": {"ok": True}})


def test_a_job_completed_twice_is_named_a_duplicate_and_a_new_wait_on_it_is_answered(store) -> None:
    # each completion carries an id of its own (the CLI's and Python's default), so the event id cannot tell the
    # second one; its job can, while the session waits on no job of that id
    alice = VerifiedActor("alice", ActorKind.PRINCIPAL)
    waiting = job_session(store, "s1", 10**18)
    done = committed(store.resume("s1", _job_done("j-1", waiting.state_version), alice, now_ns=1))
    assert done.accepted and done.record.state is State.RUNNING
    again = committed(store.resume("s1", _job_done("j-2", done.record.state_version), alice, now_ns=2))
    assert not again.accepted and again.rejection.code == "duplicate", again.rejection
    assert again.rejection.detail == ("external job 'build-7' was completed already (event 'j-1' by 'alice', at "
                                      f"state version {waiting.state_version}); the session waits on no job of "
                                      "that id now")
    assert store.rejections("s1")[-1].event_id == "j-2"  # recorded
    # the session waits on a job of the same name again: its completion is a new one, answered
    suspended = committed(store.transition("s1", done.record.revision, Event.SUSPEND))
    wait = PendingWait(kind="external_job", wait_id="build-7", issued_at_version=suspended.state_version + 1,
                       due_ns=10**18)
    rewaiting = committed(store.transition("s1", suspended.revision, Event.WAIT_JOB, waits=(wait,)))
    answered = committed(store.resume("s1", _job_done("j-3", rewaiting.state_version), alice, now_ns=3))
    assert answered.accepted and answered.record.state is State.RUNNING
