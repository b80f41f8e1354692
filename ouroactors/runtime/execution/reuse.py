"""A re-run turn takes the model's recorded answers instead of asking the model again (seed 001: "never call the
model again merely to reconstruct what it previously decided").

A turn that did not settle — its runtime died, or it parked on an approval and its process went away — is run
again from its start by the next runtime. The loop is deterministic; the model is not: asked again, it may answer
differently, and a real provider names its tool calls afresh (``call_…`` ids), so the effect ids derived from them
(:func:`~.effects.effect_id_of`) would be new, and a write the first run made would be run a second time under a
new id. The journal holds what the model said the first time: each ``model_result`` of the unsettled run, durable
with the commit it rode in (the start of the tool call it asked for, at the latest).

**The rule.** The re-run's model call ``index`` of that turn is answered from the recording when the journal holds a
successful ``model_result`` for it and the request the loop makes now has the digest the recorded ``model_call``
had — the same conversation, so the same decision is due. The first call that has no recording, or whose request
differs (a tool the ledger reports differently now, a steer that came in between), goes to the model, and so does
every later call of the turn: the recording is a prefix, never picked from. A recorded error is not reused (an
error is no decision; the call is made again). Several unsettled runs of the turn: the latest recording of each
index wins (a later run re-recorded or superseded it).

**Steers are delivered again.** A user's steer the lost run delivered between two model calls is part of the
request that followed it; a re-run without it would make another request, ask the model again, and lose what the
user said. So the re-run takes, from the journal, every steer an unsettled run of the turn delivered as a new one
(``steer`` records without ``redelivered``: a steer re-delivered by an earlier re-run is the same message) and
hands it to the loop at the point (model calls made) it was delivered, before the live ones
(:class:`RedeliveringControl`); the loop records it with ``redelivered: true``. A steer the runtime had accepted
but not delivered yet is in the journal too — the runtime commits a ``steer_received`` record (its id, its text)
before it answers the steer — and a re-run delivers each such steer whose id no ``steer`` record names at the first
point past every model call the lost runs recorded (so the recorded answers before it are still taken), as a new
delivery. A steer whose point the re-run never reaches (it ended sooner) is delivered at its last point, which then
gets one more model call. Interrupts need no such care: an ``interrupt`` record commits with the
``turn_settled`` it causes (one flush), so a turn whose interrupt is durable is settled, never re-run.

:func:`recorded_calls` and :func:`recorded_steers` are the pure selections; :class:`ReusingModel` and
:class:`RedeliveringControl` the ports that apply them; the events a recording stands for are
:func:`recorded_events` (replay substitutes the same ones).
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import trio
from pydantic import ValidationError

from . import steps
from .loop_ports import Control, ControlPort, ModelPort, Steer
from .model import Finished, ModelEvent, ModelRequest, TextDelta, ToolCall, Usage
from .reading import StoredRecord

__all__ = ["RecordedCall", "RecordedSteer", "RedeliveringControl", "ReusingModel", "recorded_calls", "recorded_events",
           "recorded_steers"]


@dataclass(frozen=True)
class RecordedCall:
    """A model call of the unsettled turn whose result the journal holds."""

    index: int
    request_digest: str  # of the request it answered (its model_call record)
    result: Mapping[str, Any]  # the model_result record's fields
    seq: int  # the model_result record's seq (evidence: which record the re-run took)


def recorded_calls(records: Sequence[StoredRecord], turn: int) -> dict[int, RecordedCall]:
    """The model calls of ``turn`` that a re-run may take from ``records`` (the journal after its last settled turn,
    in order): by index, each successful ``model_result`` with the digest of its run's ``model_call``."""
    found: dict[int, RecordedCall] = {}
    asked: dict[int, str] = {}  # this run's model_call digests by index
    for record in records:
        if record.turn != turn:
            continue
        fields = record.fields
        if record.kind == "turn_started":
            asked = {}  # another run of the turn: its own calls
        elif record.kind == "model_call":
            asked[fields["index"]] = fields["request_digest"]
        elif record.kind == "model_result" and fields.get("error") is None:
            index = fields["index"]
            digest = asked.get(index)
            if digest is not None:
                found[index] = RecordedCall(index, digest, fields, record.seq)
    return found


@dataclass(frozen=True)
class RecordedSteer:
    """A steer of the turn for its re-run to deliver after ``at_call`` model calls: one an unsettled run delivered
    (``delivered``: the re-run delivers it again), or one a runtime accepted and never delivered (at the first point
    past the recorded calls)."""

    at_call: int
    text: str
    seq: int  # its steer (or steer_received) record's seq
    steer_id: str = ""
    delivered: bool = True


def recorded_steers(records: Sequence[StoredRecord], turn: int) -> list[RecordedSteer]:
    """The steers of ``turn`` a re-run delivers, from ``records`` (as :func:`recorded_calls`): each new delivery (not
    itself a re-delivery) of every run, in the journal's order, at its point; then, at the first point past every
    recorded model call, each one a run put in the conversation after it stopped (``at_end``) and each accepted steer
    no delivery names; a record of another shape (crafted) is none."""
    found: list[RecordedSteer] = []
    ended: list[RecordedSteer] = []  # put in the conversation after a run stopped: where the re-run may, too
    received: dict[str, RecordedSteer] = {}  # accepted steers by id, the first record of each
    named: set[str] = set()  # ids a steer record (a delivery) names
    calls = -1  # the highest model call index the runs recorded
    for record in records:
        fields = record.fields
        if record.turn != turn:
            continue
        steer_id, text = fields.get("id"), fields.get("text")
        steer_id = steer_id if isinstance(steer_id, str) else ""
        if record.kind == "model_call":
            index = fields.get("index")
            if type(index) is int:
                calls = max(calls, index)
        elif record.kind == "steer_received" and steer_id and isinstance(text, str):
            received.setdefault(steer_id, RecordedSteer(-1, text, record.seq, steer_id, delivered=False))
        elif record.kind == "steer":
            if steer_id:
                named.add(steer_id)
            at_call = fields.get("at_call")
            if (fields.get("redelivered") is None and type(at_call) is int and at_call >= 0
                    and isinstance(text, str)):
                if fields.get("at_end") is True:  # put in the conversation once the lost run had stopped
                    ended.append(RecordedSteer(-1, text, record.seq, steer_id))
                else:
                    found.append(RecordedSteer(at_call, text, record.seq, steer_id))
    late = [*ended, *(s for i, s in received.items() if i not in named)]
    return found + [dataclasses.replace(s, at_call=calls + 1) for s in late]


def recorded_events(result: Mapping[str, Any]) -> list[ModelEvent]:
    """The stream a successful ``model_result`` records: its text, its tool calls, its usage, its finish."""
    events: list[ModelEvent] = [TextDelta(text=chunk) for chunk in result.get("chunks", ())]
    events.extend(ToolCall.model_validate(call) for call in result.get("tool_calls", ()))
    usage = result.get("usage")
    if usage:
        events.append(Usage(**usage))
    events.append(Finished(reason=result["finish"]))
    return events


class ReusingModel:
    """:class:`~.loop_ports.ModelPort`: ``live``, except for the re-run of ``turn``'s recorded prefix of calls.

    ``on_reuse(turn, index, seq)`` is told of each call answered from the recording (the runtime's event log)."""

    def __init__(self, live: ModelPort, turn: int, recorded: Mapping[int, RecordedCall],
                 on_reuse: Callable[[int, int, int], None] | None = None) -> None:
        self.live = live
        self.turn = turn
        self._recorded = dict(recorded)
        self._on_reuse = on_reuse
        self.reused: list[int] = []  # indices answered from the recording
        self._done = not recorded  # a call went to the model: the rest of the turn does too

    def stream(self, request: ModelRequest, *, turn: int, index: int) -> AsyncIterator[Any]:
        taken = self._take(request, turn, index)
        if taken is None:
            return self.live.stream(request, turn=turn, index=index)
        recorded, events = taken
        self.reused.append(index)
        if self._on_reuse is not None:
            self._on_reuse(turn, index, recorded.seq)
        return _replayed(events)

    def _take(self, request: ModelRequest, turn: int, index: int) -> tuple[RecordedCall, list[ModelEvent]] | None:
        if self._done or turn != self.turn:
            self._done = self._done or turn > self.turn  # a later turn: the re-run is over
            return None
        recorded = self._recorded.get(index)
        # a fresh Digests: the digest the loop just recorded for this request, computed the same way
        if recorded is None or steps.Digests().request(request) != recorded.request_digest:
            self._done = True
            return None
        try:
            return recorded, recorded_events(recorded.result)
        except (ValidationError, TypeError, KeyError, ValueError):  # a record that is no stream (crafted): asked
            self._done = True
            return None


async def _replayed(events: list[ModelEvent]) -> AsyncIterator[ModelEvent]:
    for event in events:
        await trio.lowlevel.checkpoint()  # cancellable between events, as a stream is
        yield event


class RedeliveringControl:
    """:class:`~.loop_ports.ControlPort`: ``live``, with the recorded steers of ``turn``'s lost runs handed over first,
    each at the point it was delivered (or the first point past it the re-run reaches, or its last point).

    ``on_redeliver(steer)`` is told of each (the runtime's event log)."""

    def __init__(self, live: ControlPort, turn: int, recorded: Sequence[RecordedSteer],
                 on_redeliver: Callable[[RecordedSteer], None] | None = None) -> None:
        self.live = live
        self.turn = turn
        self._pending = sorted(recorded, key=lambda s: s.at_call)  # stable: the journal's order within a point
        self._on_redeliver = on_redeliver
        self.redelivered: list[RecordedSteer] = []

    def undelivered(self, turn: int) -> int:
        return (len(self._pending) if turn == self.turn else 0) + self.live.undelivered(turn)

    def take(self, turn: int, point: int, *, last: bool = False) -> list[Control]:
        return [*self._due(turn, point, last), *self.live.take(turn, point)]

    def leftover(self, turn: int) -> list[Control]:
        return [*self._due(turn, point=-1, last=True), *self.live.leftover(turn)]

    def _due(self, turn: int, point: int, last: bool) -> list[Steer]:
        due: list[RecordedSteer] = []
        if turn == self.turn:  # at the turn's last point, every steer still due: the re-run ended sooner
            due = [s for s in self._pending if s.at_call <= point or last]
            self._pending = [s for s in self._pending if s.at_call > point and not last]
        elif turn > self.turn:
            self._pending = []  # the re-run is over; what it did not reach is not delivered later
        for steer in due:
            self.redelivered.append(steer)
            if self._on_redeliver is not None:
                self._on_redeliver(steer)
        return [Steer(s.text, redelivered=s.delivered, steer_id=s.steer_id) for s in due]
