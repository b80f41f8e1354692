"""The runtime's queued pushes fold into one OutputReady per run of pushes to one subscriber: the folded push
carries every event once, in order, and passes the coordinator's door; pushes that must not fold stay apart."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ouroactors.core.boundary import check_message
from ouroactors.runtime.execution.bridge import Outbox
from ouroactors.runtime.execution.messages import MAX_PUSHED, OutputReady
from ouroactors.runtime.execution.output import OutputEvent
from ouroactors.runtime.execution.runtime import _folded

RID = "r" * 32


def push(*cursors: int, session: str = "s1", runtime: str = RID) -> OutputReady:
    events = tuple(OutputEvent(c, "text", 1, {"text": f"w{c}"}) for c in cursors)
    return OutputReady(session, runtime, max(cursors, default=0), events)


@given(st.lists(st.integers(1, 5), min_size=1, max_size=30))
def test_consecutive_pushes_fold_into_one_that_carries_every_event_once(sizes: list[int]) -> None:
    outbox = Outbox()
    try:
        cursor, pushes = 0, []
        for size in sizes:
            pushes.append(push(*range(cursor + 1, cursor + size + 1)))
            cursor += size
        for p in pushes:
            outbox.post("coordinator", p)
        taken = outbox.take_merged(_folded)
    finally:
        outbox.close()
    events = [e for _, p in taken for e in p.events]
    assert [e.cursor for e in events] == list(range(1, cursor + 1))
    assert len(taken) == 1  # at most 150 events here: one push
    for _, p in taken:
        check_message(p)  # what the coordinator's door checks
        assert p.produced == p.events[-1].cursor


def test_pushes_that_must_not_fold_stay_apart() -> None:
    other: Any = object()
    outbox = Outbox()
    try:
        for address, message in (("c1", push(1)), ("c2", push(2)), ("c2", other), ("c2", push(3)),
                                 ("c2", push(4, session="s2")), ("c2", push(5, runtime="q" * 32)), ("c2", push(5))):
            outbox.post(address, message)
        taken = outbox.take_merged(_folded)
    finally:
        outbox.close()
    assert [(a, getattr(m, "produced", None)) for a, m in taken] == [
        ("c1", 1), ("c2", 2), ("c2", None), ("c2", 3), ("c2", 4), ("c2", 5), ("c2", 5)]
    assert push(3).then(push(2)) is None and push(3).then(push(3)) is None  # never backwards, never twice


def test_a_folded_push_holds_at_most_max_pushed_events() -> None:
    outbox = Outbox()
    try:
        for cursor in range(1, MAX_PUSHED + 45):
            outbox.post("c", push(cursor))
        taken = outbox.take_merged(_folded)
    finally:
        outbox.close()
    assert [len(p.events) for _, p in taken] == [MAX_PUSHED, 44]
