"""Seed 001, "never call the model again merely to reconstruct what it previously decided": a turn that did not
settle is re-run by the next runtime from the model results its journal holds (request digests checked), and the
model is asked only from the first call it has no recording for (:mod:`ouroactors.runtime.execution.reuse`).

The re-run's live model here answers *differently* from the first run (other call ids, other paths), as a real
provider may: a re-run that asked it again would take another decision and derive other effect ids."""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any

import pytest
import trio

from ouroactors.runtime.execution import reading, snapshot_rider, snapshots
from ouroactors.runtime.execution.loop import CallContext, ParsedCall, ToolResult
from ouroactors.runtime.execution.model import Finished, TextDelta, ToolCall, Usage
from ouroactors.runtime.execution.ports import ProviderModel
from ouroactors.runtime.execution.providers import OpenAIConfig, OpenAIProvider
from ouroactors.runtime.execution.reading import StoredRecord
from ouroactors.runtime.execution.replay import replay, replay_session
from ouroactors.runtime.execution.reuse import ReusingModel, recorded_calls, recorded_events

from .loop_support import FakeEffects, call, make_session, text, usage
from .test_loop import assert_replays

FIRST = [[call("c1", "read", path="x"), usage(5, 2)], [call("c2", "list", path="."), usage(7, 3)], [text("done")]]
OTHER = [[call("z9", "read", path="elsewhere")], [call("z8", "list", path="/")], [text("live answer")]]


class Lost(Exception):
    """The runtime's process ends while a tool runs."""


class LosingEffects(FakeEffects):
    """Answers calls until ``lose_at`` (a call id; None: the first call), where the process is lost."""

    def __init__(self, lose_at: str | None) -> None:
        super().__init__()
        self.lose_at = lose_at

    async def run(self, call: ParsedCall, ctx: CallContext) -> ToolResult:
        if self.lose_at in (None, call.call.id):
            raise Lost(call.call.id)
        return await super().run(call, ctx)


class Counting:
    """A model port that counts the calls that reach it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.asked: list[int] = []

    def stream(self, request, *, turn, index):
        self.asked.append(index)
        return self.inner.stream(request, turn=turn, index=index)


def lost_run(env, lose_at: str) -> None:
    """Turn 1 of ``s1`` on the FIRST script, its runtime lost in the tool call ``lose_at`` (its model result and
    call committed before the tool ran, as the runtime's ledger start commits them)."""
    h = make_session(env, "s1", FIRST, effects=LosingEffects(lose_at))
    with pytest.raises(Lost):
        trio.run(h.loop.run_turn, "go")


def rerun(env, prompt: str = "go") -> tuple[Any, Counting, ReusingModel]:
    """The next runtime: restored from the journal, its live model answering OTHER; the turn run again."""
    h = make_session(env, "s1", OTHER, restore=True)
    assert h.restored is not None
    turn = h.loop.turns + 1
    live = Counting(h.loop.ports.model)
    seen: list[tuple[int, int, int]] = []
    model = ReusingModel(live, turn, recorded_calls(h.restored.unsettled, turn), on_reuse=lambda *a: seen.append(a))
    h.loop.ports.model = model
    outcome = trio.run(h.loop.run_turn, prompt)
    assert [index for _, index, _ in seen] == model.reused
    return outcome, live, model


def rerun_calls(env) -> list[str]:
    """The call ids of the tool_call records of the last run of turn 1."""
    records = reading.records(env, "s1")
    last = max(i for i, r in enumerate(records) if r.kind == "turn_started")
    return [r.fields["call_id"] for r in records[last:] if r.kind == "tool_call"]


def test_a_rerun_takes_the_recorded_answer_and_asks_the_model_only_past_it(env):
    lost_run(env, "c2")  # the first call ran; the runtime was lost in the second
    outcome, live, model = rerun(env)
    assert model.reused == [0, 1]  # both recorded answers taken: the calls the first run made, by their ids
    assert live.asked == [2]  # the model is asked once: for the answer it never gave
    assert rerun_calls(env) == ["c1", "c2"] and outcome.text == "live answer"
    assert_replays(env, turns=1)  # the re-run is what the journal says happened: its replay verifies


def test_a_rerun_stops_taking_recorded_answers_at_the_first_request_that_differs(env):
    lost_run(env, "c2")
    _outcome, live, model = rerun(env, prompt="another question")  # another prompt: another decision is due
    assert model.reused == [] and live.asked == [0, 1, 2]
    assert rerun_calls(env) == ["z9", "z8"]
    assert_replays(env, turns=1)


def test_after_a_settled_turn_there_is_nothing_to_take(env):
    h = make_session(env, "s1", [*FIRST[:1], [text("first answer")]])
    trio.run(h.loop.run_turn, "settled turn")  # turn 1 settles: nothing of it is re-run
    h2 = make_session(env, "s1", OTHER, restore=True)
    assert h2.restored is not None and h2.restored.unsettled == ()
    assert recorded_calls(h2.restored.unsettled, 2) == {}


def _record(seq: int, kind: str, in_turn: int | None, **fields: Any) -> StoredRecord:
    return StoredRecord(seq, b"", b"", seq, in_turn, kind, fields)


RESULT = {"chunks": ["a"], "tool_calls": [], "usage": None, "finish": "stop"}


def test_recorded_calls_takes_each_index_from_its_latest_run_and_never_an_error():
    records = [
        _record(1, "turn_started", 3, turn=3), _record(2, "model_call", 3, index=0, request_digest="d0"),
        _record(3, "model_result", 3, index=0, **RESULT),
        _record(4, "model_call", 3, index=1, request_digest="d1"),
        _record(5, "model_result", 3, index=1, error={"kind": "timeout", "detail": "slow"}),
        _record(6, "session_opened", None, config={}),
        _record(7, "turn_started", 3, turn=3), _record(8, "model_call", 3, index=0, request_digest="d0b"),
        _record(9, "model_result", 3, index=0, **RESULT),
        _record(10, "model_call", 4, index=0, request_digest="other turn"),
        _record(11, "model_result", 4, index=0, **RESULT),
        _record(12, "model_result", 3, index=2, **RESULT),  # no model_call of this run: not taken
    ]
    found = recorded_calls(records, 3)
    assert sorted(found) == [0] and (found[0].request_digest, found[0].seq) == ("d0b", 9)


def test_recorded_events_are_the_stream_the_result_records():
    events = recorded_events({"chunks": ["Hel", "lo"], "finish": "tool_calls", "usage": {"input_tokens": 3,
                                                                                       "output_tokens": 1},
                              "tool_calls": [{"id": "c1", "name": "read", "arguments": {"path": "x"}}]})
    assert events == [TextDelta(text="Hel"), TextDelta(text="lo"),
                      ToolCall(id="c1", name="read", arguments={"path": "x"}),
                      Usage(input_tokens=3, output_tokens=1), Finished(reason="tool_calls")]


def test_a_reusing_model_with_nothing_recorded_is_the_live_model():
    live = Counting(None)
    model = ReusingModel(live, 1, {})
    live.inner = type("Inner", (), {"stream": lambda self, request, turn, index: iter(())})()
    model.stream(None, turn=1, index=0)  # type: ignore[arg-type]
    assert live.asked == [0] and model.reused == []


def test_a_recorded_answer_that_is_no_stream_is_asked_for(env):
    """A chained record can still be crafted (its tool call no call at all): the re-run asks the model instead of
    failing the turn on it, every time it is opened."""
    lost_run(env, "c2")
    h = make_session(env, "s1", OTHER, restore=True)
    assert h.restored is not None
    recorded = recorded_calls(h.restored.unsettled, 1)
    bad = dataclasses.replace(recorded[0], result={**recorded[0].result, "tool_calls": [{"id": 7}]})
    live = Counting(h.loop.ports.model)
    model = h.loop.ports.model = ReusingModel(live, 1, {0: bad, 1: recorded[1]})
    assert trio.run(h.loop.run_turn, "go").status == "completed"
    assert model.reused == [] and live.asked == [0, 1, 2]


def test_an_open_from_a_conversation_snapshot_finds_the_unsettled_turns_answers(env):
    """A runtime opens from the snapshot of the last settled turn (the live runtime leaves one at every turn's end):
    the records after it still give the re-run its recorded answers."""
    h = make_session(env, "s1", [[call("r0", "read", path="a")], [text("a0")], *FIRST], effects=LosingEffects("c2"))
    trio.run(h.loop.run_turn, "first question")
    settled = replay(env, "s1")
    assert settled.settled_at is not None and settled.state is not None
    assert snapshot_rider.save(env, "s1", *settled.settled_at, settled.state, settled.opened or {}) is None
    with pytest.raises(Lost):
        trio.run(h.loop.run_turn, "go")
    report = trio.run(partial(replay_session, env, "s1", start=snapshots.candidates(env, "s1", 0)[0]))
    assert (report.snapshot_turns, report.verified_turns, report.boundary.reason) == (1, 0, "unsettled_turn")
    found = recorded_calls(report.unsettled, 2)
    assert sorted(found) == [0, 1] and [c["id"] for c in found[1].result["tool_calls"]] == ["c2"]


def test_a_real_provider_is_not_asked_again_and_its_call_keeps_the_id_it_gave(env, llmock_server):
    """Against an OpenAI-compatible server this project did not write (llmock), which names its tool calls itself:
    asked again, it would give the call a new id, hence a new effect id. The re-run takes the recorded answer — the
    server gets one request fewer, and the call keeps its first id all the way into the next request."""
    def openai(ports):
        config = OpenAIConfig(kind="openai", base_url=llmock_server.base_url, model="gpt-4o",
                              first_token_timeout_s=10.0, stall_timeout_s=10.0)
        ports.model = ProviderModel(OpenAIProvider(config))

    llmock_server.script({"type": "reply", "tool_calls": [{"name": "read", "arguments": {"path": "notes.txt"}}]})
    first = make_session(env, "s1", [[text("unused")]], effects=LosingEffects(None), hook=openai)
    with pytest.raises(Lost):
        trio.run(first.loop.run_turn, "what is in notes.txt?")
    [given] = rerun_calls(env)
    assert given and len(llmock_server.requests()) == 1

    llmock_server.reset()
    llmock_server.script({"type": "reply", "text": "It lists two tasks."})
    h = make_session(env, "s1", [[text("unused")]], restore=True, hook=openai)
    assert h.restored is not None
    model = h.loop.ports.model = ReusingModel(h.loop.ports.model, 1, recorded_calls(h.restored.unsettled, 1))
    outcome = trio.run(h.loop.run_turn, "what is in notes.txt?")
    assert (outcome.status, outcome.text, model.reused) == ("completed", "It lists two tasks.", [0])
    assert rerun_calls(env) == [given]  # the call the server named the first time, not a new one
    [asked] = llmock_server.requests()  # only the answer it never gave was asked for
    sent = [m for m in asked["body"]["messages"] if m.get("role") in ("assistant", "tool")]
    assert [c["id"] for c in sent[0]["tool_calls"]] == [given] and sent[1]["tool_call_id"] == given


def test_a_recorded_usage_with_unknown_fields_is_asked_for_not_a_crash(env):
    """Attack: a chained model_result whose usage dict names fields a Usage has not (well-formed for replay's shape
    check): the re-run asks the model for that call instead of failing at every open."""
    lost_run(env, "c2")
    h = make_session(env, "s1", OTHER, restore=True)
    assert h.restored is not None
    recorded = recorded_calls(h.restored.unsettled, 1)
    bad = dataclasses.replace(recorded[0], result={**recorded[0].result, "usage": {"tokens": 2 ** 70}})
    live = Counting(h.loop.ports.model)
    model = h.loop.ports.model = ReusingModel(live, 1, {0: bad, 1: recorded[1]})
    assert trio.run(h.loop.run_turn, "go").status == "completed"
    assert model.reused == [] and live.asked == [0, 1, 2]
