"""The live implementations of the turn loop's ports that are not the runtime's own (see :mod:`.loop`).

The effect port (grants → ledger → tool → settle) and the output sink belong to the runtime actor; what is here
is generic: the journal adapter, the system clock, the steering queue, the provider adapter and the tool catalog.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Protocol

from ...core import clock
from . import steps
from .journal import Journal
from .loop import CallProblem, Control, Interrupt, LoopRefusal, ParsedCall, Steer
from .model import ModelProvider, ModelRequest, ToolCall, ToolSpec


class JournalWriter:
    """:class:`~.loop.JournalPort` on a :class:`~.journal.Journal`: stage each record, commit on ``flush``.

    Never raises on a failed write (the journal turns it into a gap); the runtime's effect port may commit staged
    records inside its ledger transactions instead (``journal.put_staged``), which makes the loop's flush a no-op.
    """

    def __init__(self, journal: Journal, riders: tuple[Any, ...] = (),
                 on_settled: Callable[[int, int], None] | None = None) -> None:
        self.journal = journal
        self.riders = riders  # put in the flush's transaction too (the runtime's carried output: see .carried)
        # told (turn, at) of each turn_settled staged, before the flush that commits it (a tail snapshot to stage:
        # .snapshot_rider.tail_hook)
        self.on_settled = on_settled

    def record(self, kind: str, turn: int | None, at: int, fields: dict[str, Any]) -> None:
        self.journal.stage(kind, fields, turn=turn, at=at)
        if kind == "turn_settled" and turn is not None and self.on_settled is not None:
            self.on_settled(turn, at)

    def flush(self) -> None:
        self.journal.flush(self.riders)

    @property
    def degraded(self) -> bool:
        """A write failed and its gap record is not written yet (the turn's ``turn_settled`` event says so)."""
        return self.journal.degraded

    @property
    def in_doubt(self) -> bool:
        """A commit's outcome is unknown until the next flush reads the durable head."""
        return self.journal.in_doubt


class SystemClock:
    """Wall-clock ns from the framework's clock (virtual under simulation)."""

    def now_ns(self) -> int:
        return clock.time_ns()


class SteerRecorder(Protocol):
    """What journals a steer's acceptance (:meth:`~.loop.SessionLoop.receive_steer`)."""

    def receive_steer(self, turn: int, steer_id: str, text: str) -> bool: ...


class SteeringQueue:
    """:class:`~.loop.ControlPort` fed by the runtime: ``steer``/``interrupt`` for the turn it believes runs.

    Items are tagged with their turn; ``take`` hands over those of the asking turn and drops older ones (an
    interrupt that raced with the end of its turn must not end the next one). Thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[tuple[int, Control]] = []

    @staticmethod
    def check(text: str) -> None:
        """Refuse a steer text the loop would have to repair (:func:`~.steps.text_problem`)."""
        problem = steps.text_problem(text)
        if problem is not None:
            raise LoopRefusal(f"steer text is {problem}")

    def steer(self, turn: int, text: str, steer_id: str = "") -> None:
        self.check(text)
        with self._lock:
            self._items.append((turn, Steer(text, steer_id=steer_id)))

    def accept(self, loop: SteerRecorder, turn: int, text: str, steer_id: str) -> bool:
        """A steer the runtime received: journaled (:meth:`~.loop.SessionLoop.receive_steer`, which refuses it once the
        turn took its last point), then queued — whether it was. Called in the loop's thread, so no point of the loop
        falls between the record and the queue (a steer journaled but queued after the turn's last take would be
        acknowledged and delivered nowhere)."""
        if not loop.receive_steer(turn, steer_id, text):
            return False
        self.steer(turn, text, steer_id)
        return True

    def interrupt(self, turn: int) -> None:
        with self._lock:
            self._items.append((turn, Interrupt()))

    def undelivered(self, turn: int) -> int:
        with self._lock:
            return sum(1 for t, item in self._items if t == turn and isinstance(item, Steer))

    def take(self, turn: int, point: int, *, last: bool = False) -> list[Control]:
        with self._lock:
            mine = [item for t, item in self._items if t == turn]
            self._items = [(t, item) for t, item in self._items if t > turn]
        return mine

    def leftover(self, turn: int) -> list[Control]:
        return self.take(turn, -1)


class ProviderModel:
    """:class:`~.loop.ModelPort` on a :class:`~.model.ModelProvider`; ``on_call`` is told of each model call."""

    def __init__(self, provider: ModelProvider, on_call: Callable[[], None] | None = None) -> None:
        self.provider = provider
        self._on_call = on_call

    def stream(self, request: ModelRequest, *, turn: int, index: int) -> AsyncIterator[Any]:
        if self._on_call is not None:
            self._on_call()
        return self.provider.stream(request)


class ToolsCatalog:
    """:class:`~.loop.ToolCatalog` on the tools registry (``tools.TOOLS``), restricted to the session's tool set."""

    def __init__(self, names: tuple[str, ...], tools: Mapping[str, Any] | None = None) -> None:
        from . import tools as registry  # imported here: the tools pull in grants and the sandbox

        self._registry = registry
        all_tools = tools if tools is not None else registry.TOOLS
        self._tools = {name: all_tools[name] for name in names}
        self._specs = tuple(tool.spec() for tool in self._tools.values())

    def specs(self) -> tuple[ToolSpec, ...]:
        return self._specs

    def parse(self, call: ToolCall) -> ParsedCall | CallProblem:
        try:
            return ParsedCall(call, self._registry.parse_call(call, self._tools))
        except self._registry.ToolCallError as exc:
            return CallProblem(call, exc.kind, str(exc))
