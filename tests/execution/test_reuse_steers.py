"""A re-run turn delivers again the steers its lost runs delivered (:mod:`ouroactors.runtime.execution.reuse`): the
user's message is not lost with the runtime, and the request that followed it is the recorded one, so the model is
not asked again for it.

Each first run here is steered while its first tool runs (delivered before model call 1) and lost in its second
tool; the re-run's live model answers differently (``OTHER``), as a real one may."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
import trio

from ouroactors.runtime.execution import reading
from ouroactors.runtime.execution.loop import CallContext, ParsedCall, ToolResult
from ouroactors.runtime.execution.loop_ports import Interrupt, Steer
from ouroactors.runtime.execution.model import Message
from ouroactors.runtime.execution.reading import StoredRecord
from ouroactors.runtime.execution.replay import replay_session
from ouroactors.runtime.execution.reuse import (
    RecordedSteer,
    RedeliveringControl,
    ReusingModel,
    recorded_calls,
    recorded_steers,
)

from .loop_support import make_session, text
from .test_loop import assert_replays
from .test_reuse import FIRST, OTHER, Counting, LosingEffects, Lost

STEER = "only the top-level files, please"


class SteeredEffects(LosingEffects):
    """Steers the running turn while the tool ``steer_at`` runs; the process is lost in ``lose_at``."""

    def __init__(self, lose_at: str | None, steer_at: str | None = "c1") -> None:
        super().__init__(lose_at)
        self.steer_at = steer_at
        self.steering: Any = None

    async def run(self, call: ParsedCall, ctx: CallContext) -> ToolResult:
        if call.call.id == self.steer_at:
            self.steering.steer(1, STEER)
        return await super().run(call, ctx)


def steered_run(env, lose_at: str | None = "c2") -> None:
    effects = SteeredEffects(lose_at)
    h = make_session(env, "s1", FIRST, effects=effects)
    effects.steering = h.steering
    with pytest.raises(Lost):
        trio.run(h.loop.run_turn, "go")


def rerun(env, effects: Any = None) -> tuple[Any, Any, Counting, ReusingModel, RedeliveringControl]:
    """The next runtime as the runtime's open wires it: recorded answers and recorded steers."""
    h = make_session(env, "s1", OTHER, restore=True, effects=effects)
    assert h.restored is not None
    live = Counting(h.loop.ports.model)
    model = h.loop.ports.model = ReusingModel(live, 1, recorded_calls(h.restored.unsettled, 1))
    control = h.loop.ports.control = RedeliveringControl(h.loop.ports.control, 1,
                                                         recorded_steers(h.restored.unsettled, 1))
    try:
        outcome = trio.run(h.loop.run_turn, "go")
    except Lost:
        outcome = None
    return h, outcome, live, model, control


def last_run(env) -> list[StoredRecord]:
    records = reading.records(env, "s1")
    return records[max(i for i, r in enumerate(records) if r.kind == "turn_started"):]


def test_a_rerun_delivers_the_lost_runs_steer_where_it_was_and_takes_the_answer_that_followed(env):
    steered_run(env)
    h, outcome, live, model, control = rerun(env)
    assert outcome is not None and outcome.status == "completed"
    # without the steer, call 1's request would differ from the recorded one: the model asked again ([1, 2])
    assert model.reused == [0, 1] and live.asked == [2]
    assert [s.at_call for s in control.redelivered] == [1]
    assert h.loop.conversation.count(Message(role="user", content=STEER)) == 1
    [steer] = [r for r in last_run(env) if r.kind == "steer"]
    assert steer.fields == {"text": STEER, "at_call": 1, "redelivered": True}
    # a follower sees where it took effect, and that it is the lost run's steer, not a second one
    assert [d for k, _, d in h.sink.events if k == "steered"] == [{"text": STEER, "at_call": 1, "redelivered": True}]
    assert_replays(env, turns=1)  # a re-delivered steer replays at its point as recorded


def test_a_steer_redelivered_by_a_lost_rerun_is_delivered_once_by_the_next(env):
    steered_run(env)
    _h, outcome, _live, model, _control = rerun(env, effects=LosingEffects("c2"))  # lost again, in the same tool
    assert outcome is None and model.reused == [0, 1]
    h, outcome, live, model, control = rerun(env)
    assert outcome is not None and outcome.status == "completed"
    assert model.reused == [0, 1] and live.asked == [2]
    assert len(control.redelivered) == 1 and h.loop.conversation.count(Message(role="user", content=STEER)) == 1
    assert_replays(env, turns=1)


def test_a_live_steer_of_the_rerun_follows_the_redelivered_one_and_is_new(env):
    steered_run(env)
    h = make_session(env, "s1", OTHER, restore=True)
    assert h.restored is not None
    h.loop.ports.model = ReusingModel(h.loop.ports.model, 1, recorded_calls(h.restored.unsettled, 1))
    h.loop.ports.control = RedeliveringControl(h.steering, 1, recorded_steers(h.restored.unsettled, 1))
    h.steering.steer(1, "and be brief")  # arrives before the re-run starts: delivered at its first point
    trio.run(h.loop.run_turn, "go")
    steers = [(r.fields["at_call"], r.fields["text"], r.fields.get("redelivered")) for r in last_run(env)
              if r.kind == "steer"]
    assert steers == [(0, "and be brief", None), (1, STEER, True)]
    assert [s.text for s in recorded_steers(last_run(env), 1)] == ["and be brief"]  # the new one only
    assert_replays(env, turns=1)


def _steer(seq: int, turn: int, **fields: Any) -> StoredRecord:
    return StoredRecord(seq, b"", b"", seq, turn, "steer", fields)


def test_recorded_steers_are_the_new_ones_of_every_run_of_the_turn_and_never_a_crafted_one():
    records = [
        _steer(1, 2, text="a", at_call=1),
        _steer(2, 3, text="other turn", at_call=0),
        StoredRecord(3, b"", b"", 3, 2, "turn_started", {"turn": 2}),
        _steer(4, 2, text="a", at_call=1, redelivered=True),  # the same message again: not a second one
        _steer(5, 2, text="b", at_call=2),
        _steer(6, 2, text="bool", at_call=True), _steer(7, 2, text=b"bytes", at_call=0),
        _steer(8, 2, text="negative", at_call=-1), _steer(9, 2, at_call=0),
    ]
    assert recorded_steers(records, 2) == [RecordedSteer(1, "a", 1), RecordedSteer(2, "b", 5)]


def test_an_accepted_steer_no_delivery_names_is_due_past_the_recorded_calls_once():
    records = [
        StoredRecord(1, b"", b"", 1, 2, "model_call", {"index": 0, "request_digest": "d"}),
        StoredRecord(2, b"", b"", 2, 2, "steer_received", {"id": "k1", "text": "delivered"}),
        StoredRecord(3, b"", b"", 3, 2, "steer_received", {"id": "k2", "text": "held"}),
        StoredRecord(4, b"", b"", 4, 2, "steer_received", {"id": "k2", "text": "held (a copy)"}),
        StoredRecord(5, b"", b"", 5, 2, "steer_received", {"id": 7, "text": "crafted"}),
        _steer(6, 2, text="delivered", at_call=1, id="k1"),
        StoredRecord(7, b"", b"", 7, 2, "model_call", {"index": 1, "request_digest": "e"}),
        StoredRecord(8, b"", b"", 8, 2, "model_call", {"index": True, "request_digest": "crafted"}),
    ]
    assert recorded_steers(records, 2) == [RecordedSteer(1, "delivered", 6, "k1"),
                                           RecordedSteer(2, "held", 3, "k2", delivered=False)]
    assert recorded_steers(records[2:3], 2) == [RecordedSteer(0, "held", 3, "k2", delivered=False)]  # no call yet


class _Live:
    def __init__(self) -> None:
        self.items: dict[int, list[Any]] = {}

    def take(self, turn: int, point: int) -> list[Any]:
        return self.items.pop(point, [])

    def leftover(self, turn: int) -> list[Any]:
        return [item for point in sorted(self.items) for item in self.items.pop(point)]


def test_redelivering_control_hands_each_recorded_steer_once_at_its_point_before_the_live_ones():
    live = _Live()
    live.items[1] = [Interrupt()]
    told: list[RecordedSteer] = []
    y = RecordedSteer(1, "y", 6, "k6", delivered=False)  # accepted, never delivered: a first delivery
    control = RedeliveringControl(live, 4, [RecordedSteer(2, "late", 9), RecordedSteer(1, "x", 5), y],
                                  on_redeliver=told.append)
    assert control.take(4, 0) == []
    assert control.take(4, 1) == [Steer("x", True), Steer("y", False, "k6"), Interrupt()]
    assert control.take(4, 1) == []  # never twice
    assert control.take(5, 0) == []  # a later turn: the re-run is over, "late" is not delivered in it
    assert control.take(4, 3) == [] and [s.seq for s in told] == [5, 6]


def test_a_point_the_rerun_skips_still_gets_its_steer_at_the_next_one():
    control = RedeliveringControl(_Live(), 1, [RecordedSteer(1, "x", 5)])
    assert control.take(1, 2) == [Steer("x", True)]


class HeldSteerEffects(LosingEffects):
    """The runtime accepts a steer while ``steer_at`` runs (journaled, queued: its handler's work) and is lost in
    ``lose_at``, before the loop delivers it."""

    def __init__(self) -> None:
        super().__init__("c1")
        self.loop: Any = None
        self.steer_at = "c1"

    async def run(self, call: ParsedCall, ctx: CallContext) -> ToolResult:
        if call.call.id == self.steer_at:
            assert self.loop.ports.control.accept(self.loop, 1, STEER, "k1")
        return await super().run(call, ctx)


def test_a_steer_accepted_but_never_delivered_is_delivered_by_the_rerun_past_the_recorded_calls(env):
    effects = HeldSteerEffects()
    h = make_session(env, "s1", FIRST, effects=effects)
    effects.loop = h.loop
    with pytest.raises(Lost):
        trio.run(h.loop.run_turn, "go")
    assert [r.kind for r in reading.records(env, "s1")][-2:] == ["tool_call", "steer_received"]  # durable
    h, outcome, live, model, control = rerun(env)
    assert outcome is not None and outcome.status == "completed"
    assert model.reused == [0] and live.asked == [1, 2]  # call 0 taken; the steer comes before call 1
    assert [(s.at_call, s.delivered) for s in control.redelivered] == [(1, False)]
    [steer] = [r for r in last_run(env) if r.kind == "steer"]
    assert steer.fields == {"text": STEER, "at_call": 1, "id": "k1"}  # a first delivery, not a re-delivery
    assert [d for k, _, d in h.sink.events if k == "steered"] == [{"text": STEER, "at_call": 1, "redelivered": False}]
    assert h.loop.conversation.count(Message(role="user", content=STEER)) == 1
    assert_replays(env, turns=1)


def test_a_journal_with_accepted_steers_replays_and_verifies(env):
    h = make_session(env, "s1", FIRST)
    h.loop.receive_steer(1, "k1", "before the turn")  # accepted as the turn was starting: evidence only
    h.steering.steer(1, "before the turn", "k1")
    assert trio.run(h.loop.run_turn, "go").status == "completed"
    kinds = [r.kind for r in reading.records(env, "s1")]
    assert kinds.count("steer_received") == 1 and kinds.count("steer") == 1
    assert_replays(env, turns=1)


def test_a_steer_whose_acceptance_does_not_commit_is_said_so_and_named_by_the_next_gap(env):
    """The runtime refuses such a steer (SteerNotRecorded) rather than promise it: nothing is queued, and the lost
    record is evidence — the journal's next gap names it."""
    from ouroactors.core import faults
    from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule

    h = make_session(env, "s1", [[text("a")], [text("b")]])
    trio.run(h.loop.run_turn, "1")
    faults.arm(FaultPlan((FaultRule("storage.before_commit", FaultAction.COMMIT_REJECTED, nth=1, times=1),)))
    try:  # turn 2, as the runtime has just started it
        assert h.loop.receive_steer(2, "k1", "not kept") is False
    finally:
        faults.disarm()
    assert h.loop.receive_steer(2, "k2", "kept") is True  # the next commit writes the gap first
    records = reading.records(env, "s1")
    gap = next(r for r in records if r.kind == "gap")
    assert gap.fields["lost_kinds"] == {"steer_received": 1} and records[-1].fields["id"] == "k2"


class SteeredWhileAnswering:
    """A model port that accepts a steer (journaled, queued: the runtime's handler) while model call ``at`` streams."""

    def __init__(self, h: Any, at: int) -> None:
        self.h, self.at, self.inner = h, at, h.loop.ports.model

    def stream(self, request, *, turn, index):
        if index == self.at:
            assert self.h.loop.receive_steer(turn, "k1", STEER) is True
            self.h.steering.steer(turn, STEER, "k1")
        return self.inner.stream(request, turn=turn, index=index)


def test_a_steer_that_comes_while_the_model_gives_its_final_answer_gets_one_more_model_call(env):
    """It was accepted (journaled) before the turn took its last point: the turn takes it there and asks the model
    again, rather than settle with an acknowledged steer nobody read."""
    h = make_session(env, "s1", [[text("first answer")], [text("with the steer in mind")]])
    h.loop.ports.model = SteeredWhileAnswering(h, 0)
    outcome = trio.run(h.loop.run_turn, "go")
    assert (outcome.status, outcome.text) == ("completed", "with the steer in mind")
    records = reading.records(env, "s1")
    assert [r.fields for r in records if r.kind == "steer"] == [{"text": STEER, "at_call": 1, "id": "k1"}]
    assert [r.kind for r in records].count("model_call") == 2
    assert [k for k in h.sink.kinds() if k in ("text", "steered")] == ["text", "steered", "text"]
    assert_replays(env, turns=1)  # replay takes the steer at the same last point and makes the same second call


def test_a_steer_for_a_turn_past_its_last_point_is_refused_and_journals_nothing(env):
    from ouroactors.runtime.execution.errors import NoActiveTurn

    h = make_session(env, "s1", [[text("done")]])
    trio.run(h.loop.run_turn, "go")
    with pytest.raises(NoActiveTurn, match="settling"):
        h.loop.receive_steer(1, "k1", "too late")
    assert "steer_received" not in [r.kind for r in reading.records(env, "s1")]


def test_a_rerun_that_ends_before_a_steers_point_delivers_it_at_its_last_point(env):
    """The lost run accepted a steer in its second tool (due after model call 1) and was lost there. The re-run is
    asked another question, so the model is asked afresh and answers at once: the re-run never reaches point 2. It
    delivers the steer at its last point instead, and asks the model once more, rather than drop it."""
    effects = HeldSteerEffects()
    effects.lose_at = "c2"
    h = make_session(env, "s1", FIRST, effects=effects)
    effects.loop = h.loop
    effects.steer_at = "c2"
    with pytest.raises(Lost):
        trio.run(h.loop.run_turn, "go")
    h = make_session(env, "s1", [[text("short answer")], [text("after the steer")]], restore=True)
    assert h.restored is not None
    h.loop.ports.model = ReusingModel(h.loop.ports.model, 1, recorded_calls(h.restored.unsettled, 1))
    control = h.loop.ports.control = RedeliveringControl(h.steering, 1, recorded_steers(h.restored.unsettled, 1))
    assert [s.at_call for s in control._pending] == [2]
    outcome = trio.run(h.loop.run_turn, "another question")
    assert (outcome.status, outcome.text) == ("completed", "after the steer")
    [steer] = [r for r in last_run(env) if r.kind == "steer"]
    assert steer.fields == {"text": STEER, "at_call": 1, "id": "k1"}
    assert_replays(env, turns=1)


def test_redelivering_control_hands_every_steer_still_due_at_the_last_point():
    control = RedeliveringControl(_Live(), 1, [RecordedSteer(3, "x", 5), RecordedSteer(5, "y", 6)])
    assert control.take(1, 1) == []
    assert control.take(1, 1, last=True) == [Steer("x", True), Steer("y", True)]
    assert control.take(1, 2, last=True) == []


def test_an_accepted_steer_the_turn_stopped_before_taking_goes_in_the_conversation_for_the_next_turn(env):
    """Accepted while model call 1 ran, which then failed (the script has no answer left): the turn stops without
    another point. The steer is still put in the conversation, after the turn's last message — a ``steer`` record
    marked ``at_end`` between the failed call and turn_settled, a ``steered`` event saying so — and nothing is left
    undelivered. The next turn's first request carries it (the user was told it was taken), and replay puts it at
    the same place: the turns verify and the derived events are the live ones."""
    from .loop_support import ListSink, call

    h = make_session(env, "s1", [[call("c1", "read", path="x")]])
    h.loop.ports.model = SteeredWhileAnswering(h, 1)
    outcome = trio.run(h.loop.run_turn, "go")
    assert outcome.status == "failed"
    records = reading.records(env, "s1")
    assert [r.kind for r in records[-3:]] == ["model_result", "steer", "turn_settled"]
    assert "error" in records[-3].fields
    assert records[-2].fields == {"text": STEER, "at_call": 1, "id": "k1", "at_end": True}
    assert "undelivered_steers" not in records[-1].fields
    assert h.loop.conversation[-1] == Message(role="user", content=STEER)
    steered = [e for e in h.sink.events if e[0] == "steered"]
    assert [e[2] for e in steered] == [{"text": STEER, "at_call": 1, "redelivered": False, "at_end": True}]
    assert h.steering.undelivered(1) == 0 and h.steering.take(1, 0) == []

    asked: list[Any] = []
    inner = h.loop.ports.model

    class Recording:
        def stream(self, request, *, turn, index):
            asked.append(request)
            return inner.stream(request, turn=turn, index=index)

    h.loop.ports.model = Recording()
    trio.run(h.loop.run_turn, "again")  # the script has nothing left: this turn fails too, after its request
    assert [m.content for m in asked[0].messages[-2:]] == [STEER, "again"]

    sink = ListSink()
    report = trio.run(partial(replay_session, env, "s1", sink=sink))
    assert report.ok and report.verified_turns == 2
    live_events = [(k, t, {f: v for f, v in d.items() if f != "journal_degraded"}) for k, t, d in h.sink.events]
    derived = [(k, t, {f: v for f, v in d.items() if f != "journal_degraded"}) for k, t, d in sink.events]
    assert [e for e in derived if e[0] in ("steered", "turn_settled")] == [
        e for e in live_events if e[0] in ("steered", "turn_settled")]


class _OldControl:
    """The control port of a runtime from before leftover steers were put in the conversation: it only counted
    them."""

    def __init__(self, queue: Any) -> None:
        self.queue = queue

    def take(self, turn: int, point: int, *, last: bool = False) -> list[Any]:
        return self.queue.take(turn, point, last=last)

    def leftover(self, turn: int) -> list[Any]:
        return []

    def undelivered(self, turn: int) -> int:
        return self.queue.undelivered(turn)


def test_a_journal_that_counted_an_undelivered_steer_still_replays_with_the_count(env):
    """An older runtime settled such a turn with ``undelivered_steers`` and no ``at_end`` steer. Replay reads the
    count from the record (evidence, not a decision): the turn verifies and the derived turn_settled is the live
    one."""
    from .loop_support import ListSink, call

    h = make_session(env, "s1", [[call("c1", "read", path="x")]])
    h.loop.ports.model = SteeredWhileAnswering(h, 1)
    h.loop.ports.control = _OldControl(h.steering)
    assert trio.run(h.loop.run_turn, "go").status == "failed"
    settled = reading.records(env, "s1")[-1]
    assert settled.kind == "turn_settled" and settled.fields["undelivered_steers"] == 1
    sink = ListSink()
    report = trio.run(partial(replay_session, env, "s1", sink=sink))
    assert report.ok and report.verified_turns == 1
    live, derived = h.sink.events[-1], sink.events[-1]
    assert derived[0] == live[0] == "turn_settled" and derived[2]["undelivered_steers"] == 1
    assert {k: v for k, v in derived[2].items() if k != "journal_degraded"} == {
        k: v for k, v in live[2].items() if k != "journal_degraded"}


def test_a_steer_a_lost_run_put_in_the_conversation_at_its_end_is_delivered_again_past_its_calls():
    """A lost run stopped (model call 1 failed), put its leftover steer in the conversation and was lost before its
    turn_settled committed. The re-run delivers that steer again at the first point past every model call the run
    recorded — the re-run's model may answer where the lost one failed — or at the re-run's own end."""
    records = [
        StoredRecord(1, b"", b"", 10, 1, "turn_started", {"turn": 1}),
        StoredRecord(2, b"", b"", 11, 1, "model_call", {"index": 0, "request_digest": "d0"}),
        StoredRecord(3, b"", b"", 12, 1, "model_call", {"index": 1, "request_digest": "d1"}),
        StoredRecord(4, b"", b"", 13, 1, "steer_received", {"id": "k1", "text": "late one"}),
        StoredRecord(5, b"", b"", 14, 1, "steer", {"text": "late one", "at_call": 1, "id": "k1", "at_end": True}),
    ]
    found = recorded_steers(records, 1)
    assert found == [RecordedSteer(2, "late one", 5, "k1")]  # delivered (not a first delivery), past call 1
    control = RedeliveringControl(_Live(), 1, found)
    assert control.take(1, 1) == []
    assert control.leftover(1) == [Steer("late one", True, "k1")]  # the re-run stopped again before point 2
    assert control.leftover(1) == []


def test_a_crafted_at_end_that_is_not_true_is_an_ordinary_delivery_and_one_without_an_int_point_is_none():
    """Only ``at_end: true`` marks a steer put in the conversation after its turn stopped; any other value (a crafted
    record) is read as the delivery at its point it claims to be, and never crashes the re-run's reading."""
    records = [
        StoredRecord(1, b"", b"", 1, 1, "model_call", {"index": 0, "request_digest": "d"}),
        StoredRecord(2, b"", b"", 2, 1, "steer", {"text": "x", "at_call": 0, "id": "k1", "at_end": "yes"}),
        StoredRecord(3, b"", b"", 3, 1, "steer", {"text": "y", "at_call": 1, "id": "k2", "at_end": 1}),
        StoredRecord(4, b"", b"", 4, 1, "steer", {"text": "z", "at_call": "1", "at_end": True}),  # no int point
    ]
    assert recorded_steers(records, 1) == [RecordedSteer(0, "x", 2, "k1"), RecordedSteer(1, "y", 3, "k2")]
