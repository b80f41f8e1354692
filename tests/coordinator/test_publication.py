"""Commit before publish, as a plan: what to commit, ack and publish for a batch, and when to refuse."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ouroactors.authorities.storage.commit import Committed, Rejected, Unknown
from ouroactors.runtime.coordinator.publication import (
    Abandon,
    CursorError,
    CursorGap,
    Follower,
    Publish,
    Reconcile,
    after_commit,
    chain,
    plan,
    reconciled,
    unsettled_turn,
)
from ouroactors.runtime.execution.output import Batch, OutputBuffer, OutputEvent


def events(first: int, last: int, kind: str = "text") -> tuple[OutputEvent, ...]:
    return tuple(OutputEvent(c, kind, 1, {"n": c}) for c in range(first, last + 1))


def batch(first: int, last: int, acked: int = 0) -> Batch:
    return Batch(events(first, last), acked, max(last, acked), False)


def test_plan_commits_the_new_events_and_chains_the_digest() -> None:
    step = plan(batch(1, 3), 0, "", "")
    assert (step.committed_before, step.cursor, [e.cursor for e in step.events]) == (0, 3, [1, 2, 3])
    assert step.log_digest == chain(chain("", events(1, 1)), events(2, 3)) != ""


def test_redrained_events_at_or_below_the_cursor_are_not_committed_again() -> None:
    step = plan(batch(1, 5), 3, "d3", "c")
    assert [e.cursor for e in step.events] == [4, 5] and step.committed_before == 3
    empty = plan(batch(1, 3), 3, "d3", "c")
    assert empty.empty and empty.cursor == 3 and empty.log_digest == "d3"


def test_a_batch_beyond_a_gap_is_refused() -> None:
    with pytest.raises(CursorGap) as info:
        plan(batch(5, 6), 3, "", "")
    assert (info.value.committed, info.value.first) == (3, 5) and "4..4" in str(info.value)


def test_disorder_inside_a_batch_is_refused() -> None:
    with pytest.raises(CursorError, match="not contiguous"):
        plan(Batch((OutputEvent(1, "t", 1, {}), OutputEvent(3, "t", 1, {})), 0, 3, False), 0, "", "")


def test_a_runtime_acked_beyond_the_durable_cursor_is_refused() -> None:
    with pytest.raises(CursorError, match="went back"):
        plan(batch(5, 6, acked=4), 3, "", "")


def test_conversation_digest_comes_from_the_last_settled_turn() -> None:
    settled = Batch((OutputEvent(1, "turn_settled", 1, {"conversation_digest": "abc"}),
                     OutputEvent(2, "text", 2, {"conversation_digest": "not-this"})), 0, 2, False)
    assert plan(settled, 0, "", "old").conversation_digest == "abc"
    assert plan(batch(1, 1), 0, "", "old").conversation_digest == "old"


def test_after_commit_publishes_only_what_was_committed() -> None:
    step = plan(batch(1, 2), 0, "", "")
    assert after_commit(step, Committed(None)) == Publish(2, step.events)
    assert after_commit(step, Rejected("full")) == Abandon("full")
    assert after_commit(step, Unknown("meta page")) == Reconcile("meta page")
    with pytest.raises(TypeError):
        after_commit(step, object())


def test_reconciled_reads_which_value_won() -> None:
    step = plan(batch(3, 4), 2, "d2", "")
    assert reconciled(step, 4, step.log_digest) is True
    assert reconciled(step, 2, "d2") is False
    with pytest.raises(CursorError, match="another writer"):
        reconciled(step, 7, "x")


def test_the_order_against_a_real_output_buffer() -> None:
    """drain → (commit fails) → nothing acked, the same batch drains again → commit → ack → publish."""
    buffer = OutputBuffer()
    for i in range(3):
        buffer.append("text", 1, {"i": i})
    committed, digest = 0, ""
    first = plan(buffer.drain(committed), committed, digest, "")
    assert isinstance(after_commit(first, Rejected("injected")), Abandon)
    again = plan(buffer.drain(committed), committed, digest, "")
    assert again == first
    step = after_commit(again, Committed(None))
    assert isinstance(step, Publish)
    buffer.ack(step.ack)
    assert buffer.acked == 3 and len(buffer) == 0


@given(st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=12), st.randoms())
def test_follower_delivers_each_cursor_once_in_order(sizes: list[int], rnd) -> None:
    """Live pushes duplicated and shuffled, gaps filled from the log: every cursor once, in order."""
    log: list[OutputEvent] = []
    for size in sizes:
        log.extend(events(len(log) + 1, len(log) + size))
    follower = Follower(0)
    delivered: list[int] = []
    for _ in range(200):
        if follower.last == len(log):
            break
        start = rnd.randrange(0, len(log))
        pushed = list(log[start:start + rnd.randrange(1, 4)]) * rnd.randrange(1, 3)
        rnd.shuffle(pushed)
        got = follower.offer(pushed)
        if follower.gap_from is not None:
            got += follower.offer(log[follower.gap_from - 1:])
        delivered.extend(e.cursor for e in got)
    assert delivered == list(range(1, follower.last + 1))


def test_follower_refuses_a_negative_cursor() -> None:
    with pytest.raises(CursorError):
        Follower(-1)


def test_the_unsettled_turn_is_the_turn_of_the_last_event_unless_it_settled_it() -> None:
    def log(*kinds_turns: tuple[str, int]) -> list[OutputEvent]:
        return [OutputEvent(i, kind, turn, {}) for i, (kind, turn) in enumerate(kinds_turns, start=1)]

    settled_one = log(("turn_started", 1), ("text", 1), ("turn_settled", 1))
    assert unsettled_turn(settled_one[-1]) == 2
    # turn 2 parked on an approval, then continued under its number by the next runtime
    rerun = [*settled_one, *log(("turn_started", 2), ("approval_needed", 2), ("turn_resumed", 2), ("text", 2))]
    assert unsettled_turn(rerun[-1]) == 2
    assert unsettled_turn(None) == 1  # nothing committed yet
