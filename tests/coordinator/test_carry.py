"""Carried checkpoints: the pure decision (publication.carry) and the store's write of it, on real LMDB.

A runtime commits a tool call's events in its own ledger transaction; these tests pin the fence (running, this
runtime id and generation, no gap, never an event the coordinator decides on) and that a carried checkpoint leaves
the coordinator's compare-and-set token alone while a plan it overtook is told to plan again.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ouroactors.authorities.storage.commit import Committed, write
from ouroactors.core.codec import encode
from ouroactors.runtime.coordinator.publication import CarryRefused, CursorMoved, carry, chain, plan
from ouroactors.runtime.coordinator.record import Recoverable, RuntimeAttachment
from ouroactors.runtime.coordinator.store import SessionStore
from ouroactors.runtime.coordinator.workflow import Event, State
from ouroactors.runtime.execution.output import Batch, OutputEvent

from .support import new_record

RT = RuntimeAttachment(runtime_id="rt-1", generation=3)


def events(first: int, last: int, kind: str = "tool_call") -> tuple[OutputEvent, ...]:
    return tuple(OutputEvent(c, kind, 1, {"n": c}) for c in range(first, last + 1))


def running(cursor: int = 0, **changes):
    return new_record(state=State.RUNNING, runtime=RT, last_generation=3, committed_cursor=cursor,
                      log_digest=chain("", events(1, cursor)), **changes)


def test_the_attached_runtime_carries_what_follows_the_cursor_chained_like_a_checkpoint() -> None:
    record = running(2)
    step = carry(record, "rt-1", 3, events(1, 5))  # 1..2 committed already: dropped
    assert not isinstance(step, CarryRefused)
    assert (step.committed_before, step.cursor, [e.cursor for e in step.events]) == (2, 5, [3, 4, 5])
    same = plan(Batch(events(3, 5), 0, 5, False), 2, record.log_digest, record.conversation_digest)
    assert (step.log_digest, step.conversation_digest) == (same.log_digest, same.conversation_digest)


@pytest.mark.parametrize(("record", "runtime_id", "generation", "why"), [
    (running(), "rt-2", 3, "not attached"),  # another runtime
    (running(), "rt-1", 2, "not attached"),  # a zombie of an older generation
    (running(), "rt-1", 4, "not attached"),
    (new_record(state=State.RECOVERING, runtime=RT, last_generation=3), "rt-1", 3, "recovering"),
    (new_record(state=State.SUSPENDED), "rt-1", 3, "suspended"),
])
def test_only_the_running_session_s_own_runtime_carries(record, runtime_id, generation, why) -> None:
    refused = carry(record, runtime_id, generation, events(1, 2))
    assert isinstance(refused, CarryRefused) and why in refused.reason


def test_a_gap_is_refused_and_nothing_left_is_an_empty_plan() -> None:
    assert isinstance(carry(running(2), "rt-1", 3, events(4, 5)), CarryRefused)
    assert carry(running(5), "rt-1", 3, events(1, 5)).empty


@pytest.mark.parametrize("kind", ["turn_settled", "approval_needed"])
def test_a_runtime_never_carries_what_the_coordinator_decides_on(kind) -> None:
    mixed = (*events(1, 2), OutputEvent(3, kind, 1, {}), *events(4, 4))
    step = carry(running(), "rt-1", 3, mixed)
    assert [e.cursor for e in step.events] == [1, 2]
    assert carry(running(), "rt-1", 3, mixed[2:3]).empty


@given(st.integers(0, 8), st.integers(1, 12), st.integers(0, 6))
def test_a_carry_never_skips_nor_repeats_a_cursor(committed, first, count) -> None:
    step = carry(running(committed), "rt-1", 3, events(first, first + count - 1))
    if isinstance(step, CarryRefused):
        assert first > committed + 1
        return
    cursors = [e.cursor for e in step.events]
    assert cursors == list(range(committed + 1, committed + 1 + len(cursors)))
    assert step.cursor == (cursors[-1] if cursors else committed)


# -- the store, on real LMDB ------------------------------------------------------------------------------------


def attached(store: SessionStore):
    assert isinstance(store.create(new_record()), Committed)
    return store.transition("s1", 0, Event.MESSAGE, runtime=RT, last_generation=3).value


def carried_write(store: SessionStore, runtime_id: str = "rt-1", generation: int = 3, first: int = 1, last: int = 2):
    def run(txn):
        record = store._read(txn, "s1")  # read inside the transaction, as the runtime's rider does
        step = carry(record, runtime_id, generation, events(first, last))
        if isinstance(step, CarryRefused) or step.empty:
            return step
        return store.put_carried(txn, record, step)[0]
    return write(store.env, run)


def test_a_carried_checkpoint_moves_the_cursor_not_the_revision(store) -> None:
    before = attached(store)
    after = carried_write(store).value
    assert (after.committed_cursor, after.revision, after.state) == (2, before.revision, State.RUNNING)
    assert store.get("s1") == after
    log = store.events("s1")
    assert [(e.cursor, e.carried, e.generation) for e in log] == [(1, True, 3), (2, True, 3)]
    # the sweep's projection is what the coordinator's transition wrote: a carry moves nothing it holds, and writes
    # no page of it (one fewer in the runtime's synced commit)
    assert store.list_recoverable("n1").sessions[0] == Recoverable.of(before) == Recoverable.of(after)
    assert not hasattr(store.list_recoverable("n1").sessions[0], "committed_cursor")
    # the coordinator's compare-and-set at the revision it read still holds, and keeps the carried cursor
    moved = store.transition("s1", before.revision, Event.SUSPEND).value
    assert (moved.state, moved.committed_cursor, moved.log_digest) == (State.SUSPENDED, 2, after.log_digest)


def test_a_zombie_carries_nothing(store) -> None:
    attached(store)
    refused = carried_write(store, generation=2).value
    assert isinstance(refused, CarryRefused)
    assert store.get("s1").committed_cursor == 0 and store.events("s1") == []


def test_a_plan_overtaken_by_a_carry_is_told_to_plan_again(store) -> None:
    before = attached(store)
    stale = plan(Batch(events(1, 3), 0, 3, False), 0, "", "")  # the coordinator planned 1..3 from cursor 0
    carried_write(store, last=2)
    with pytest.raises(CursorMoved):
        store.checkpoint("s1", before.revision, stale)
    record = store.get("s1")
    again = plan(Batch(events(1, 3), 0, 3, False), record.committed_cursor, record.log_digest,
                 record.conversation_digest)
    after = store.checkpoint("s1", record.revision, again).value
    assert after.committed_cursor == 3
    assert [(e.cursor, e.carried) for e in store.events("s1")] == [(1, True), (2, True), (3, False)]
    assert after.log_digest == chain("", events(1, 3))  # one chain, whoever committed each event


def test_an_event_stored_before_carried_checkpoints_reads_as_the_coordinator_s() -> None:
    import msgpack

    from ouroactors.core.codec import decode
    from ouroactors.runtime.coordinator.record import PublishedEvent

    stored = msgpack.packb(["coordinator.event", 1, 4, "text", 1, {"text": "hi"}, 2, 123], use_bin_type=True)
    event = decode(stored, PublishedEvent)
    assert (event.cursor, event.kind, event.generation, event.carried) == (4, "text", 2, False)


def test_a_version_1_projection_with_its_cursor_still_decodes(store) -> None:
    """Data dirs written before the projection dropped the cursor: their sweep reads the same projection."""
    import msgpack

    from ouroactors.core.codec import decode

    current = Recoverable.of(attached(store))
    fields = msgpack.unpackb(encode(current), raw=False)
    assert fields[:2] == ["coordinator.recoverable", 2]
    version_1 = msgpack.packb(["coordinator.recoverable", 1, *fields[2:8], 7, *fields[8:]], use_bin_type=True)
    assert decode(version_1, Recoverable) == current
