"""Verified replay: re-run a session's recorded turns through the same :class:`~.loop.SessionLoop`, with the
recording standing in for every port — model chunks, tool results (and approvals), steering, clock — and compare.

Nothing runs and nothing is written: no tool, no ledger, no grants, no journal write, no network. The replay
journal port walks the recording: each record the loop emits must be the next recorded one (same kind, same turn,
and the compared fields equal — above all ``model_call.request_digest`` and ``turn_settled.conversation_digest``).
The first difference stops the replay with a :class:`Divergence` (seq, turn, field, expected, actual). Tool results
and approvals of one parallel batch may be emitted in another order than recorded (trio does not promise one), so
they are matched by call id within their batch.

Replay stops honestly where it cannot go on, as a :class:`Boundary` with the turns before it verified: a record that
does not verify (``chain_broken``), ``gap``, ``truncated``, an ``unsettled_turn`` (the last turn has no
``turn_settled``: a crash), a ``missing_blob``, an ``unknown_kind`` or an ``unreadable`` record, a
``session_opened`` it cannot rebuild the loop from (``bad_session_opened``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import lmdb
import trio
from pydantic import ValidationError

from . import blobs, reading
from .config import SessionConfig
from .journal import KINDS
from .loop import (
    CallContext,
    CallProblem,
    Control,
    Interrupt,
    LoopState,
    OutputSink,
    ParsedCall,
    Ports,
    SessionLoop,
    Steer,
    ToolCatalog,
    ToolResult,
)
from .model import (
    Finished,
    ModelError,
    ModelErrorKind,
    ModelRequest,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
)
from .reading import StoredRecord

# fields compared per kind (besides kind and turn)
COMPARED: dict[str, tuple[str, ...]] = {
    "turn_started": ("turn",), "prompt": ("text",), "model_call": ("index", "request_digest"),
    "model_result": ("index",), "tool_call": ("call_id", "name", "valid"), "tool_result": ("call_id", "status"),
    "approval": ("call_id",), "steer": ("text", "at_call"), "interrupt": ("at_call",),
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


@dataclass(frozen=True)
class Boundary:
    reason: str
    seq: int
    detail: str = ""


@dataclass(frozen=True)
class ReplayReport:
    session: str
    records: int
    turns: int  # turns recorded (started)
    verified_turns: int
    head_seq: int | None
    divergence: Divergence | None = None
    boundary: Boundary | None = None
    state: LoopState | None = None  # the loop after the last verified turn (to continue the session from)
    # runs of a turn that never settled because a later runtime ran the turn again (an approval wait ended the
    # runtime, or a crash did): their records stay in the chain, verified by it, and are not replayed — the
    # run that settled is
    cut_short: int = 0

    @property
    def ok(self) -> bool:
        """No divergence (a boundary is an honest stop, not a failure)."""
        return self.divergence is None


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
                self.controls.setdefault((r.turn, f["at_call"]), []).append(Steer(f["text"]))
            elif r.kind == "interrupt":
                self.controls.setdefault((r.turn, f["at_call"]), []).append(Interrupt())

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
        for chunk in f.get("chunks", ()):
            yield TextDelta(text=chunk)
        for call in f.get("tool_calls", ()):
            yield ToolCall.model_validate(call)
        usage = f.get("usage")
        if usage:
            yield Usage(**usage)
        yield Finished(reason=f["finish"])


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

    def take(self, turn: int, point: int) -> list[Control]:
        return self.tape.controls.pop((turn, point), [])


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


_SHAPES: dict[str, dict[str, type | tuple[type, ...]]] = {
    "session_opened": {"config": dict}, "turn_started": {"turn": int}, "prompt": {"text": str},
    "model_call": {"index": int, "request_digest": str}, "model_result": {"index": int},
    "tool_call": {"call_id": str, "name": str, "arguments": dict}, "tool_result": {"call_id": str, "name": str,
                                                                                 "status": str},
    "approval": {"call_id": str}, "steer": {"text": str, "at_call": int}, "interrupt": {"at_call": int},
    "turn_settled": {"status": str, "conversation_digest": str},
}
_ERROR_KINDS = frozenset(k.value for k in ModelErrorKind)
_FINISH = frozenset({"stop", "tool_calls", "length", "content_filter"})


def _well_formed(r: StoredRecord) -> bool:
    """Whether a (chained, hence not corrupted — but perhaps crafted) record has the shape replay relies on."""
    f = r.fields
    if any(not isinstance(f.get(name), kinds) or (isinstance(f.get(name), bool) and kinds is int)
           for name, kinds in _SHAPES.get(r.kind, {}).items()):
        return False
    if r.kind == "model_result":
        error = f.get("error")
        if error is not None:
            return isinstance(error, dict) and error.get("kind") in _ERROR_KINDS and isinstance(error.get("detail"),
                                                                                                 str)
        return (isinstance(f.get("chunks"), list) and all(isinstance(c, str) for c in f["chunks"])
                and isinstance(f.get("tool_calls"), list) and all(isinstance(c, dict) for c in f["tool_calls"])
                and f.get("finish") in _FINISH and (f.get("usage") is None or isinstance(f.get("usage"), dict)))
    return True


def _scan(records: list[StoredRecord], env: lmdb.Environment) -> tuple[list[StoredRecord], Boundary | None]:
    """The records replay may use (blobs resolved), and the boundary that ends them, if any."""
    out: list[StoredRecord] = []
    for r in records:
        if r.kind == "unreadable":
            return out, Boundary("unreadable", r.seq)
        if r.kind not in KINDS:
            return out, Boundary("unknown_kind", r.seq)
        if r.kind in ("gap", "truncated"):
            return out, Boundary(r.kind, r.seq)
        fields = dict(r.fields)
        for name, value in r.fields.items():
            if blobs.is_reference(value):
                found, fields[name] = blobs.resolve(env, value)
                if not found:
                    return out, Boundary("missing_blob", r.seq)
        resolved = StoredRecord(r.seq, r.hash, r.prev, r.at, r.turn, r.kind, fields)
        if not _well_formed(resolved):
            return out, Boundary("unreadable", r.seq)
        out.append(resolved)
    return out, None


async def replay_session(env: lmdb.Environment, session: str, *, catalog: ToolCatalog | None = None,
                         sink: OutputSink | None = None) -> ReplayReport:
    """Replay ``session``. ``catalog``: the tool set to re-parse calls with and to show the model (default: the
    specs and parse outcomes recorded in the journal — what happened; pass today's ``ToolsCatalog`` to find out
    whether today's tools would have led the session elsewhere). ``sink``: where the replayed turns' output events
    go (default: nowhere); a runtime collects a settled turn's events there to publish what a crash withheld."""
    verdict = reading.verify(env, session)
    stored = [r for r in reading.records(env, session)  # not what was appended after the verified snapshot
              if verdict.head_seq is None or r.seq <= verdict.head_seq]
    boundary: Boundary | None = None
    if not verdict.ok:
        assert verdict.broken_seq is not None
        stored = [r for r in stored if r.seq < verdict.broken_seq]
        boundary = Boundary("chain_broken", verdict.broken_seq)
    usable, stop = _scan(stored, env)
    boundary = stop or boundary
    turns = sum(1 for r in stored if r.kind == "turn_started")

    states: list[LoopState] = []  # the state after each verified turn
    cut_short = 0

    def report(verified: int, *, divergence: Divergence | None = None, boundary: Boundary | None = None
               ) -> ReplayReport:
        return ReplayReport(session, len(stored), turns, verified, verdict.head_seq, divergence, boundary,
                            states[-1] if states else None, cut_short)

    if not usable or usable[0].kind != "session_opened":
        return report(0, boundary=boundary or Boundary("no_session_opened", stored[0].seq if stored else 0))
    opened = usable[0]
    # the turns that settled before the boundary
    spans: list[tuple[int, int]] = []
    start: int | None = None
    for i, r in enumerate(usable):
        if r.kind == "turn_started":
            cut_short += start is not None  # the run before it never settled: a later runtime ran the turn again
            start = i
        elif r.kind == "turn_settled" and start is not None:
            spans.append((start, i))
            start = None
    if start is not None and boundary is None:
        boundary = Boundary("unsettled_turn", usable[start].seq)
    tape = _Tape(usable)
    try:
        config = SessionConfig.model_validate(opened.fields["config"])
        tools: ToolCatalog = catalog or RecordedCatalog(opened.fields.get("tools", []), tape)
    except (ValidationError, KeyError, TypeError):
        return report(0, boundary=Boundary("bad_session_opened", opened.seq))
    ports = Ports(model=_Model(tape), effects=_Effects(tape), journal=_Journal(tape), clock=_Clock(tape),
                  control=_Control(tape), sink=sink or _Sink(), catalog=tools)
    loop = SessionLoop(session, config, ports, deadlines=False)
    states.append(loop.state())
    verified = 0
    for first, last in spans:
        tape.focus(first, last)
        prompt = next((r.fields["text"] for r in usable[first:last] if r.kind == "prompt"), None)
        if prompt is None:
            return report(verified, boundary=Boundary("no_prompt", usable[first].seq))
        try:
            await loop.run_turn(prompt)
        except _Diverged as exc:
            return report(verified, divergence=exc.divergence)
        except BaseExceptionGroup as group:
            found = _first_divergence(group)
            if found is None:
                return report(verified, boundary=_unreplayable(tape, group))
            return report(verified, divergence=found)
        except Exception as exc:  # a well-formed but crafted record the loop cannot take (e.g. a bad usage dict)
            return report(verified, boundary=_unreplayable(tape, exc))
        if tape.pos != last + 1:
            return report(verified, divergence=Divergence(
                usable[min(tape.pos, last)].seq, usable[first].turn, "records", last + 1 - first, tape.pos - first))
        verified += 1
        states.append(loop.state())
    return report(verified, boundary=boundary)


def _unreplayable(tape: _Tape, exc: BaseException) -> Boundary:
    records = tape.records
    seq = records[min(tape.pos, len(records) - 1)].seq if records else 0
    return Boundary("unreplayable", seq, f"{type(exc).__name__}: {exc}"[:500])


def _first_divergence(group: BaseExceptionGroup[Any]) -> Divergence | None:
    for exc in group.exceptions:
        if isinstance(exc, _Diverged):
            return exc.divergence
        if isinstance(exc, BaseExceptionGroup):
            found = _first_divergence(exc)
            if found is not None:
                return found
    return None


def replay(env: lmdb.Environment, session: str, *, catalog: ToolCatalog | None = None) -> ReplayReport:
    """Replay a session's journal (synchronous: runs its own trio loop)."""
    return trio.run(partial(replay_session, env, session, catalog=catalog))
