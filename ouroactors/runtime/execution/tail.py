"""A settled turn's output, derived again from the journal: what a runtime publishes that a crash withheld.

A runtime that settles a turn journals it first and emits the turn's last events after; killed in between, it
leaves a turn that is over in the journal but not in its coordinator's committed log. Running the turn again would
repeat it (a new turn, its model calls made twice); the replacement runtime instead derives the turn's events from
the journal through replay (the same loop, nothing runs) and emits them through its output channel, which holds back
those the log holds already (:mod:`.repeats`) — the turn then settles in the log as it would have without the crash.
See ``OpenSession.tail_turn``.
"""

from __future__ import annotations

from typing import Any


class SettledTail:
    """A replay sink that keeps the output events of one turn (``OpenSession.tail_turn``; 0: none).

    Replay runs only settled turns, the last settled attempt of a turn last, so what it holds at the end is that
    turn's events exactly as the loop emitted them live — if the turn settled at all (its last event says so).
    """

    def __init__(self, turn: int) -> None:
        self.turn = turn
        self.events: list[tuple[str, int, dict[str, Any]]] = []

    async def emit(self, kind: str, turn: int, data: dict[str, Any], *, rides: bool = False) -> None:
        if self.turn and turn == self.turn:
            if kind == "turn_started":
                self.events = []  # an earlier attempt's run (never, as replay goes; kept exact anyway)
            self.events.append((kind, turn, data))

    @property
    def settled(self) -> bool:
        return bool(self.events) and self.events[-1][0] == "turn_settled"


__all__ = ["SettledTail"]
