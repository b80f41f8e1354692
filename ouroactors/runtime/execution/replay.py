"""Verified replay: re-run a session's recorded turns through the same :class:`~.loop.SessionLoop`, with the
recording standing in for every port — model chunks, tool results (and approvals), steering, clock — and compare.

Nothing runs and nothing is written: no tool, no ledger, no grants, no journal write, no network — every port is
the recording's (:mod:`.replay_ports`, which also says how each record the loop emits is compared with the next
recorded one). The first difference stops the replay with a :class:`Divergence` (seq, turn, field, expected,
actual).

Replay stops honestly where it cannot go on, as a :class:`Boundary` with the turns before it verified: a record that
does not verify (``chain_broken``), ``gap``, ``truncated``, an ``unsettled_turn`` (the last turn has no
``turn_settled``: a crash), a ``missing_blob``, an ``unknown_kind`` or an ``unreadable`` record, a
``session_opened`` it cannot rebuild the loop from (``bad_session_opened``).

A turn that no runtime settled but the session's coordinator **ended** (``turn_ended``: the session was cancelled,
or failed, while the turn waited on an approval or after its runtime was lost) is no stop: its records are in the
verified chain, and the report names it (:class:`EndedTurn`). It is not run through the loop — there is no
settlement of the loop's to compare, and nothing can follow it (the session's end is terminal); anything that does
is a ``after_ended_turn`` boundary.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import lmdb
import trio
from pydantic import ValidationError

from ...core.codec import CodecError
from . import blobs, chain, reading
from .config import SessionConfig
from .journal import KINDS
from .loop import LoopState, OutputSink, Ports, SessionLoop, ToolCatalog
from .model import ModelErrorKind
from .reading import StoredRecord
from .replay_ports import COMPARED as COMPARED  # re-exported
from .replay_ports import (  # the recording standing in for each port
    Divergence,
    RecordedCatalog,
    _Clock,
    _Control,
    _Diverged,
    _Effects,
    _Journal,
    _Model,
    _Sink,
    _Tape,
)
from .snapshots import ConversationSnapshot, binding_problem, state_of


@dataclass(frozen=True)
class Boundary:
    reason: str
    seq: int
    detail: str = ""


@dataclass(frozen=True)
class EndedTurn:
    """The turn the session's coordinator ended (its ``turn_ended`` record): not replayed, see the module docstring."""

    seq: int
    turn: int | None
    status: str
    reason: str


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
    snapshot_turns: int = 0  # turns taken from a conversation snapshot (not replayed: see .snapshots)
    snapshot_refused: str | None = None  # why a snapshot offered was not used (the whole journal was replayed)
    settled_at: tuple[int, bytes] | None = None  # (seq, hash) of the turn_settled record ``state`` follows
    encodings: bytes | None = field(default=None, repr=False)  # ``state``'s conversation encoded (for a snapshot)
    opened: dict[str, Any] | None = field(default=None, repr=False)  # the session_opened fields the loop was built from
    # the records after the last verified turn, when replay reached the end of the journal: the unsettled runs of
    # the next turn, whose model results a runtime re-running it takes instead of asking the model again (.reuse)
    unsettled: tuple[StoredRecord, ...] = field(default=(), repr=False)
    ended: EndedTurn | None = None  # the last turn, ended by the coordinator (not replayed)

    @property
    def ok(self) -> bool:
        """No divergence (a boundary is an honest stop, not a failure)."""
        return self.divergence is None


_SHAPES: dict[str, dict[str, type | tuple[type, ...]]] = {
    "session_opened": {"config": dict}, "turn_started": {"turn": int}, "prompt": {"text": str},
    "model_call": {"index": int, "request_digest": str}, "model_result": {"index": int},
    "tool_call": {"call_id": str, "name": str, "arguments": dict}, "tool_result": {"call_id": str, "name": str,
                                                                                 "status": str},
    "approval": {"call_id": str}, "steer": {"text": str, "at_call": int}, "interrupt": {"at_call": int},
    "steer_received": {"id": str, "text": str},
    "turn_settled": {"status": str, "conversation_digest": str},
    "turn_ended": {"status": str, "reason": str, "settled_by": str},
}
# records the loop does not write itself, kept as evidence (a steer the runtime accepted: see .reuse); replay
# leaves them out of the run it compares, and hands them on in ``unsettled``
EVIDENCE_ONLY = frozenset({"steer_received"})
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


def _since_snapshot(env: lmdb.Environment, session: str, start: ConversationSnapshot
                    ) -> tuple[chain.Verdict, list[StoredRecord], LoopState] | str:
    """The verdict and the records a replay from ``start`` uses (the session_opened fields the snapshot's loop was
    rebuilt from, then its ``turn_settled`` and what follows it) and its state, or why the snapshot cannot be
    continued from (see :mod:`.snapshots`)."""
    found = reading.verify_since(env, session, start.seq, start.hash)
    if found is None:
        return "the session has no journal"
    verdict, since = found
    if not since or since[0].seq != start.seq:
        return f"record {start.seq} is gone or no longer has the snapshot's hash ({verdict.reason})"
    problem = binding_problem(start, since[0])
    if problem is not None:
        return problem
    try:
        state = state_of(start)  # its bytes are the digested ones: only a bug makes them not decode
    except CodecError as exc:
        return str(exc)
    opened = StoredRecord(start.seq, b"", b"", 0, None, "session_opened", start.opened)  # as the loop was rebuilt
    return verdict, [opened, *since], state


def snapshot_problem(env: lmdb.Environment, session: str, start: ConversationSnapshot) -> str | None:
    """Why ``start`` could not be continued from now (what a replay from it checks before it replays anything);
    None when the journal attests it."""
    found = _since_snapshot(env, session, start)
    return found if isinstance(found, str) else None


async def replay_session(env: lmdb.Environment, session: str, *, catalog: ToolCatalog | None = None,
                         sink: OutputSink | None = None,
                         start: ConversationSnapshot | Sequence[ConversationSnapshot] | None = None) -> ReplayReport:
    """Replay ``session``. ``catalog``: the tool set to re-parse calls with and to show the model (default: the
    specs and parse outcomes recorded in the journal — what happened; pass today's ``ToolsCatalog`` to find out
    whether today's tools would have led the session elsewhere). ``sink``: where the replayed turns' output events
    go (default: nowhere); a runtime collects a settled turn's events there to publish what a crash withheld.
    ``start``: a conversation snapshot to continue from, replaying only the turns after it — used only if the
    journal attests it (:mod:`.snapshots`), else the whole journal is replayed and ``snapshot_refused`` says why;
    several (:func:`.snapshots.candidates`, newest first): the first the journal attests."""
    refused: str | None = None
    offers = [start] if isinstance(start, ConversationSnapshot) else list(start or ())
    resumed: tuple[chain.Verdict, list[StoredRecord], LoopState] | None = None
    chosen: ConversationSnapshot | None = None
    why: list[str] = []
    for offer in offers:
        attested = _since_snapshot(env, session, offer)
        if not isinstance(attested, str):
            resumed, chosen = attested, offer
            break
        why.append(attested)
    if resumed is None:
        refused = "; ".join(why) or None
    if resumed is not None:
        verdict, stored, _ = resumed
    else:
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
    base = chosen.turns if resumed is not None and chosen is not None else 0
    turns = base + sum(1 for r in stored if r.kind == "turn_started")

    states: list[LoopState] = []  # the state after each verified turn
    settled: list[tuple[int, bytes] | None] = []  # the turn_settled record each state follows
    loops: list[SessionLoop] = []  # the loop, once made
    cut_short = 0

    def report(verified: int, *, divergence: Divergence | None = None, boundary: Boundary | None = None,
               unsettled: tuple[StoredRecord, ...] = (), ended: EndedTurn | None = None) -> ReplayReport:
        state = states[-1] if states else None
        return ReplayReport(session, len(stored), turns, verified, verdict.head_seq, divergence, boundary, state,
                            cut_short, base, refused, settled[-1] if settled else None,
                            None if state is None or not loops else loops[0].encodings(state),
                            usable[0].fields if loops else None, unsettled, ended)

    async def without_snapshot(why: str) -> ReplayReport:  # nothing ran yet: the whole journal, as if none
        whole = await replay_session(env, session, catalog=catalog, sink=sink)
        return dataclasses.replace(whole, snapshot_refused=f"its session_opened fields {why}")

    evidence = usable  # every usable record; the loop's are those it writes itself (a steer_received is not)
    usable = [r for r in usable if r.kind not in EVIDENCE_ONLY]
    if not usable or usable[0].kind != "session_opened":
        if resumed is not None:
            return await without_snapshot("are not well-formed")
        return report(0, boundary=boundary or Boundary("no_session_opened", stored[0].seq if stored else 0))
    opened = usable[0]
    # the turns that settled before the boundary
    spans: list[tuple[int, int]] = []
    began: int | None = None
    ended: EndedTurn | None = None
    for i, r in enumerate(usable):
        if r.kind == "turn_started":
            cut_short += began is not None  # the run before it never settled: a later runtime ran the turn again
            began = i
        elif r.kind == "turn_settled" and began is not None:
            spans.append((began, i))
            began = None
        elif r.kind == "turn_ended":  # ended by the coordinator: nothing may follow it
            ended, began = EndedTurn(r.seq, r.turn, r.fields["status"], r.fields["reason"]), None
            if i + 1 < len(usable) and boundary is None:
                boundary = Boundary("after_ended_turn", usable[i + 1].seq, f"turn {r.turn} was ended by its "
                                                                           "coordinator")
            break
    if began is not None and boundary is None:
        boundary = Boundary("unsettled_turn", usable[began].seq)
    tape = _Tape(usable)
    try:
        config = SessionConfig.model_validate(opened.fields["config"])
        tools: ToolCatalog = catalog or RecordedCatalog(opened.fields.get("tools", []), tape)
    except (ValidationError, KeyError, TypeError):
        if resumed is not None:
            return await without_snapshot("do not rebuild a loop")
        return report(0, boundary=Boundary("bad_session_opened", opened.seq))
    ports = Ports(model=_Model(tape), effects=_Effects(tape), journal=_Journal(tape), clock=_Clock(tape),
                  control=_Control(tape), sink=sink or _Sink(), catalog=tools)
    loop = SessionLoop(session, config, ports, deadlines=False)
    loops.append(loop)
    if resumed is not None and chosen is not None:
        loop.restore(resumed[2])
        settled.append((chosen.seq, chosen.hash))
    else:
        settled.append(None)
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
        settled.append((usable[last].seq, usable[last].hash))
    if ended is not None:  # the coordinator ended the last turn: nothing of it is left for a re-run to take
        return report(verified, boundary=boundary, ended=ended)
    last = usable[spans[-1][1]].seq if spans else opened.seq  # the last settled turn's end (or the session_opened)
    end = boundary is None or boundary.reason == "unsettled_turn"  # nothing unread past them
    return report(verified, boundary=boundary, unsettled=tuple(r for r in evidence if r.seq > last) if end else ())


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
