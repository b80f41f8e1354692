"""The turn loop's contract: the port protocols and the data that crosses them (no behaviour).

Split from :mod:`.loop` (which re-exports every name, so ``from .loop import ToolResult`` keeps working) because
the contract is what three parties share and the loop itself is only one of them: the live ports
(:mod:`.ports`, :mod:`.effects`, the runtime's sink) and the recorded ones (:mod:`.replay`) implement these
protocols, and the journal stores :class:`ToolResult` fields. The port list and the durability order they serve
are described in :mod:`.loop`'s docstring.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ...core.errors import OuroactorsError
from . import steps
from .model import Message, ModelRequest, ToolCall, ToolSpec

# -- data the ports exchange ----------------------------------------------------------------------------------


EVENT_ERROR_CHARS = 1000  # a published tool_result's error at most (the journal keeps it whole)


@dataclass(frozen=True)
class ToolResult:
    """One tool call's result as the loop and the journal see it (a tool's ``ToolOutcome`` plus who it was)."""

    call_id: str
    name: str
    status: Literal["ok", "failed", "unknown", "denied", "cancelled"]
    output: str = ""
    truncated: bool = False
    error: str | None = None
    error_kind: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    boundary: dict[str, Any] | None = None

    def fields(self) -> dict[str, Any]:
        return {"call_id": self.call_id, "name": self.name, "status": self.status, "output": self.output,
                "truncated": self.truncated, "error": self.error, "error_kind": self.error_kind,
                "evidence": self.evidence, "boundary": self.boundary}

    def event(self) -> dict[str, Any]:
        """The published ``tool_result``'s data: the call and its status, and for a call that did not succeed why
        (its error, cut to :data:`EVENT_ERROR_CHARS`, and kind) — what a subscriber needs to follow the turn. The
        output stays in the journal (``journal show``): it may be large, and a subscriber reads every event."""
        data: dict[str, Any] = {"call_id": self.call_id, "status": self.status}
        if self.error:
            data["error"] = self.error[:EVENT_ERROR_CHARS]
        if self.error_kind:
            data["error_kind"] = self.error_kind
        return data

    @classmethod
    def from_fields(cls, f: dict[str, Any]) -> ToolResult:
        return cls(call_id=f["call_id"], name=f["name"], status=f["status"], output=f.get("output", ""),
                   truncated=bool(f.get("truncated")), error=f.get("error"), error_kind=f.get("error_kind"),
                   evidence=dict(f.get("evidence") or {}), boundary=f.get("boundary"))


@dataclass(frozen=True)
class ParsedCall:
    call: ToolCall
    payload: Any = None  # the catalog's parsed form (e.g. ``(tool, args)``), opaque to the loop


@dataclass(frozen=True)
class CallProblem:
    call: ToolCall
    kind: str
    message: str


@dataclass(frozen=True)
class Steer:
    """A user message for the running turn. ``steer_id``: the id its acceptance was journaled under
    (``steer_received``; empty for a steer nobody accepted through a runtime, e.g. replay's of an older journal).
    ``redelivered``: a steer an earlier, lost run of the turn delivered at this point, handed to its re-run from the
    journal (:mod:`.reuse`) — recorded as such, so it is never taken for a new one."""

    text: str
    redelivered: bool = False
    steer_id: str = ""


@dataclass(frozen=True)
class Interrupt:
    pass


Control = Steer | Interrupt


class LoopRefusal(OuroactorsError):
    """The loop cannot start this turn (a limit of the session); nothing was recorded."""


# -- the ports --------------------------------------------------------------------------------------------------


class ModelPort(Protocol):
    def stream(self, request: ModelRequest, *, turn: int, index: int) -> AsyncIterator[Any]: ...


class CallContext(Protocol):
    """What the effect port gets with each call: who, where, the caps, and the loop's recording hooks."""

    session: str
    turn: int
    call: ToolCall
    output_cap_bytes: int  # the session's max_output_bytes (give it to the tool as its output cap)
    timeout_s: float  # the session's tool_deadline_s (the turn's deadline may cancel the call earlier)

    def record_result(self, result: ToolResult) -> None: ...
    def record_approval(self, fields: dict[str, Any]) -> None: ...
    async def emit(self, kind: str, data: dict[str, Any]) -> None: ...
    async def result_ready(self) -> None: ...  # the recorded result's settlement commit follows at once
    def cancel_cause(self) -> str: ...  # why a cancel that reached the call came (an interrupt, the deadline, a stop)


class EffectPort(Protocol):
    async def run(self, call: ParsedCall, ctx: CallContext) -> ToolResult: ...


class JournalPort(Protocol):
    def record(self, kind: str, turn: int | None, at: int, fields: dict[str, Any]) -> None: ...
    def flush(self) -> None: ...


class ClockPort(Protocol):
    def now_ns(self) -> int: ...


class ControlPort(Protocol):
    """``take(turn, point)``: what came for ``turn`` by its ``point`` (before model call ``point``); ``leftover(turn)``:
    once the turn has stopped, what it accepted and no point took (the loop puts the steers in the conversation:
    an acknowledged steer is never dropped); ``undelivered(turn)``: a count of accepted steers still held after that
    (0 live; a replay gives back what an older runtime recorded, see :mod:`.replay_ports`)."""

    def take(self, turn: int, point: int, *, last: bool = False) -> list[Control]: ...
    def leftover(self, turn: int) -> list[Control]: ...
    def undelivered(self, turn: int) -> int: ...


class OutputSink(Protocol):
    """``rides``: a ledger commit of this runtime follows the event at once (it may carry it: ``.carried``)."""

    async def emit(self, kind: str, turn: int, data: dict[str, Any], *, rides: bool = False) -> None: ...


class ToolCatalog(Protocol):
    def specs(self) -> tuple[ToolSpec, ...]: ...
    def parse(self, call: ToolCall) -> ParsedCall | CallProblem: ...


@dataclass
class Ports:
    model: ModelPort
    effects: EffectPort
    journal: JournalPort
    clock: ClockPort
    control: ControlPort
    sink: OutputSink
    catalog: ToolCatalog


@dataclass(frozen=True)
class LoopState:
    """What a session's loop carries between turns: enough to continue a session from its journal's replay."""

    conversation: tuple[Message, ...]
    turns: int
    tokens_used: int
    # the messages' canonical encodings, when the state was decoded from them (a snapshot): not part of the state
    packed: tuple[bytes, ...] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class TurnOutcome:
    turn: int
    status: steps.Status
    reason: str
    text: str
    conversation_digest: str
