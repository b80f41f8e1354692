"""The turn loop under trio against its ports: real scripted provider, real tool catalog, real journal on LMDB,
a fake effect port. Each test also replays what it recorded through the same loop (no divergence)."""

from __future__ import annotations

import lmdb
import pytest
import trio

from ouroactors.runtime.execution import reading, steps
from ouroactors.runtime.execution.loop import CallContext, LoopRefusal, ParsedCall, Steer, ToolResult
from ouroactors.runtime.execution.model import Finished, Message, TextDelta, ToolCall
from ouroactors.runtime.execution.replay import replay

from .loop_support import FakeEffects, call, make_session, text, usage


def kinds(env: lmdb.Environment, session: str = "s1") -> list[str]:
    return [r.kind for r in reading.records(env, session)]


def assert_replays(env: lmdb.Environment, session: str = "s1", turns: int | None = None) -> None:
    report = replay(env, session)
    assert report.ok and report.boundary is None, report
    assert report.verified_turns == (turns if turns is not None else report.turns), report


def test_text_turn_completes_and_records_in_order(env):
    h = make_session(env, "s1", [[text("Hel"), text("lo"), usage(3, 2)]])
    outcome = trio.run(h.loop.run_turn, "hi")
    assert (outcome.status, outcome.text) == ("completed", "Hello")
    assert kinds(env) == ["session_opened", "turn_started", "prompt", "model_call", "model_result", "turn_settled"]
    assert h.sink.kinds() == ["turn_started", "text", "text", "turn_settled"]
    settled = reading.records(env, "s1")[-1].fields
    digest = steps.conversation_digest(h.loop.conversation)
    assert settled["conversation_digest"] == digest == outcome.conversation_digest
    assert h.loop.conversation == [Message(role="user", content="hi"), Message(role="assistant", content="Hello")]
    assert h.loop.tokens_used == 5 and reading.verify(env, "s1").ok
    assert_replays(env)


def test_parallel_tool_calls_run_concurrently_and_results_are_recorded_before_the_next_call(env):
    effects = FakeEffects(barrier=2, answers={"read": "file body", "list": "a\nb"})
    h = make_session(env, "s1", [
        [text("looking"), call("c1", "read", path="x"), call("c2", "list", path=".")],
        [text("done")],
    ], effects=effects)
    outcome = trio.run(h.loop.run_turn, "go")
    assert outcome.status == "completed" and sorted(effects.calls) == ["c1", "c2"]
    assert effects.alone == [False, False]  # run together: neither is its turn's only call
    ks = kinds(env)
    assert ks[:5] == ["session_opened", "turn_started", "prompt", "model_call", "model_result"]
    assert ks[5:7] == ["tool_call", "tool_call"] and sorted(ks[7:9]) == ["tool_result", "tool_result"]
    assert ks[9:] == ["model_call", "model_result", "turn_settled"]
    tool_msgs = [m for m in h.loop.conversation if m.role == "tool"]
    assert [(m.tool_call_id, m.content) for m in tool_msgs] == [("c1", "file body"), ("c2", "a\nb")]
    assert_replays(env)


def test_result_recorded_inside_the_effect_port_is_recorded_once(env):
    effects = FakeEffects(in_port_record=True)
    h = make_session(env, "s1", [[call("c1", "read", path="x")], [text("ok")]], effects=effects)
    trio.run(h.loop.run_turn, "go")
    assert kinds(env).count("tool_result") == 1
    assert effects.alone == [True]  # the turn's only call: the port may commit without yielding to siblings
    assert_replays(env)


def test_bad_tool_calls_are_answered_as_errors_and_nothing_runs(env):
    effects = FakeEffects()
    h = make_session(env, "s1", [
        [call("c1", "rm_rf", path="/"), call("c2", "read", paht="x"), call("c3", "shell", command="ls")],
        [text("sorry")],
    ], effects=effects)
    outcome = trio.run(h.loop.run_turn, "go")
    assert outcome.status == "completed" and effects.calls == []  # shell is not in this session's tool set
    recs = [r for r in reading.records(env, "s1") if r.kind in ("tool_call", "tool_result")]
    assert [r.fields.get("valid") for r in recs if r.kind == "tool_call"] == [False, False, False]
    errors = [r.fields for r in recs if r.kind == "tool_result"]
    assert [e["error_kind"] for e in errors] == ["unknown_tool", "bad_arguments", "unknown_tool"]
    assert "arguments.paht" in errors[1]["error"]
    assert all(m.content.startswith("error") for m in h.loop.conversation if m.role == "tool")
    # a subscriber is told why each failed, not only that it did (the journal keeps the whole result)
    published = [data for kind, _, data in h.sink.events if kind == "tool_result"]
    assert published == [{"call_id": e["call_id"], "status": "failed", "error": e["error"],
                          "error_kind": e["error_kind"]} for e in errors]
    assert_replays(env)


def test_model_error_is_recorded_and_settles_failed_without_half_applying(env):
    h = make_session(env, "s1", [[text("only one turn scripted")]])
    trio.run(h.loop.run_turn, "one")
    before = list(h.loop.conversation)
    outcome = trio.run(h.loop.run_turn, "two")  # the script has no turn left: a typed SCRIPT error
    assert outcome.status == "failed" and "script" in outcome.reason
    result = [r for r in reading.records(env, "s1") if r.kind == "model_result"][-1]
    assert result.fields["error"]["kind"] == "script"
    assert h.loop.conversation == [*before, Message(role="user", content="two")]  # no partial assistant message
    assert_replays(env)


def test_max_model_calls_limit(env):
    h = make_session(env, "s1", [[call("c1", "read", path="x")], [text("never asked")]],
                     config='[limits]\nmax_model_calls = 1\n[sandbox]\nmode = "none"')
    outcome = trio.run(h.loop.run_turn, "go")
    assert outcome.status == "limit" and "max_model_calls" in outcome.reason
    assert kinds(env).count("model_call") == 1
    assert_replays(env)


def test_max_tokens_limit_spans_turns(env):
    h = make_session(env, "s1", [[text("a"), usage(60, 50)], [text("b"), usage(1, 1)]],
                     config="[limits]\nmax_tokens = 100")
    assert trio.run(h.loop.run_turn, "1").status == "completed"
    outcome = trio.run(h.loop.run_turn, "2")
    assert outcome.status == "limit" and "max_tokens" in outcome.reason
    assert_replays(env)


def test_max_turns_refuses_before_recording(env):
    h = make_session(env, "s1", [[text("a")], [text("b")]], config="[limits]\nmax_turns = 1")
    trio.run(h.loop.run_turn, "1")
    count = len(kinds(env))
    with pytest.raises(LoopRefusal, match="max_turns"):
        trio.run(h.loop.run_turn, "2")
    assert len(kinds(env)) == count


def test_turn_deadline_decided_from_recorded_time(env):
    h = make_session(env, "s1", [[call("c1", "read", path="x")], [text("late")]],
                     config="[limits]\nturn_deadline_s = 5")
    original = h.effects.run

    async def slow(parsed, ctx):
        h.clock.jump(10)  # the clock says the tool took 10 s
        return await original(parsed, ctx)

    h.effects.run = slow  # type: ignore[method-assign]
    outcome = trio.run(h.loop.run_turn, "go")
    assert outcome.status == "deadline" and kinds(env).count("model_call") == 1
    assert_replays(env)


def test_steering_is_delivered_between_model_calls_and_recorded(env):
    h = make_session(env, "s1", [[call("c1", "read", path="x")], [text("steered")]])
    h.steering.steer(1, "also check y")
    original = h.effects.run

    async def steer_during_tool(parsed, ctx):
        h.steering.steer(1, "and z")
        return await original(parsed, ctx)

    h.effects.run = steer_during_tool  # type: ignore[method-assign]
    trio.run(h.loop.run_turn, "go")
    steers = [r.fields for r in reading.records(env, "s1") if r.kind == "steer"]
    assert steers == [{"text": "also check y", "at_call": 0}, {"text": "and z", "at_call": 1}]
    users = [m.content for m in h.loop.conversation if m.role == "user"]
    assert users == ["go", "also check y", "and z"]
    kinds = h.sink.kinds()  # each delivery is in the turn's output, before the model call it is part of
    assert kinds[:3] == ["turn_started", "steered", "tool_call"] and kinds[kinds.index("tool_result") + 1] == "steered"
    assert [d["at_call"] for k, _, d in h.sink.events if k == "steered"] == [0, 1]
    assert_replays(env)


def test_interrupt_cancels_running_tools_within_100ms(env):
    effects = FakeEffects(block=frozenset({"read"}))
    h = make_session(env, "s1", [[call("c1", "read", path="x"), call("c2", "list", path=".")], [text("x")]],
                     effects=effects)

    async def main() -> tuple[str, float]:
        async with trio.open_nursery() as nursery:
            result: list[str] = []

            async def turn() -> None:
                result.append((await h.loop.run_turn("go")).status)

            nursery.start_soon(turn)
            with trio.fail_after(5):
                while effects.started < 2 or "c2" not in effects.finished:
                    await trio.sleep(0.001)
            asked = trio.current_time()
            h.steering.interrupt(1)
            h.loop.cancel_activity()
        return result[0], trio.current_time() - asked

    status, took = trio.run(main)
    assert status == "interrupted" and took < 0.1
    results = {r.fields["call_id"]: r.fields for r in reading.records(env, "s1") if r.kind == "tool_result"}
    assert results["c1"]["status"] == "cancelled" and results["c2"]["status"] == "ok"
    assert effects.causes == ["interrupted"]  # what the port's cut-short reason in the ledger says
    assert_replays(env)
    # the interrupt that raced with the end of the turn does not end the next one
    assert h.steering.take(2, 0) == []


def test_a_lone_tool_call_is_interrupted_and_fails_as_calls_run_together_are(env):
    """One call of a model turn runs in the loop's own task (no nursery): an interrupt still cancels it within
    100 ms (recorded as cancelled, and the turn replays), and an effect port that raises ends the turn with that
    very exception."""
    effects = FakeEffects(block=frozenset({"read"}))
    h = make_session(env, "s1", [[call("c1", "read", path="x")], [text("x")]], effects=effects)

    async def main() -> tuple[str, float]:
        async with trio.open_nursery() as nursery:
            result: list[str] = []

            async def turn() -> None:
                result.append((await h.loop.run_turn("go")).status)

            nursery.start_soon(turn)
            with trio.fail_after(5):
                while effects.started < 1:
                    await trio.sleep(0.001)
            asked = trio.current_time()
            h.steering.interrupt(1)
            h.loop.cancel_activity()
        return result[0], trio.current_time() - asked

    status, took = trio.run(main)
    assert status == "interrupted" and took < 0.1
    results = [r.fields for r in reading.records(env, "s1") if r.kind == "tool_result"]
    assert [(r["call_id"], r["status"]) for r in results] == [("c1", "cancelled")]
    assert_replays(env)

    class Broken(Exception):
        pass

    async def broken(parsed: ParsedCall, ctx: CallContext) -> ToolResult:
        raise Broken("the effect path broke")

    other = make_session(env, "s2", [[call("c1", "read", path="x")], [text("x")]])
    other.effects.run = broken  # type: ignore[method-assign]
    with pytest.raises(Broken, match="the effect path broke"):
        trio.run(other.loop.run_turn, "go")


def test_interrupt_during_model_stream(env):
    h = make_session(env, "s1", [[text("a"), text("b"), text("c")]], pace_ms=2000)

    async def main() -> str:
        async with trio.open_nursery() as nursery:
            out: list[str] = []

            async def turn() -> None:
                out.append((await h.loop.run_turn("go")).status)

            nursery.start_soon(turn)
            await trio.sleep(0.05)
            h.loop.cancel_activity()
        return out[0]

    assert trio.run(main) == "interrupted"
    result = [r for r in reading.records(env, "s1") if r.kind == "model_result"][-1]
    assert result.fields["error"]["kind"] == "cancelled" and result.fields["error"]["detail"] == steps.INTERRUPTED
    assert_replays(env)



class _GarbageModel:
    def __init__(self, events):
        self.events = events

    async def stream(self, request, *, turn, index):
        for event in self.events:
            await trio.lowlevel.checkpoint()
            yield event


@pytest.mark.parametrize("events", [
    [ToolCall(id="c1", name="read", arguments={"path": 2**70}), Finished(reason="tool_calls")],
    [TextDelta(text="bad \ud800 surrogate"), Finished(reason="stop")],
    [TextDelta(text="no finish")],
], ids=["huge-int", "lone-surrogate", "no-finish"])
def test_a_garbage_stream_is_a_recorded_model_error(env, events):
    effects = FakeEffects()

    def swap(ports):
        ports.model = _GarbageModel(events)

    h = make_session(env, "s1", [[text("unused")]], effects=effects, hook=swap)
    outcome = trio.run(h.loop.run_turn, "go")
    assert outcome.status == "failed" and effects.calls == []
    result = [r for r in reading.records(env, "s1") if r.kind == "model_result"][-1]
    assert result.fields["error"]["kind"] in ("malformed", "no_finish")
    assert reading.verify(env, "s1").ok
    assert_replays(env)


def test_a_turn_whose_evidence_failed_to_commit_says_so_and_the_next_turn_records_the_gap(env):
    from ouroactors.core import faults
    from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule

    h = make_session(env, "s1", [[text("a")], [text("b")]])
    faults.arm(FaultPlan((FaultRule("storage.before_commit", FaultAction.COMMIT_REJECTED, nth=2, times=1),)))
    try:
        assert trio.run(h.loop.run_turn, "1").status == "completed"  # the effect path never hears of it
    finally:
        faults.disarm()
    assert h.sink.events[-1][2]["journal_degraded"] is True
    trio.run(h.loop.run_turn, "2")
    assert h.sink.events[-1][2]["journal_degraded"] is False
    gap = next(r for r in reading.records(env, "s1") if r.kind == "gap")
    assert gap.fields["lost_kinds"] == {"model_result": 1, "turn_settled": 1}
    report = replay(env, "s1")
    assert report.verified_turns == 0 and report.boundary is not None and report.boundary.reason == "gap"


def test_a_prompt_that_is_not_text_is_refused_before_anything_is_recorded(env):
    h = make_session(env, "s1", [[text("a")]])
    count = len(kinds(env))
    with pytest.raises(LoopRefusal, match="surrogate"):
        trio.run(h.loop.run_turn, "bad \ud800 prompt")
    assert len(kinds(env)) == count and h.loop.turns == 0 and h.loop.conversation == []
    assert trio.run(h.loop.run_turn, "good").status == "completed"


def test_a_steer_that_is_not_text_is_refused_at_the_queue_and_repaired_in_the_loop(env):
    h = make_session(env, "s1", [[text("a")]])
    with pytest.raises(LoopRefusal, match="surrogate"):
        h.steering.steer(1, "bad \udc80")
    h.steering._items.append((1, Steer("sneaked \udc80 in")))  # past the queue's check: the loop repairs it
    assert trio.run(h.loop.run_turn, "go").status == "completed"
    steer = next(r for r in reading.records(env, "s1") if r.kind == "steer")
    assert steer.fields["text"] == "sneaked \ufffd in"
    assert_replays(env)


def test_a_tool_result_that_is_not_text_does_not_crash_the_turn(env):
    effects = FakeEffects(answers={"read": "half a pair \udcff here"})
    h = make_session(env, "s1", [[call("c1", "read", path="x")], [text("ok")]], effects=effects)
    assert trio.run(h.loop.run_turn, "go").status == "completed"
    said = next(m.content for m in h.loop.conversation if m.role == "tool")
    assert said == "half a pair \ufffd here"
    recorded = next(r for r in reading.records(env, "s1") if r.kind == "tool_result")
    assert recorded.fields["output"] == "half a pair \ufffd here" and "gap" not in kinds(env)
    assert_replays(env)


def test_without_a_flush_before_the_model_the_turn_start_is_committed_before_the_model_is_called(env):
    """The live runtime's loop (flush_before_model False) commits the turn's start itself — its records, and the
    turn_started event riding in the same transaction — so a runtime lost during a long model call has it."""
    seen: list[list[str]] = []

    def hook(ports):
        model = ports.model

        class Watching:
            async def stream(self, request, *, turn, index):
                seen.append(kinds(env))  # what is durable when the model is called
                async for event in model.stream(request, turn=turn, index=index):
                    yield event

        ports.model = Watching()

    h = make_session(env, "s1", [[text("a")]], hook=hook)
    h.loop.flush_before_model = False
    assert trio.run(h.loop.run_turn, "go").status == "completed"
    assert seen[0][-2:] == ["turn_started", "prompt"]
    assert h.sink.events[0][0] == "turn_started"


def _lazy(h, grace_s: float) -> None:
    """The live runtime's settings: the journal rides in the effect port's commits, the start within a grace."""
    h.loop.flush_before_tools = h.loop.flush_before_model = False
    h.loop.start_grace_s = grace_s


def _counting_flushes(h) -> list[list[str]]:
    """Each journal commit the loop asks for, as the kinds durable before it."""
    seen: list[list[str]] = []
    port, flush = h.loop.ports.journal, h.loop.ports.journal.flush

    def counted() -> None:
        seen.append(kinds(h.journal.env))
        flush()

    port.flush = counted
    return seen


def _durable_at_tool(env, effects: FakeEffects) -> list[list[str]]:
    seen: list[list[str]] = []
    run = effects.run

    async def watched(call, ctx):
        seen.append(kinds(env))
        return await run(call, ctx)

    effects.run = watched  # type: ignore[method-assign]
    return seen


def test_with_a_start_grace_and_a_fast_model_the_turn_start_rides_in_the_first_tool_calls_commit(env):
    """No commit of its own: at the tool, nothing of the turn is durable yet (the runtime's ledger start carries
    it); the loop commits once, at the turn's end. Without the grace it commits the start first (two commits)."""
    effects = FakeEffects()
    h = make_session(env, "s1", [[call("c1", "read", path="x")], [text("ok")], [call("c2", "read", path="y")],
                                     [text("ok")]], effects=effects)
    at_tool = _durable_at_tool(env, effects)
    flushes = _counting_flushes(h)
    _lazy(h, grace_s=30.0)
    assert trio.run(h.loop.run_turn, "go").status == "completed"
    assert at_tool[0] == ["session_opened"] and len(flushes) == 1
    assert h.sink.kinds()[0] == "turn_started" and h.sink.kinds().count("turn_started") == 1
    h.loop.start_grace_s = None  # as before: the start committed before the model is called
    assert trio.run(h.loop.run_turn, "again").status == "completed"
    assert at_tool[1][-3:] == ["turn_settled", "turn_started", "prompt"] and len(flushes) == 3
    assert_replays(env)


def test_with_a_start_grace_and_a_slow_model_the_turn_start_is_committed_while_the_model_streams(env):
    """The model answers only once the turn's start is durable: the grace's end commits it, mid-call."""
    durable: list[list[str]] = []

    def hook(ports):
        model = ports.model

        class Slow:
            async def stream(self, request, *, turn, index):
                with trio.fail_after(10):  # polled: the grace's task commits while this call waits
                    while "turn_started" not in kinds(env):
                        await trio.sleep(0.005)
                durable.append(kinds(env))
                async for event in model.stream(request, turn=turn, index=index):
                    yield event

        ports.model = Slow()

    h = make_session(env, "s1", [[text("a")]], hook=hook)
    _lazy(h, grace_s=0.01)
    assert trio.run(h.loop.run_turn, "go").status == "completed"
    assert durable[0][-3:] == ["turn_started", "prompt", "model_call"]
    assert kinds(env)[-2:] == ["model_result", "turn_settled"] and h.sink.kinds()[-1] == "turn_settled"
    assert_replays(env)


def test_with_a_start_grace_an_event_pushed_on_its_own_follows_its_durable_turn_start(env):
    """A text delta is published as it streams: the turn's start is committed before it, not after."""
    h = make_session(env, "s1", [[text("Hel"), text("lo")]])
    durable_at: list[tuple[str, list[str]]] = []
    emit = h.sink.emit

    async def watched(kind, turn, data, *, rides=False):
        durable_at.append((kind, kinds(env)))
        await emit(kind, turn, data, rides=rides)

    h.sink.emit = watched  # type: ignore[method-assign]
    _lazy(h, grace_s=30.0)
    assert trio.run(h.loop.run_turn, "hi").status == "completed"
    assert durable_at[0] == ("turn_started", ["session_opened"])  # it rides: staged with its records
    assert durable_at[1][0] == "text" and durable_at[1][1][-3:] == ["turn_started", "prompt", "model_call"]
    assert_replays(env)


def test_with_a_start_grace_a_model_error_is_recorded_as_without_it(env):
    from ouroactors.runtime.execution.model import ModelError, ModelErrorKind

    def hook(ports):
        class Broken:
            async def stream(self, request, *, turn, index):
                raise ModelError(ModelErrorKind.MALFORMED, "garbage chunk")
                yield  # an async generator

        ports.model = Broken()

    h = make_session(env, "s1", [[text("a")]], hook=hook)
    _lazy(h, grace_s=30.0)
    outcome = trio.run(h.loop.run_turn, "go")
    assert outcome.status == "failed" and "garbage chunk" in outcome.reason
    assert kinds(env)[1:] == ["turn_started", "prompt", "model_call", "model_result", "turn_settled"]
    assert_replays(env)


def test_a_call_cut_short_is_told_whether_the_deadline_or_a_stop_cut_it(env):
    """The effect port writes the cause in the ledger's reason for the start it leaves ambiguous: a turn's deadline
    (its activity's scope expired) is not a runtime stopping (its trio loop cancelled from outside)."""
    config = '[sandbox]\nmode = "none"\n[tools]\nenabled = ["read"]\n[limits]\nturn_deadline_s = 0.3\n'
    effects = FakeEffects(block=frozenset({"read"}))
    h = make_session(env, "s1", [[call("c1", "read", path="x")], [text("x")]], effects=effects, config=config)
    trio.run(h.loop.run_turn, "go")
    assert effects.causes == ["turn deadline exceeded"]

    stopped = FakeEffects(block=frozenset({"read"}))
    h = make_session(env, "s2", [[call("c1", "read", path="x")], [text("x")]], effects=stopped)

    async def stop_while_it_runs() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(h.loop.run_turn, "go")
            with trio.fail_after(5):
                while stopped.started < 1:
                    await trio.sleep(0.001)
            nursery.cancel_scope.cancel()  # what the runtime's bridge does when the runtime stops

    trio.run(stop_while_it_runs)
    assert stopped.causes == ["its runtime stopped"]


@pytest.mark.usefixtures("faults_disarmed")
@pytest.mark.parametrize(("point", "landed"), [("storage.after_commit", True), ("storage.before_commit", False)])
def test_a_steer_whose_acceptance_commit_is_of_unknown_outcome_is_taken_only_if_it_landed(env, point, landed):
    """Found by ``enumerate-sessions --action commit_unknown --suspend``: the acceptance landed, the steer was refused
    ("send it again") and never delivered — a journaled promise nobody kept. Now one more flush reads the head."""
    from ouroactors.core import faults
    from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule

    h = make_session(env, "s1", [[call("c1", "read", path="x")], [text("steered")]])
    original = h.effects.run
    accepted: list[bool] = []

    async def steer_during_tool(parsed, ctx):
        faults.arm(FaultPlan((FaultRule(point, FaultAction.COMMIT_UNKNOWN, nth=1),)))
        accepted.append(h.steering.accept(h.loop, 1, "and z", "st-1"))
        faults.disarm()
        return await original(parsed, ctx)

    h.effects.run = steer_during_tool  # type: ignore[method-assign]
    trio.run(h.loop.run_turn, "go")
    records = reading.records(env, "s1")
    assert accepted == [landed]
    assert [r.fields["text"] for r in records if r.kind == "steer"] == (["and z"] if landed else [])
    assert [r.kind for r in records].count("gap") == (0 if landed else 1)  # a loss named at once, never silent


@pytest.mark.usefixtures("faults_disarmed")
def test_a_steer_whose_acceptance_stays_in_doubt_stops_the_runtime(env):
    from ouroactors.core import faults
    from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule
    from ouroactors.runtime.execution.loop_steering import SteerInDoubt

    h = make_session(env, "s1", [[text("x")]])
    journal = h.loop.ports.journal.journal
    faults.arm(FaultPlan((FaultRule("storage.after_commit", FaultAction.COMMIT_UNKNOWN, nth=1),)))

    plan, calls = journal._plan, []

    def unreadable(*args, **kwargs):  # the transaction after the first cannot read the head (a dying environment)
        calls.append(1)
        if len(calls) > 1:
            raise lmdb.Error("the head cannot be read")
        return plan(*args, **kwargs)

    journal._plan = unreadable  # type: ignore[method-assign]
    with pytest.raises(SteerInDoubt, match="unknown outcome"):  # never "not recorded": it may be journaled
        h.steering.accept(h.loop, 1, "and z", "st-1")
