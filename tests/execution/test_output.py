"""The runtime's output buffer: cursors only grow, nothing is dropped before an ack, drains resume exactly."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ouroactors.runtime.execution.errors import CursorError
from ouroactors.runtime.execution.output import OutputBuffer


def test_drain_after_cursor_returns_exactly_the_later_events() -> None:
    buf = OutputBuffer(capacity=10)
    for i in range(5):
        buf.append("text", 1, {"i": i})
    batch = buf.drain(after=2)
    assert [e.cursor for e in batch.events] == [3, 4, 5]
    assert (batch.acked, batch.produced, batch.more) == (0, 5, False)


def test_drained_but_unacked_events_are_drained_again() -> None:
    buf = OutputBuffer(capacity=10)
    for i in range(3):
        buf.append("text", 1, {"i": i})
    first = buf.drain(after=0)
    again = buf.drain(after=0)  # the reader crashed before committing: it gets the same events
    assert first.events == again.events
    buf.ack(2)
    assert [e.cursor for e in buf.drain(after=2).events] == [3]


def test_full_buffer_refuses_instead_of_dropping() -> None:
    buf = OutputBuffer(capacity=2)
    buf.append("a", 1, {})
    buf.append("b", 1, {})
    assert not buf.has_room()
    with pytest.raises(CursorError, match="full"):
        buf.append("c", 1, {})
    buf.ack(1)
    assert buf.has_room()
    assert buf.append("c", 1, {}).cursor == 3


def test_cursors_that_cannot_be_served_are_refused() -> None:
    buf = OutputBuffer(capacity=4)
    buf.append("a", 1, {})
    buf.append("b", 1, {})
    buf.ack(2)
    with pytest.raises(CursorError, match="before the acknowledged"):
        buf.drain(after=1)
    with pytest.raises(CursorError, match="beyond"):
        buf.drain(after=3)
    with pytest.raises(CursorError, match="beyond"):
        buf.ack(3)


def test_an_older_ack_never_moves_the_cursor_back() -> None:
    buf = OutputBuffer(capacity=4, start=10)
    buf.append("a", 1, {})
    buf.ack(11)
    buf.ack(10)
    assert buf.acked == 11


def test_drain_limit_reports_more() -> None:
    buf = OutputBuffer(capacity=10)
    for i in range(5):
        buf.append("t", 1, {"i": i})
    batch = buf.drain(after=0, limit=2)
    assert [e.cursor for e in batch.events] == [1, 2] and batch.more


@given(st.lists(st.one_of(st.tuples(st.just("append"), st.integers(0, 0)),
                          st.tuples(st.just("ack"), st.integers(0, 40)),
                          st.tuples(st.just("drain"), st.integers(0, 40))), max_size=80))
def test_a_reader_that_acks_what_it_drained_sees_every_event_once_in_order(ops: list[tuple[str, int]]) -> None:
    buf = OutputBuffer(capacity=5)
    seen: list[int] = []
    committed = 0
    for op, _ in ops:
        if op == "append":
            if buf.has_room():
                buf.append("t", 1, {})
        elif op == "drain":
            batch = buf.drain(after=committed)
            assert all(e.cursor > committed for e in batch.events)
            assert [e.cursor for e in batch.events] == list(range(committed + 1, committed + 1 + len(batch.events)))
            if batch.events:
                committed = batch.events[-1].cursor
                seen.extend(e.cursor for e in batch.events)
                buf.ack(committed)
        assert buf.acked <= buf.produced
        assert len(buf) == buf.produced - buf.acked <= buf.capacity
    assert seen == list(range(1, len(seen) + 1))


def test_the_channel_pushes_every_event_itself_not_once_per_drain() -> None:
    """The reader is pushed each event (the coordinator checkpoints it without a drain round trip)."""
    import trio

    from ouroactors.runtime.execution.live import OutputChannel

    pushed: list[object] = []
    channel = OutputChannel(OutputBuffer(capacity=8), lambda event, rides: pushed.append(event))

    async def emit_three() -> None:
        await channel.emit("text", 1, {"text": "a"})
        await channel.emit("text", 1, {"text": "b"})  # no drain in between: pushed all the same
        channel.drain(0, 8)
        await channel.emit("text", 1, {"text": "c"})

    trio.run(emit_three)
    assert [(e.cursor, e.data["text"]) for e in pushed] == [(1, "a"), (2, "b"), (3, "c")]  # type: ignore[attr-defined]
    assert len(channel.buffer) == 3  # still held until acknowledged


def test_a_turn_counts_as_published_once_its_turn_settled_event_is_acked() -> None:
    """What a runtime's snapshots may rely on (:mod:`~ouroactors.runtime.execution.snapshot_rider`): a turn whose
    ``turn_settled`` event a reader committed would not be replayed by a replacement runtime."""
    import trio

    from ouroactors.runtime.execution.live import OutputChannel

    channel = OutputChannel(OutputBuffer(capacity=16), lambda event, rides: None)

    async def turn(n: int) -> None:
        await channel.emit("text", n, {"text": "x"})
        await channel.emit("turn_settled", n, {"status": "completed"})

    trio.run(turn, 1)
    trio.run(turn, 2)
    assert channel.published_turn == 0  # nothing acked
    channel.ack(3)  # turn 2's text, not its turn_settled
    assert channel.published_turn == 1
    [withheld] = channel.append("turn_settled", 3, {"status": "completed"})  # a settled turn's events, owed
    channel.ack(withheld.cursor)
    assert channel.published_turn == 3
    channel.ack(2)  # an older ack moves nothing back
    assert channel.published_turn == 3


def test_a_channel_continuing_a_turn_emits_only_what_the_log_does_not_hold_and_pushes_its_marker_at_once():
    """(execution.repeats) A re-run's events that repeat the log's are never appended, so cursors stay contiguous
    behind the committed one; the marker goes out pushed (the coordinator commits it), the event after it as asked;
    and a full buffer still takes the marker with the event that waited for room."""
    import trio

    from ouroactors.runtime.execution.live import OutputChannel
    from ouroactors.runtime.execution.repeats import RESUMED, Repeats

    notified: list[tuple[int, str, bool]] = []
    channel = OutputChannel(OutputBuffer(capacity=1, start=7),
                            lambda event, rides: notified.append((event.cursor, event.kind, rides)))
    channel.repeats = Repeats(2, [("turn_started", {"prompt": "p"}), ("text", {"text": "a"})])

    async def rerun() -> None:
        await channel.emit("turn_started", 2, {"prompt": "p"}, rides=True)
        await channel.emit("text", 2, {"text": "a"})
        await channel.emit("tool_call", 2, {"call_id": "c1"}, rides=True)

    trio.run(rerun)
    assert notified == [(8, RESUMED, False), (9, "tool_call", True)]
    assert [(e.cursor, e.kind, e.data) for e in channel.drain(7, 10).events] == [
        (8, RESUMED, {"not_repeated": 2, "asks": []}), (9, "tool_call", {"call_id": "c1"})]
