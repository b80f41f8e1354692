"""Conversation snapshots: an open continues from a snapshot the journal attests and replays only the turns after it;
a snapshot that the journal does not attest (altered, moved, from another chain, another workflow, past the tail turn)
is ignored and the whole journal replayed, with the same outcome as without one."""

from __future__ import annotations

import itertools
from functools import partial

import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ouroactors.authorities.storage import commit
from ouroactors.authorities.storage.env import db
from ouroactors.core.codec import encode
from ouroactors.runtime.execution import reading, snapshot_rider, snapshots, steps, versions
from ouroactors.runtime.execution.journal import ANCHOR_DB
from ouroactors.runtime.execution.loop import LoopState
from ouroactors.runtime.execution.model import Message
from ouroactors.runtime.execution.replay import replay, replay_session
from ouroactors.runtime.execution.snapshot_rider import SnapshotRider, tail_hook
from ouroactors.runtime.execution.snapshots import ConversationSnapshot
from ouroactors.runtime.execution.tail import SettledTail

from .loop_support import call, flip_last_byte, make_session, text, usage

CONFIG = '[sandbox]\nmode = "none"\n[limits]\nmax_tokens = 100000000'


def _session(env, turns: int, session: str = "s1"):
    """A session of ``turns`` turns, each a tool call and an answer; returns the harness (more turns can follow)."""
    script = []
    for i in range(turns + 10):
        script.append([call(f"r{i}", "read", path=f"f{i}.txt"), usage(10, 5)])
        script.append([text(f"answer {i}"), usage(10, 5)])
    h = make_session(env, session, script, config=CONFIG)
    for i in range(turns):
        trio.run(h.loop.run_turn, f"question {i}")
    return h


def _from(env, start, sink=None):
    return trio.run(partial(replay_session, env, "s1", start=start, sink=sink))


def _snapshot_after_full_replay(env) -> ConversationSnapshot:
    """What an open leaves: the full replay's last state, staged and committed as a journal rider would."""
    report = replay(env, "s1")
    rider = SnapshotRider(env, "s1")
    staged, why = rider.stage(report.verified_turns, report.state, report.settled_at, report.encodings,
                                report.opened)
    assert why is None and staged == report.settled_at[0]
    put: list[int | None] = []
    outcome = commit.write(env, lambda txn: put.append(rider.put_staged(txn, isolate=True)))
    rider.settle_staged(put[0], outcome)
    assert isinstance(outcome, commit.Committed) and rider.saved == staged and rider.pending is None
    found = snapshots.load(env, "s1")
    assert isinstance(found, ConversationSnapshot) and found.turns == report.verified_turns
    return found


def _put_raw(env, value: bytes) -> None:
    with env.begin(write=True) as txn:
        txn.put(snapshots.snapshot_key(b"s1"), value, db=db(env, ANCHOR_DB))


def test_an_open_replays_only_the_turns_after_the_snapshot_and_reaches_the_same_state(env):
    h = _session(env, 12)
    snap = _snapshot_after_full_replay(env)
    for i in range(12, 15):
        trio.run(h.loop.run_turn, f"question {i}")
    full = replay(env, "s1")
    start, refused = snapshots.offered(env, "s1", tail_turn=0)
    assert refused is None and start == snap
    report = _from(env, start)
    assert report.ok and report.snapshot_refused is None and report.boundary is None
    assert (report.snapshot_turns, report.verified_turns) == (12, 3)
    assert report.state == full.state == h.loop.state()
    assert report.settled_at == full.settled_at
    assert report.records < full.records / 4  # it read the records after the snapshot, not the session's


def test_a_snapshot_at_the_head_replays_nothing(env):
    h = _session(env, 9)
    snap = _snapshot_after_full_replay(env)
    report = _from(env, snap)
    assert (report.snapshot_turns, report.verified_turns, report.snapshot_refused) == (9, 0, None)
    assert report.state == h.loop.state()


def test_a_replay_of_nothing_stages_nothing_and_a_rider_with_nothing_staged_puts_nothing(env):
    _session(env, 3)
    snap = _snapshot_after_full_replay(env)
    report = _from(env, snap)  # the snapshot is at the head: no turn replayed
    assert (report.snapshot_turns, report.verified_turns) == (3, 0)
    rider = SnapshotRider(env, "s1")
    assert rider.stage(report.verified_turns, report.state, report.settled_at, report.encodings,
                       report.opened) == (None, None)
    with env.begin(write=True) as txn:
        assert rider.put_staged(txn, isolate=True) is None
    assert snapshots.load(env, "s1") == snap


def test_a_small_conversation_is_snapshotted_after_one_replayed_turn():
    """A session's runtime is a new process per message: each open replays the turns since the last snapshot, so a
    small conversation is snapshotted after every one (the next open replays at most one turn)."""
    kib = 1024
    assert [snapshots.replays_before_snapshot(n) for n in (-1, 0, 1, 10 * kib, 59 * kib)] == [1, 1, 1, 1, 1]
    assert snapshots.replays_before_snapshot(160 * kib) == 2  # sqrt(160 / 40)
    assert snapshots.replays_before_snapshot(640 * kib) == 4
    assert snapshots.replays_before_snapshot(100 << 20) == snapshots.REPLAY_BEFORE_SNAPSHOT  # never fewer than that


@given(st.integers(min_value=0, max_value=1 << 40), st.integers(min_value=0, max_value=1 << 40))
def test_a_larger_snapshot_never_waits_for_fewer_replayed_turns(a, b):
    small, large = sorted((a, b))
    assert 1 <= snapshots.replays_before_snapshot(small) <= snapshots.replays_before_snapshot(large) \
        <= snapshots.REPLAY_BEFORE_SNAPSHOT


def _long_answers(env, turns: int, answer_bytes: int):
    script = [[text("x" * answer_bytes), usage(10, 5)] for _ in range(turns)]
    h = make_session(env, "s1", script, config=CONFIG)
    for i in range(turns):
        trio.run(h.loop.run_turn, f"question {i}")
    return h


def test_a_large_conversation_is_snapshotted_after_more_replayed_turns(env):
    """~200 KiB of conversation: a snapshot waits for two replayed turns (one would cost more to write than the
    replay it saves)."""
    _long_answers(env, 1, 200 * 1024)
    report = replay(env, "s1")
    assert report.verified_turns == 1 and len(report.encodings) > 160 * 1024
    rider = SnapshotRider(env, "s1")
    assert rider.stage(report.verified_turns, report.state, report.settled_at, report.encodings,
                       report.opened) == (None, None)
    assert rider.stage(2, report.state, report.settled_at, report.encodings, report.opened)[0] == \
        report.settled_at[0]


def test_a_staged_snapshot_is_dropped_unless_its_commit_lands(env):
    _session(env, 8)
    report = replay(env, "s1")
    rider = SnapshotRider(env, "s1")
    rider.stage(report.verified_turns, report.state, report.settled_at, report.encodings,
                                report.opened)
    txn = env.begin(write=True)
    staged = rider.put_staged(txn, isolate=True)
    txn.abort()
    rider.settle_staged(staged, commit.Unknown("the commit's outcome is unknown"))
    assert snapshots.load(env, "s1") is None and rider.pending is not None and rider.saved is None


def _altered(snap: ConversationSnapshot, **changes) -> bytes:
    return encode(snap.model_copy(update=changes))


def test_a_snapshot_the_journal_does_not_attest_is_ignored_and_the_whole_journal_replayed(env):
    h = _session(env, 10)
    snap = _snapshot_after_full_replay(env)
    trio.run(h.loop.run_turn, "question 10")
    full = replay(env, "s1")
    settled = [r for r in reading.records(env, "s1") if r.kind == "turn_settled"]
    forged = list(snapshots.state_of(snap).conversation)
    forged[0] = Message(role="user", content="a question never asked")
    cases = {
        "digest differs": _altered(snap, messages=steps.Digests().encodings(forged)),
        "digest differs ": _altered(snap, count=snap.count - 1),  # the same bytes, read as one message fewer
        "tokens used": _altered(snap, tokens_used=snap.tokens_used + 1),
        "settles turn": _altered(snap, turns=snap.turns - 1),
        "snapshot's hash": _altered(snap, hash=bytes(32)),
        "not turn_settled": _altered(snap, seq=snap.seq - 1, hash=reading.records(env, "s1")[snap.seq - 1].hash),
        "settles turn 9": _altered(snap, seq=settled[8].seq, hash=settled[8].hash),  # an earlier turn's record
        "gone": _altered(snap, seq=snap.seq + 10_000),
    }
    for why, value in cases.items():
        _put_raw(env, value)
        start, refused = snapshots.offered(env, "s1", tail_turn=0)
        assert start is not None and refused is None  # it decodes and is of this workflow: the journal decides
        report = _from(env, start)
        refused_for = report.snapshot_refused
        assert refused_for is not None and why.strip() in refused_for, (why, refused_for)
        assert (report.snapshot_turns, report.verified_turns) == (0, 11)
        assert report.state == full.state and report.ok


def test_undecodable_or_other_workflow_snapshots_are_not_offered(env, monkeypatch):
    _session(env, 8)
    snap = _snapshot_after_full_replay(env)
    _put_raw(env, b"\x93garbage")
    start, refused = snapshots.offered(env, "s1", tail_turn=0)
    assert start is None and refused is not None and "does not decode" in refused
    _put_raw(env, _altered(snap, workflow="turn-loop/1"))
    start, refused = snapshots.offered(env, "s1", tail_turn=0)
    assert start is None and refused is not None and versions.WORKFLOW in refused


def test_the_tail_turn_is_always_replayed(env):
    """A replacement runtime derives the events a crash withheld by replaying that turn: a snapshot at or past it is
    not used; one before it is, and the turn's events come out exactly as from the whole journal."""
    h = _session(env, 9)
    snap = _snapshot_after_full_replay(env)
    assert snapshots.offered(env, "s1", tail_turn=9)[0] is None
    assert "must be derived again" in (snapshots.offered(env, "s1", tail_turn=9)[1] or "")
    trio.run(h.loop.run_turn, "question 9")
    start, refused = snapshots.offered(env, "s1", tail_turn=10)
    assert start == snap and refused is None
    from_snapshot, whole = SettledTail(10), SettledTail(10)
    _from(env, start, sink=from_snapshot)
    _from(env, None, sink=whole)
    assert from_snapshot.settled and from_snapshot.events == whole.events


def test_a_record_changed_after_the_snapshot_stops_the_replay_where_the_whole_replay_stops(env):
    h = _session(env, 9)
    snap = _snapshot_after_full_replay(env)
    for i in range(9, 12):
        trio.run(h.loop.run_turn, f"question {i}")
    settled = [r for r in reading.records(env, "s1") if r.kind == "turn_settled"]
    flip_last_byte(env, "s1", settled[10].seq)
    whole = replay(env, "s1")
    report = _from(env, snap)
    assert report.snapshot_refused is None and report.boundary == whole.boundary
    assert report.boundary is not None and report.boundary.reason == "chain_broken"
    assert (report.snapshot_turns, report.verified_turns) == (9, 1) and whole.verified_turns == 10
    assert report.state == whole.state


def test_the_snapshot_needs_no_record_before_it_and_its_opened_fields_are_checked_by_the_turns_after_it(env):
    """Replay from a snapshot rebuilds the loop from the session_opened fields kept in it (a truncated journal keeps
    no record before it); fields that differ from those the later turns ran under diverge at their first model call."""
    h = _session(env, 8)
    snap = _snapshot_after_full_replay(env)
    trio.run(h.loop.run_turn, "question 8")
    flip_last_byte(env, "s1", 0)
    report = _from(env, snap)
    assert report.ok and report.snapshot_refused is None and (report.snapshot_turns, report.verified_turns) == (8, 1)
    assert report.state == h.loop.state()
    config = dict(snap.opened["config"], system_prompt="You are someone else.")
    report = _from(env, snap.model_copy(update={"opened": dict(snap.opened, config=config)}))
    assert report.snapshot_refused is None and report.divergence is not None
    assert report.divergence.field == "model_call.request_digest" and report.divergence.turn == 9


def test_save_writes_what_a_rider_would(env):
    _session(env, 8)
    report = replay(env, "s1")
    assert report.state is not None and report.settled_at is not None
    assert snapshot_rider.save(env, "s1", *report.settled_at, report.state, report.opened or {}) is None
    found = snapshots.load(env, "s1")
    assert isinstance(found, ConversationSnapshot) and snapshots.state_of(found) == report.state
    assert snapshots.state_of(found) == LoopState(report.state.conversation, 8, report.state.tokens_used)
    assert found.messages == report.encodings  # what the replay's loop had encoded: the rider writes the same
    assert reading.sessions(env) == ["s1"]  # the snapshot's key is not taken for a session's head


def test_state_of_refuses_bytes_that_are_not_the_messages_it_counts(env):
    _session(env, 8)
    snap = _snapshot_after_full_replay(env)
    import pytest

    from ouroactors.core.codec import CodecError

    for changes in ({"count": snap.count + 1}, {"messages": snap.messages + b"\x01"},
                    {"messages": b"\x92\xa4user\xa1x"}, {"messages": snap.messages[:-3]}):
        with pytest.raises(CodecError):
            snapshots.state_of(snap.model_copy(update=changes))


def test_a_restored_conversation_is_not_encoded_again(env, monkeypatch):
    """The snapshot's bytes seed the loop's digest cache: its first request digest packs no old message."""
    _session(env, 8)
    state = snapshots.state_of(_snapshot_after_full_replay(env))
    expected = steps.conversation_digest(state.conversation)
    digests = steps.Digests()
    digests.seed(state.conversation, state.packed or ())

    def refuse(value, root):
        raise AssertionError(f"{root} encoded again")

    monkeypatch.setattr(steps, "_pack", refuse)
    assert digests.conversation(state.conversation) == expected


# -- the journal's size budget keeps what the snapshot continues from --------------------------------------------


def _budgeted(env, turns: int):
    """A session of ``turns`` scripted answers of 300 bytes, its journal's budget 20 kB (about 15 of those turns)."""
    h = make_session(env, "s1", [[text("a" * 300)] for _ in range(turns)])
    h.journal.budget_bytes = 20000
    return h


def test_a_journal_over_its_budget_keeps_the_snapshots_turn_and_the_session_continues_from_it(env):
    h = _budgeted(env, 40)
    for i in range(12):
        trio.run(h.loop.run_turn, f"turn {i}")
    snap = _snapshot_after_full_replay(env)  # before any truncation: all 12 turns replay
    for i in range(12, 40):
        trio.run(h.loop.run_turn, f"turn {i}")
    records = reading.records(env, "s1")
    assert records[0].kind == "truncated" and reading.verify(env, "s1").ok
    assert records[0].seq < snap.seq  # cut short of the snapshot's record, over the budget meanwhile
    assert replay(env, "s1").verified_turns == 0  # the whole journal cannot be replayed any more
    report = _from(env, snap)
    assert report.ok and report.snapshot_refused is None
    assert (report.snapshot_turns, report.verified_turns) == (12, 28) and report.state == h.loop.state()


def _live_rider(env, h, safe_through: int = snapshot_rider.EVERY_TURN_SAFE, session: str = "s1") -> SnapshotRider:
    """A rider on ``h``'s journal port as a runtime's: it rides in the journal's flushes and stages the end of each
    turn (:func:`tail_hook`) when due."""
    rider = SnapshotRider(env, session, h.journal)
    rider.safe_through = safe_through
    h.loop.ports.journal.riders = (rider,)
    h.loop.ports.journal.on_settled = tail_hook(rider, h.loop, h.journal)
    return rider


def _detach(h) -> None:
    h.loop.ports.journal.riders = ()
    h.loop.ports.journal.on_settled = None


def test_a_later_snapshot_lets_the_journal_cut_further(env):
    h = _budgeted(env, 60)
    for i in range(40):
        trio.run(h.loop.run_turn, f"turn {i}")
    report = replay(env, "s1")  # no snapshot yet: the journal was cut as far as its budget says
    first = reading.records(env, "s1")[0]
    assert first.kind == "truncated" and report.verified_turns == 0
    rider = _live_rider(env, h)
    trio.run(h.loop.run_turn, "turn 40")  # its end is snapshotted, in the commit of its turn_settled
    head = reading.head(env, "s1")
    assert head is not None and rider.saved == head.head_seq and rider.tail is None
    _detach(h)
    for i in range(41, 60):
        trio.run(h.loop.run_turn, f"turn {i}")
    assert reading.records(env, "s1")[0].seq > first.seq  # cut further, not past the snapshot's record
    start, _ = snapshots.offered(env, "s1", 0)
    report = _from(env, start)
    assert (report.snapshot_turns, report.verified_turns) == (41, 19) and report.state == h.loop.state()


def test_the_end_of_a_turn_is_snapshotted_in_its_own_commit_and_the_next_open_replays_nothing(env):
    h = make_session(env, "s1", [[text("a")], [text("b")], [text("c")], [text("d")]])
    rider = _live_rider(env, h)
    trio.run(h.loop.run_turn, "1")
    commits: list[int] = []
    original = commit.write

    def counted(*args, **kwargs):
        commits.append(1)
        return original(*args, **kwargs)

    import ouroactors.runtime.execution.journal as journal_module

    def commits_of(turn: str) -> int:
        commits.clear()
        journal_module.commit.write = counted  # type: ignore[assignment]
        try:
            trio.run(h.loop.run_turn, turn)
        finally:
            journal_module.commit.write = original  # type: ignore[assignment]
        return len(commits)

    with_snapshot = commits_of("2")
    snapshotted = reading.head(env, "s1")
    assert snapshotted is not None and rider.saved == snapshotted.head_seq  # bound to the turn_settled it wrote
    _detach(h)
    assert commits_of("3") == with_snapshot  # the snapshot has no commit of its own
    _live_rider(env, h)
    trio.run(h.loop.run_turn, "4")
    report = _from(env, snapshots.candidates(env, "s1", 0)[0])
    assert (report.snapshot_turns, report.verified_turns, report.snapshot_refused) == (4, 0, None)
    assert report.state == h.loop.state()
    assert sorted(f.turns for f in snapshot_slots(env)) == [2, 4]  # the one before it kept in the other slot


def snapshot_slots(env, session: str = "s1") -> list[ConversationSnapshot]:
    return [f for f in snapshots.load_slots(env, session) if isinstance(f, ConversationSnapshot)]


def test_a_replacement_that_must_replay_the_last_turn_continues_from_the_other_slot_even_past_the_budget(env):
    """A runtime lost after its turn committed, before the coordinator committed that turn's last events: its
    replacement must replay that turn (``tail_turn``), so the snapshot at it is of no use; the one before it, in the
    other slot, is — also when the journal's budget has dropped every turn before both. With one slot the tail
    snapshot would have replaced it, and the session could not be continued."""
    h = _budgeted(env, 40)
    opened_at = 0
    for i in range(30):  # a runtime per message: each opens knowing every earlier turn's events committed
        rider = _live_rider(env, h, safe_through=opened_at)
        trio.run(h.loop.run_turn, f"turn {i}")
        opened_at = h.loop.turns
    assert reading.records(env, "s1")[0].kind == "truncated" and replay(env, "s1").verified_turns == 0
    assert sorted(f.turns for f in snapshot_slots(env)) == [29, 30]
    offers, refused = snapshots.candidates(env, "s1", tail_turn=30)  # turn 30's events must be derived again
    assert [f.turns for f in offers] == [29] and refused is not None and "turn 30" in refused
    sink = SettledTail(30)
    report = _from(env, offers, sink=sink)
    assert (report.snapshot_turns, report.verified_turns) == (29, 1) and report.state == h.loop.state()
    assert sink.settled and sink.events  # the turn's events, derived again
    # and the replacement's own snapshot does not replace the one it continued from
    _detach(h)
    rider = _live_rider(env, h, safe_through=29)
    h2 = h  # the same loop, standing in for the replacement's (restored to the same state)
    trio.run(h2.loop.run_turn, "turn 30")
    assert sorted(f.turns for f in snapshot_slots(env)) == [29, 31]
    assert rider.saved is not None


@given(turns=st.lists(st.one_of(st.none(), st.integers(min_value=0, max_value=20)), min_size=2, max_size=2),
       safe=st.integers(min_value=0, max_value=25))
def test_a_new_snapshot_never_replaces_the_newest_one_a_replacement_may_use(turns, safe):
    slot = snapshot_rider.slot_to_write(turns, safe)
    usable = [t for t in turns if t is not None and t <= safe]
    if usable:
        assert turns[slot] != max(usable) or turns.count(max(usable)) == 2
    if None in turns:
        assert turns[slot] is None or all(t is not None and t <= safe for t in turns if t is not None)


def test_the_slot_choice_keeps_the_safe_one_and_fills_an_empty_slot_first():
    assert snapshot_rider.slot_to_write([None, None], 0) == 0
    assert snapshot_rider.slot_to_write([3, None], 3) == 1
    assert snapshot_rider.slot_to_write([3, 4], 4) == 0  # 4 is the newest usable: kept
    assert snapshot_rider.slot_to_write([3, 4], 3) == 1  # 4 is past the bound (its turn unpublished): 3 kept
    assert snapshot_rider.slot_to_write([5, 4], 3) == 1  # neither usable: the oldest goes


def test_a_tail_is_dropped_unless_the_commit_ends_with_its_turn_settled(env):
    h = make_session(env, "s1", [[text("a")], [text("b")]])
    trio.run(h.loop.run_turn, "1")
    rider = SnapshotRider(env, "s1", h.journal)
    state = h.loop.state()
    assert rider.stage_tail(12345, state, h.loop.encodings(state), h.loop.opened)  # not the record's time
    h.journal.stage("steer", {"text": "x"}, turn=1, at=1)
    assert h.journal.flush((rider,)).committed
    assert rider.tail is None and rider.saved is None and snapshot_slots(env) == []


def test_a_snapshot_of_records_already_cut_does_not_stop_the_budget(env):
    h = _budgeted(env, 40)
    for i in range(10):
        trio.run(h.loop.run_turn, f"turn {i}")
    snap = _snapshot_after_full_replay(env)
    _put_raw(env, _altered(snap, seq=10_000))  # names no record of this chain
    for i in range(10, 40):
        trio.run(h.loop.run_turn, f"turn {i}")
    head = reading.head(env, "s1")
    assert head is not None and head.bytes <= 20000 + 2000  # cut to its budget as if there were no snapshot


def test_an_open_with_a_pending_tail_stages_no_snapshot_at_or_past_it(env):
    _session(env, 9)
    report = replay(env, "s1")
    rider = SnapshotRider(env, "s1")
    staged, why = rider.stage(report.verified_turns, report.state, report.settled_at, report.encodings,
                              report.opened, tail_turn=9)
    assert staged is None and why is not None and "turn 9" in why and rider.pending is None
    staged, why = rider.stage(report.verified_turns, report.state, report.settled_at, report.encodings,
                              report.opened, tail_turn=10)  # a turn after it (running when the runtime was lost)
    assert staged == report.settled_at[0] and why is None


# -- a property: from any snapshot, the same state as from the first turn -----------------------------------------

_TURN = st.lists(st.one_of(
    st.tuples(st.just("text"), st.text(alphabet="abcé ☃\n", max_size=40)),
    st.tuples(st.just("calls"), st.lists(st.sampled_from(["read", "list"]), min_size=1, max_size=3))), min_size=1,
    max_size=3)
_examples = itertools.count()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=st.lists(_TURN, min_size=1, max_size=10), at=st.integers(min_value=0, max_value=10))
def test_any_snapshot_continues_to_the_state_the_whole_replay_reaches(env, turns, at):
    """Sessions of text and parallel tool calls, the snapshot taken after any settled turn: the replay from it
    reaches the very state (conversation, turns, tokens) and head the whole journal's replay reaches."""
    session = f"p{next(_examples)}"
    script: list[list[dict]] = []
    for n, steps_of_turn in enumerate(turns):
        for k, (kind, value) in enumerate(steps_of_turn):
            if kind == "text":
                script.append([text(value), usage(3, 2)])
            else:
                script.append([*(call(f"t{n}s{k}c{i}", name, path=".") for i, name in enumerate(value)),
                               usage(5, 1)])
        script.append([text(f"done {n}"), usage(1, 1)])
    h = make_session(env, session, script, config=CONFIG)
    cut = min(at, len(turns))
    snapshot = None
    for n in range(len(turns)):
        if n == cut:
            snapshot = _save_now(env, session, h)
        trio.run(h.loop.run_turn, f"prompt {n}")
    if snapshot is None:
        snapshot = _save_now(env, session, h)
    whole = replay(env, session)
    start = snapshots.load(env, session)
    assert isinstance(start, ConversationSnapshot)
    report = trio.run(partial(replay_session, env, session, start=start))
    assert report.snapshot_refused is None and report.ok, report
    assert report.snapshot_turns + report.verified_turns == whole.verified_turns == h.loop.turns
    assert report.state == whole.state == h.loop.state() and report.settled_at == whole.settled_at


def _save_now(env, session: str, h) -> ConversationSnapshot | None:
    """A snapshot of the loop as it stands (after a settled turn), bound to the journal's head (its turn_settled)."""
    state = h.loop.state()
    head = reading.head(env, session)
    if head is None or state.turns == 0:
        return None
    assert snapshot_rider.save(env, session, head.head_seq, head.head_hash, state, h.loop.opened or {}) is None
    found = snapshots.load(env, session)
    assert isinstance(found, ConversationSnapshot)
    return found


def test_a_snapshot_whose_opened_fields_do_not_rebuild_a_loop_falls_back_to_the_whole_journal(env):
    """Never a silent start from nothing: opened fields that are not a session's (a bad config, a tool list that is
    not specs, a value that looks like a blob reference) refuse the snapshot, and the whole journal is replayed."""
    h = _session(env, 9)
    snap = _snapshot_after_full_replay(env)
    whole = replay(env, "s1")
    from ouroactors.runtime.execution import blobs

    bad = [
        ("do not rebuild a loop", dict(snap.opened, config={"model": {"kind": "nonsense"}})),
        ("do not rebuild a loop", dict(snap.opened, tools=[{"name": 3}])),
        ("are not well-formed", dict(snap.opened, config=[1, 2])),
        ("are not well-formed", dict(snap.opened, config={blobs.REF_KEY: "00" * 32, "bytes": 10})),
    ]
    for why, opened in bad:
        report = _from(env, snap.model_copy(update={"opened": opened}))
        assert report.snapshot_refused is not None and why in report.snapshot_refused, (why, opened, report)
        assert (report.snapshot_turns, report.verified_turns) == (0, 9) and report.state == whole.state
    assert whole.state == h.loop.state()


def test_a_snapshot_staged_after_a_gap_lets_the_next_open_go_past_it(env):
    """A journal write that failed leaves a gap; a replay stops there, so the next open would continue from before
    it. The end of the turn whose commits wrote the gap is snapshotted even when not due for its size, and the next
    open continues from it: every turn, none repeated."""
    from ouroactors.core import faults
    from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule

    big = "x" * 700_000  # a conversation whose end is snapshotted every 4 turns for its size
    h = make_session(env, "s1", [[text(big)], [text("b")], [text("c")], [text("d")]])
    rider = _live_rider(env, h)
    trio.run(h.loop.run_turn, "1")
    trio.run(h.loop.run_turn, "2")
    assert rider.saved is None  # not due for its size
    faults.arm(FaultPlan((FaultRule("storage.before_commit", FaultAction.COMMIT_REJECTED, nth=1, times=1),)))
    try:
        trio.run(h.loop.run_turn, "3")  # its first flush fails: its records lost, a gap to write
    finally:
        faults.disarm()
    assert h.journal.gaps_written == 1 and rider.saved is not None  # the gap written by the turn's end: snapshotted
    trio.run(h.loop.run_turn, "4")
    assert replay(env, "s1").boundary is not None  # the whole journal stops at the gap
    start, refused = snapshots.offered(env, "s1", 0)
    report = _from(env, start)
    assert refused is None and report.snapshot_refused is None and report.boundary is None
    assert (report.snapshot_turns, report.verified_turns) == (3, 1) and report.state == h.loop.state()
