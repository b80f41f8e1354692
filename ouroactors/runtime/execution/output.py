"""A runtime's output: a bounded batch of events behind a cursor that only grows.

The runtime produces events (text deltas, tool calls, tool results, approvals needed, turn settled); a reader
(the coordinator) asks ``drain(after=cursor)`` and later ``ack(cursor)`` once it has *committed* that cursor. The
runtime drops only what a reader acknowledged, so an event that was drained but never committed is drained again
after a coordinator restart — the publication order of DESIGN.md (drain → commit → ack → publish) needs exactly
this. A full buffer does not drop: :meth:`OutputBuffer.has_room` is False and the loop waits (back-pressure).

Pure and synchronous: the runtime's trio loop owns one buffer; the actor reads it through the loop's thread.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Annotated, Any

from ...core.boundary import Data, Range, Size
from ..coordinator.trace import mark
from .errors import CursorError

DEFAULT_CAPACITY = 1024  # events held unacknowledged before the loop is made to wait
DEFAULT_DRAIN_LIMIT = 256  # events answered per drain


@dataclass(frozen=True)
class OutputEvent:
    """One event of a session's output: its cursor (1, 2, …), kind, turn and payload (plain data).

    The annotations are the coordinator's door for a pushed event (``OutputReady`` carries it): a payload is bounded
    as a whole, generously — a ``turn_started`` carries its prompt (up to 200,000 bytes)."""

    cursor: Annotated[int, Range(1, 2**62)]
    kind: Annotated[str, Size(1, 64)]
    turn: Annotated[int, Range(0, 2**62)]
    data: Annotated[dict[str, Any], Data(256_000)]


@dataclass(frozen=True)
class Batch:
    """An answer to ``drain``: the events after the asked cursor, and where the runtime stands.

    ``acked`` is the cursor the runtime has been told is committed; ``produced`` the last cursor it made; ``more``
    says whether events beyond this batch wait already.
    """

    events: tuple[OutputEvent, ...]
    acked: int
    produced: int
    more: bool


class OutputBuffer:
    """Events with cursors ``acked+1 … produced``, at most ``capacity`` of them."""

    def __init__(self, *, capacity: int = DEFAULT_CAPACITY, start: int = 0) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        if start < 0:
            raise ValueError(f"start cursor must be >= 0, got {start}")
        self.capacity = capacity
        self.acked = start  # everything at or below is committed by a reader and dropped here
        self.produced = start
        self._events: deque[OutputEvent] = deque()

    def has_room(self) -> bool:
        return len(self._events) < self.capacity

    def append(self, kind: str, turn: int, data: dict[str, Any], *, force: bool = False) -> OutputEvent:
        """Add one event; the caller must have checked :meth:`has_room` (a full buffer never drops), unless
        ``force``: events owed (a re-run's marker beside the event that waited for room, a settled turn's
        withheld ones) go past the capacity by as many."""
        if not force and not self.has_room():
            raise CursorError(f"output buffer full ({self.capacity} unacknowledged events): wait for an ack")
        self.produced += 1
        event = OutputEvent(self.produced, kind, turn, data)
        self._events.append(event)
        mark("emit", event.cursor)
        return event

    def drain(self, after: int, limit: int = DEFAULT_DRAIN_LIMIT) -> Batch:
        """The events with cursor > ``after`` (at most ``limit``).

        ``after`` below the acknowledged cursor cannot be served (those events are gone): a
        :class:`CursorError` says so rather than answering with a silent gap.
        """
        if after < self.acked:
            raise CursorError(f"cursor {after} is before the acknowledged cursor {self.acked}: those events are "
                              "committed and dropped; resume from the committed checkpoint")
        if after > self.produced:
            raise CursorError(f"cursor {after} is beyond the last produced cursor {self.produced}")
        if limit < 1:
            raise CursorError(f"drain limit must be >= 1, got {limit}")
        skip = after - self.acked
        picked = tuple(self._events[i] for i in range(skip, min(len(self._events), skip + limit)))
        last = picked[-1].cursor if picked else after
        return Batch(picked, self.acked, self.produced, last < self.produced)

    def ack(self, cursor: int) -> int:
        """A reader committed everything up to ``cursor``: drop it. Returns how many events were dropped.

        An ack never moves the cursor back (an older ack is a no-op) and cannot pass what was produced.
        """
        if cursor > self.produced:
            raise CursorError(f"ack {cursor} is beyond the last produced cursor {self.produced}")
        dropped = 0
        while self._events and self._events[0].cursor <= cursor:
            self._events.popleft()
            dropped += 1
        self.acked = max(self.acked, cursor)
        return dropped

    def __len__(self) -> int:
        return len(self._events)


__all__ = ["DEFAULT_CAPACITY", "Batch", "OutputBuffer", "OutputEvent"]
