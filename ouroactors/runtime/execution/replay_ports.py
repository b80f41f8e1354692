"""Replay's ports: the recording stands in for every port of the :class:`~.loop.SessionLoop` it re-runs.

Used by :func:`.replay.replay_session` (its module docstring tells what replay verifies and where it stops). Each
port answers from a :class:`_Tape` of the recorded records — the model its recorded chunks and tool calls, the
effect path its recorded tool results (and approvals), steering and interrupts their recorded positions, the clock
the recorded times, the catalog the specs and parse outcomes recorded at ``session_opened`` and ``tool_call`` —
so nothing runs and nothing is written: no tool, no ledger, no grants, no journal write, no network.

The replay journal port walks the recording: each record the loop emits must be the next recorded one (same kind,
same turn, and the :data:`COMPARED` fields equal — above all ``model_call.request_digest`` and
``turn_settled.conversation_digest``). The first difference stops the replay with a :class:`Divergence` (seq,
turn, field, expected, actual), raised through the loop as :class:`_Diverged`. Tool results and approvals of one
parallel batch may be emitted in another order than recorded (trio does not promise one), so they are matched by
call id within their batch.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from .loop import (
    CallContext,
    CallProblem,
    Control,
    Interrupt,
    ParsedCall,
    Steer,
    ToolResult,
)
from .model import (
    ModelError,
    ModelErrorKind,
    ModelRequest,
    ToolCall,
    ToolSpec,
)
from .reading import StoredRecord
from .reuse import recorded_events

# fields compared per kind (besides kind and turn)
COMPARED: dict[str, tuple[str, ...]] = {
    "turn_started": ("turn",), "prompt": ("text",), "model_call": ("index", "request_digest"),
    "model_result": ("index",), "tool_call": ("call_id", "name", "valid"), "tool_result": ("call_id", "status"),
    "approval": ("call_id",), "steer": ("text", "at_call", "redelivered", "at_end"), "interrupt": ("at_call",),
    "turn_settled": ("status", "conversation_digest"),
}
_MATCH_BY_CALL = ("tool_result", "approval")


@dataclass(frozen=True)
class Divergence:
    seq: int
    turn: int | None
    field: str
    expected: Any
    actual: Any


class _Diverged(Exception):
    def __init__(self, divergence: Divergence) -> None:
        super().__init__(f"diverged at seq {divergence.seq}: {divergence.field}")
        self.divergence = divergence


class _Tape:
    """The recorded records of the replayable range, and the position the loop has reached."""

    def __init__(self, records: list[StoredRecord]) -> None:
        self.records = records
        self.pos = 0
        self.focus(0, len(records) - 1)

    def focus(self, first: int, last: int) -> None:
        """Index the records of one turn (positions ``first..last``) for the ports to answer from.

        Per turn, not over the whole journal: a turn a crash cut short is run again by the replacement runtime
        under the same turn number and call ids (so its effects are found in the ledger, not repeated), and the
        abandoned attempt's records must not answer for the attempt that settled.
        """
        self.pos = first
        self.model: dict[tuple[int | None, int], dict[str, Any]] = {}
        self.results: dict[tuple[int | None, str], dict[str, Any]] = {}
        self.approvals: dict[tuple[int | None, str], list[dict[str, Any]]] = {}
        self.calls: dict[tuple[int | None, str], dict[str, Any]] = {}
        self.controls: dict[tuple[int | None, int], list[Control]] = {}
        self.leftovers: dict[int | None, list[Control]] = {}
        self.undelivered: dict[int | None, int] = {}
        for r in self.records[first:last + 1]:
            f = r.fields
            if r.kind == "model_result":
                self.model[(r.turn, f["index"])] = f
            elif r.kind == "tool_result":
                self.results[(r.turn, f["call_id"])] = f
            elif r.kind == "approval":
                self.approvals.setdefault((r.turn, f["call_id"]), []).append(f)
            elif r.kind == "tool_call":
                self.calls[(r.turn, f["call_id"])] = f
            elif r.kind == "steer":
                steer = Steer(f["text"], redelivered=f.get("redelivered") is True,
                              steer_id=f["id"] if isinstance(f.get("id"), str) else "")
                if f.get("at_end") is True:  # put in the conversation after the turn stopped (see .loop)
                    self.leftovers.setdefault(r.turn, []).append(steer)
                else:
                    self.controls.setdefault((r.turn, f["at_call"]), []).append(steer)
            elif r.kind == "interrupt":
                self.controls.setdefault((r.turn, f["at_call"]), []).append(Interrupt())
            elif r.kind == "turn_settled" and type(f.get("undelivered_steers")) is int:
                self.undelivered[r.turn] = f["undelivered_steers"]

    def diverge(self, field: str, expected: Any, actual: Any, turn: int | None) -> _Diverged:
        seq = self.records[self.pos].seq if self.pos < len(self.records) else (
            self.records[-1].seq + 1 if self.records else 0)
        return _Diverged(Divergence(seq, turn, field, expected, actual))


class _Journal:
    def __init__(self, tape: _Tape) -> None:
        self.tape = tape

    def record(self, kind: str, turn: int | None, at: int, fields: dict[str, Any]) -> None:
        tape = self.tape
        if tape.pos >= len(tape.records):
            raise tape.diverge("kind", "(end of the recorded turn)", kind, turn)
        expected = tape.records[tape.pos]
        if kind in _MATCH_BY_CALL and (expected.kind != kind or expected.fields.get("call_id") != fields["call_id"]):
            self._bring_forward(kind, fields["call_id"])
            expected = tape.records[tape.pos]
        if expected.kind != kind:
            raise tape.diverge("kind", expected.kind, kind, turn)
        if expected.turn != turn:
            raise tape.diverge(f"{kind}.turn", expected.turn, turn, turn)
        for name in COMPARED.get(kind, ()):
            if expected.fields.get(name) != fields.get(name):
                raise tape.diverge(f"{kind}.{name}", expected.fields.get(name), fields.get(name), turn)
        tape.pos += 1

    def _bring_forward(self, kind: str, call_id: str) -> None:
        """Move the recorded ``kind`` record of ``call_id`` (within this batch) to the current position."""
        tape = self.tape
        for i in range(tape.pos, len(tape.records)):
            r = tape.records[i]
            if r.kind not in _MATCH_BY_CALL:
                return
            if r.kind == kind and r.fields.get("call_id") == call_id:
                tape.records.insert(tape.pos, tape.records.pop(i))
                return

    def flush(self) -> None:
        pass


class _Clock:
    def __init__(self, tape: _Tape) -> None:
        self.tape = tape

    def now_ns(self) -> int:
        records, pos = self.tape.records, self.tape.pos
        return records[min(pos, len(records) - 1)].at if records else 0


class _Model:
    def __init__(self, tape: _Tape) -> None:
        self.tape = tape

    async def stream(self, request: ModelRequest, *, turn: int, index: int) -> AsyncIterator[Any]:
        f = self.tape.model.get((turn, index))
        if f is None:
            raise self.tape.diverge("model_result", "(recorded)", "(none recorded for this call)", turn)
        error = f.get("error")
        if error is not None:
            raise ModelError(ModelErrorKind(error["kind"]), error["detail"], status=error.get("status"),
                             attempts=error.get("attempts") or 1)
        for event in recorded_events(f):
            yield event


class _Effects:
    def __init__(self, tape: _Tape) -> None:
        self.tape = tape

    async def run(self, call: ParsedCall, ctx: CallContext) -> ToolResult:
        key = (ctx.turn, call.call.id)
        for approval in self.tape.approvals.get(key, ()):
            ctx.record_approval({k: v for k, v in approval.items() if k != "call_id"})
            if isinstance(approval.get("event"), dict):  # the approval_needed the live call emitted with its ask
                await ctx.emit("approval_needed", {k: v for k, v in approval["event"].items() if k != "call_id"})
        f = self.tape.results.get(key)
        if f is None:
            raise self.tape.diverge("tool_result", "(recorded)", f"(none recorded for call {call.call.id})", ctx.turn)
        return ToolResult.from_fields(f)


class _Control:
    def __init__(self, tape: _Tape) -> None:
        self.tape = tape

    def take(self, turn: int, point: int, *, last: bool = False) -> list[Control]:
        return self.tape.controls.pop((turn, point), [])

    def leftover(self, turn: int) -> list[Control]:
        return self.tape.leftovers.pop(turn, [])

    def undelivered(self, turn: int) -> int:  # evidence, not a decision: the count an older runtime recorded
        return self.tape.undelivered.get(turn, 0)


class _Sink:
    async def emit(self, kind: str, turn: int, data: dict[str, Any], *, rides: bool = False) -> None:
        pass


class RecordedCatalog:
    """The tool specs recorded in ``session_opened`` and the parse outcomes recorded in ``tool_call``."""

    def __init__(self, specs: list[dict[str, Any]], tape: _Tape) -> None:
        self._specs = tuple(ToolSpec.model_validate(s) for s in specs)
        self.tape = tape
        self.turn: int | None = None

    def specs(self) -> tuple[ToolSpec, ...]:
        return self._specs

    def parse(self, call: ToolCall) -> ParsedCall | CallProblem:
        for (_turn, call_id), f in self.tape.calls.items():
            if call_id == call.id and f.get("valid") is False:
                return CallProblem(call, f.get("error_kind") or "bad_call", f.get("error") or "")
        return ParsedCall(call)
