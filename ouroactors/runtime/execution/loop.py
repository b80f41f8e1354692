"""The turn loop, written against ports so that a live turn and its replay run the *same* code.

One turn: ``turn_started`` → ``prompt`` → [steering delivered] → ``model_call`` (the request's canonical digest) →
the model's stream → ``model_result`` → if it asked for tools: ``tool_call`` per call (a call that does not parse is
answered with a tool error and nothing runs), the valid ones run **concurrently** in a trio nursery through the
effect port, each ``tool_result`` recorded as it arrives → the next model call … → ``turn_settled`` (status, reason,
the conversation's canonical digest). Every decision is a pure function of :mod:`.steps`. An answer whose tool calls
repeat an id (of the same answer, or of an earlier answer of the turn: ids name effects) is a ``malformed`` model
error, whatever the provider: nothing of it runs.

**Ports** (declared in :mod:`.loop_ports`; the runtime implements the live ones, :mod:`.replay` the recorded ones):

* :class:`ModelPort` ``stream(request, turn, index)`` → async iterator of :data:`~.model.ModelEvent`, or raises
  :class:`~.model.ModelError`;
* :class:`EffectPort` ``run(call, ctx)`` → :class:`ToolResult` — live: grants → ledger start → tool → settle; it
  calls ``ctx.record_result(result)`` *before* its settling commit so the ``tool_result`` record rides in that
  transaction (:meth:`~.journal.Journal.put_staged`); the loop records it itself if the port did not;
* :class:`JournalPort` ``record(kind, turn, at, fields)`` and ``flush()`` — live: stage and commit, never raising;
  replay: compare with the recording, write nothing;
* :class:`ClockPort` ``now_ns()`` — read exactly once per journal record, so replay substitutes recorded times;
* :class:`ControlPort` ``take(turn, point)`` → steer / interrupt messages delivered between model calls (``point``
  = model calls made so far in the turn); an interrupt also cancels the running activity
  (:meth:`SessionLoop.cancel_activity`) — the cancelled call or tools are recorded as such; ``leftover(turn)``
  once the turn has stopped: the steers no point took go in the conversation after its last message (``steer``
  with ``at_end``), so an answered steer always reaches the model, at the latest in the next turn;
* :class:`OutputSink` ``emit(kind, turn, data)`` — awaited, so a full output batch applies back-pressure;
* :class:`ToolCatalog` ``specs()`` and ``parse(call)`` → :class:`ParsedCall` or :class:`CallProblem`.

**Durability order.** Records are staged as they happen and committed (one flush) before each model call, before a
batch of tools runs, and when the turn settles, so nothing the loop acts on is unrecorded. An effect port that puts
the staged records into its own ledger transactions (``model_result`` and ``tool_call`` ride with
``record_started``, ``tool_result`` with ``record_settled``) passes ``flush_before_tools=False`` and a tool call then
costs the ledger's two synced commits and no more; with ``start_grace_s`` the turn's start rides in the first
of them too, when the model answers within the grace. Text deltas are shown
to the sink as they stream (display only); the conversation changes only after ``model_result`` is recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import trio

from ...core.codec import CodecError, _pack
from . import steps, timing
from .config import SessionConfig, model_name
from .loop_context import EARLY_RESULT_WAIT_S as EARLY_RESULT_WAIT_S
from .loop_context import ToolCallContext
from .loop_ports import CallContext as CallContext  # re-exported: the contract lives in loop_ports
from .loop_ports import CallProblem as CallProblem
from .loop_ports import ClockPort as ClockPort
from .loop_ports import Control as Control
from .loop_ports import ControlPort as ControlPort
from .loop_ports import EffectPort as EffectPort
from .loop_ports import Interrupt as Interrupt
from .loop_ports import JournalPort as JournalPort
from .loop_ports import LoopRefusal as LoopRefusal
from .loop_ports import LoopState as LoopState
from .loop_ports import ModelPort as ModelPort
from .loop_ports import OutputSink as OutputSink
from .loop_ports import ParsedCall as ParsedCall
from .loop_ports import Ports as Ports
from .loop_ports import Steer as Steer
from .loop_ports import ToolCatalog as ToolCatalog
from .loop_ports import ToolResult as ToolResult
from .loop_ports import TurnOutcome as TurnOutcome
from .loop_steering import TurnControl
from .model import Finished, Message, ModelError, ModelErrorKind, ModelRequest, TextDelta, ToolCall, Usage

JOURNAL_VERSION = 1


# -- the loop ------------------------------------------------------------------------------------------------


class SessionLoop(TurnControl):
    """One session's conversation and its turns. Not thread-safe: it lives in the runtime's trio loop."""

    def __init__(self, session: str, config: SessionConfig, ports: Ports, *, deadlines: bool = True,
                 flush_before_tools: bool = True, flush_before_model: bool = True,
                 start_grace_s: float | None = None) -> None:
        self.session = session
        # True: commit the model's result and the tool_call records before any tool runs. An effect port that
        # puts staged records into its ledger-start transaction (Journal.put_staged) makes this a commit saved.
        self.flush_before_tools = flush_before_tools
        # True: commit the model_call record before the model is called. False: it rides in the next commit (the
        # effect port's start, or the turn's settlement) — a call the process died in the middle of is then not in
        # the journal, but nothing was acted on from it: the ledger, not the journal, is the gate for effects.
        self.flush_before_model = flush_before_model
        # Without flush_before_model, when the turn's start (its records and its riding turn_started event) is
        # committed. None: at once, in a transaction of its own. A number: it rides in the turn's next commit — the
        # first tool call's ledger start, typically a millisecond later with a fast model — unless that does not
        # come within this many seconds of the model call (a slow model: then it is committed while the model
        # streams, so a runtime lost in a long call has it and a follower sees the turn begin) or an event is
        # pushed on its own first (a text delta: the start is committed before it). One synced commit a turn fewer.
        self.start_grace_s = start_grace_s
        self._start_unflushed = False
        self._closed_turn = 0  # the last turn that has taken its last point (a steer for it is delivered nowhere)
        self.config = config
        self.ports = ports
        self.deadlines = deadlines  # replay turns them off: recorded outcomes stand in for what timed out
        self.conversation: list[Message] = []
        self.turns = 0
        self.tokens_used = 0
        self.last_at = 0
        self._activity: trio.CancelScope | None = None
        self._interrupting = False
        self._system = Message(role="system", content=config.system_prompt) if config.system_prompt else None
        self._digests = steps.Digests()
        self.opened: dict[str, Any] | None = None  # the fields of the session_opened this loop recorded

    def state(self) -> LoopState:
        return LoopState(tuple(self.conversation), self.turns, self.tokens_used)

    def restore(self, state: LoopState) -> None:
        """Continue from ``state`` (e.g. :attr:`.replay.ReplayReport.state`: the journal's last verified turn)."""
        self.conversation = list(state.conversation)
        self.turns = state.turns
        self.tokens_used = state.tokens_used
        if state.packed is not None:
            self._digests.seed(state.conversation, state.packed)

    def encodings(self, state: LoopState) -> bytes:
        """The canonical encodings of ``state``'s conversation end to end (those of its messages this loop has
        encoded already are reused): what a conversation snapshot of it keeps."""
        return self._digests.encodings(state.conversation)

    # -- recording ------------------------------------------------------------------------------------------

    def _flush(self) -> None:
        self._start_unflushed = False  # whatever is staged, the turn's start with it, is in this commit
        self.ports.journal.flush()

    def _commit_start(self) -> None:
        if self._start_unflushed:
            self._flush()
            timing.mark("turn.committed")

    async def _emit(self, kind: str, turn: int, data: dict[str, Any], *, rides: bool = False) -> None:
        if not rides:  # pushed on its own, it must not be published before the start of its turn is durable
            self._commit_start()
        await self.ports.sink.emit(kind, turn, data, rides=rides)

    def _record(self, kind: str, turn: int | None, fields: dict[str, Any]) -> int:
        at = self.ports.clock.now_ns()
        self.last_at = max(self.last_at, at)
        self.ports.journal.record(kind, turn, at, fields)
        return at

    def open(self, *, runtime: dict[str, Any] | None = None, flush: bool = True) -> None:
        """Record ``session_opened``: everything replay needs to rebuild this loop (config, tool specs).

        ``flush=False`` leaves the record staged for the next commit of the session's journal (the runtime's: its
        first turn's start follows the open at once, see :mod:`.opening`)."""
        specs = self.ports.catalog.specs()
        self.opened = {
            "version": JOURNAL_VERSION, "session": self.session, "config": self.config.model_dump(mode="python"),
            "config_digest": self.config.digest(), "tools": [s.model_dump(mode="python") for s in specs],
            "runtime": runtime or {},
        }
        self._record("session_opened", None, self.opened)
        if flush:
            self.ports.journal.flush()

    def cut_cause(self) -> str:
        """Why the running activity is being cancelled: an interrupt (:meth:`cancel_activity`), the turn's deadline
        (the activity's scope expired), or else the runtime stopping (its trio loop cancels everything)."""
        if self._interrupting:
            return steps.INTERRUPTED
        if self._activity is not None and self._activity.cancel_called:
            return steps.DEADLINE
        return steps.STOPPED

    def cancel_activity(self) -> None:
        """Interrupt: cancel the running model call or tool batch (the runtime also queues an Interrupt)."""
        self._interrupting = True
        if self._activity is not None:
            self._activity.cancel()

    # -- one turn ---------------------------------------------------------------------------------------------

    async def run_turn(self, prompt: str) -> TurnOutcome:
        limits = self.config.limits
        problem = steps.text_problem(prompt)
        if problem is not None:
            raise LoopRefusal(f"prompt is {problem}")
        if self.turns >= limits.max_turns:
            raise LoopRefusal(f"session {self.session!r} has used its max_turns ({limits.max_turns})")
        self.turns += 1
        turn = self.turns
        self._interrupting = False
        timing.turn_begins()
        started = self._record("turn_started", turn, {"turn": turn})
        deadline_ns = started + int(limits.turn_deadline_s * 1e9)
        self._record("prompt", turn, {"text": prompt})
        self.conversation.append(Message(role="user", content=prompt))
        # The turn's start is committed by the runtime itself, its records and its event in one transaction
        # (the event rides in it: see .carried) — before, the coordinator committed the event while this turn's
        # first tool call committed its start, and the two fought for the disk. (With flush_before_model the
        # model call's flush, next, is that transaction.)
        await self._emit("turn_started", turn, {"prompt": prompt}, rides=True)
        timing.mark("turn.staged")
        if not self.flush_before_model:
            self._start_unflushed = True
            if self.start_grace_s is None:
                self._commit_start()
        calls, text = 0, ""
        used_ids: set[str] = set()  # the effect keys of the turn's calls so far (steps.effect_key)
        stop: steps.Stop | None = None
        answered: steps.Stop | None = None  # the model's last answer had no tool call: done, unless a steer came
        while stop is None:
            stop, steered = self._deliver_control(turn, calls, last=answered is not None)
            for fields in steered:  # a follower sees where the steer took effect (the turn's output, not evidence)
                await self._emit("steered", turn, fields)
            if answered is not None and stop is None and not steered:
                stop = answered
                break
            answered = None  # a steer that came while the model answered is answered too: one more model call
            stop = stop or steps.before_model_call(
                limits, calls_made=calls, tokens_used=self.tokens_used, now_ns=self.last_at, deadline_ns=deadline_ns)
            if stop is not None:
                break
            request = steps.build_request(model_name(self.config.model), self._system, self.conversation,
                                          self.ports.catalog.specs(), limits.max_output_tokens)
            self._record("model_call", turn, {"index": calls, "request_digest": self._digests.request(request),
                                              "messages": len(request.messages)})
            if self.flush_before_model:
                self._flush()
            try:
                timing.mark("model.begin")
                chunks, tool_calls, usage, finish = await self._stream_in_grace(request, turn, calls, deadline_ns)
                timing.mark("model.end")
                # any provider's: checked here, not by each (ids as the ledger keys them: effects.effect_id_of)
                repeated = steps.repeated_call_id(tool_calls, used_ids, f"{self.session}/t{turn}/")
                if repeated is not None:
                    raise ModelError(ModelErrorKind.MALFORMED, repeated)
            except ModelError as exc:
                error = {"kind": exc.kind.value, "detail": exc.detail, "status": exc.status, "attempts": exc.attempts}
                self._record("model_result", turn, {"index": calls, "error": error})
                stop = steps.on_model_error(exc.kind.value, exc.detail)
                break
            text = "".join(chunks)
            self._record("model_result", turn, {
                "index": calls, "chunks": chunks, "tool_calls": [c.model_dump(mode="python") for c in tool_calls],
                "usage": usage, "finish": finish})
            calls += 1
            used_ids.update(steps.effect_key(f"{self.session}/t{turn}/", c.id) for c in tool_calls)
            self.tokens_used += steps.usage_tokens(usage)
            self.conversation.append(steps.assistant_message(text, tool_calls))
            stop = steps.after_model(len(tool_calls), finish)
            if stop is not None:  # the turn ends at the next point, unless a steer is delivered there
                answered, stop = stop, None
            else:
                results = await self._run_tools(turn, tool_calls, deadline_ns)
                cap = limits.max_output_bytes
                for r in results:
                    said = steps.tool_text(r.status, r.output, r.truncated, cap, r.error, r.error_kind)
                    self.conversation.append(steps.tool_message(r.call_id, r.name, said))
                stop = steps.after_tools([(r.status, r.error) for r in results])
        self._closed_turn = turn  # no point is left to deliver a steer at: receive_steer refuses one from here
        # A steer accepted and taken at no point (the turn stopped on a model error, a tool's stop, an interrupt
        # during a call) still goes in the conversation, after the turn's last message: the user was told it was
        # taken, and the next turn's first request carries it.
        await self._deliver_leftover(turn, calls)
        timing.mark("turn.settling")
        digest = self._digests.conversation(self.conversation)
        self._digests.forget([self._system, self.ports.catalog.specs(), *self.conversation])
        settled: dict[str, Any] = {"status": stop.status, "reason": stop.reason}
        left = self.ports.control.undelivered(turn)  # 0 since leftovers are delivered; an older journal's count
        if left:
            settled["undelivered_steers"] = left
        self._record("turn_settled", turn, {**settled, "model_calls": calls, "tokens_used": self.tokens_used,
                                            "conversation_digest": digest})
        self._flush()
        timing.mark("turn.flushed")
        degraded = bool(getattr(self.ports.journal, "degraded", False))  # evidence of this turn is incomplete
        await self._emit("turn_settled", turn, {**settled, "journal_degraded": degraded})
        return TurnOutcome(turn, stop.status, stop.reason, text, digest)

    def _scope(self, deadline_ns: int, limit_s: float) -> trio.CancelScope:
        if not self.deadlines:
            return trio.CancelScope()
        remaining = min((deadline_ns - self.last_at) / 1e9, limit_s)
        return trio.CancelScope(deadline=trio.current_time() + max(remaining, 0.0))

    async def _stream_in_grace(self, request: ModelRequest, turn: int, index: int, deadline_ns: int
                               ) -> tuple[list[str], list[ToolCall], dict[str, int] | None, str]:
        """:meth:`_stream`, committing the turn's start if the model is still streaming when the grace is over."""
        grace = self.start_grace_s
        if not self._start_unflushed or grace is None:
            return await self._stream(request, turn, index, deadline_ns)

        async def commit_when_over() -> None:
            await trio.sleep(grace)
            self._commit_start()  # synchronous: no record is staged half-way in between

        failed: ModelError | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(commit_when_over)
            try:
                streamed = await self._stream(request, turn, index, deadline_ns)
            except ModelError as exc:  # raised past the nursery, not inside an exception group
                failed = exc
            finally:
                nursery.cancel_scope.cancel()
        if failed is not None:
            raise failed
        return streamed

    async def _stream(self, request: ModelRequest, turn: int, index: int, deadline_ns: int
                      ) -> tuple[list[str], list[ToolCall], dict[str, int] | None, str]:
        chunks: list[str] = []
        calls: list[ToolCall] = []
        usage: dict[str, int] | None = None
        finish: str | None = None
        with self._scope(deadline_ns, self.config.limits.model_deadline_s) as scope:
            self._activity = scope
            try:
                async for event in self.ports.model.stream(request, turn=turn, index=index):
                    if isinstance(event, TextDelta):
                        chunks.append(event.text)
                        await self._emit("text", turn, {"text": event.text})
                    elif isinstance(event, ToolCall):
                        calls.append(event)
                    elif isinstance(event, Usage):
                        usage = {"input_tokens": event.input_tokens, "output_tokens": event.output_tokens}
                    elif isinstance(event, Finished):
                        finish = event.reason
                    else:
                        raise ModelError(ModelErrorKind.MALFORMED, f"unexpected stream event {type(event).__name__}")
            finally:
                self._activity = None
        if scope.cancelled_caught:
            raise ModelError(ModelErrorKind.CANCELLED, steps.INTERRUPTED if self._interrupting else steps.DEADLINE)
        if finish is None:
            raise ModelError(ModelErrorKind.NO_FINISH, "the stream ended without a finish event")
        try:  # what cannot be journaled canonically (a lone surrogate, a 65-bit int) is garbage, not a turn
            _pack([chunks, calls], "model stream")
        except CodecError as exc:
            raise ModelError(ModelErrorKind.MALFORMED, str(exc)) from None
        return chunks, calls, usage, finish

    async def _run_tools(self, turn: int, calls: Sequence[ToolCall], deadline_ns: int) -> list[ToolResult]:
        contexts: list[ToolCallContext] = []
        runnable: list[tuple[ToolCallContext, ParsedCall]] = []
        for call in calls:
            ctx = ToolCallContext(self, turn, call)
            contexts.append(ctx)
            parsed = self.ports.catalog.parse(call)
            if isinstance(parsed, CallProblem):
                self._record("tool_call", turn, {"call_id": call.id, "name": call.name, "arguments": call.arguments,
                                                 "valid": False, "error": parsed.message,
                                                 "error_kind": parsed.kind})
                ctx.record_result(ToolResult(call.id, call.name, "failed", error=parsed.message,
                                             error_kind=parsed.kind))
            else:
                self._record("tool_call", turn, {"call_id": call.id, "name": call.name, "arguments": call.arguments,
                                                 "valid": True})
                runnable.append((ctx, parsed))
            # a valid call's start (or denial) is recorded next: a commit that may carry this event (.carried)
            await self._emit("tool_call", turn, {"call_id": call.id, "name": call.name, "arguments": call.arguments},
                             rides=not isinstance(parsed, CallProblem))
        if runnable and self.flush_before_tools:
            self._flush()
        elif runnable:  # the first commit of a call that runs (its start, its denial) carries the turn's start
            self._start_unflushed = False
        if len(runnable) == 1:
            runnable[0][0].alone = True
        if len(contexts) == 1:
            contexts[0].only = True
        if runnable:
            with self._scope(deadline_ns, float("inf")) as scope:
                self._activity = scope
                try:
                    if len(runnable) == 1:  # a lone call runs in this task: a nursery is for calls run together
                        await self._one_tool(*runnable[0])
                    else:
                        async with trio.open_nursery() as nursery:
                            for ctx, parsed in runnable:
                                nursery.start_soon(self._one_tool, ctx, parsed)
                finally:
                    self._activity = None
            cause = steps.INTERRUPTED if self._interrupting else steps.DEADLINE
            for ctx, _ in runnable:  # what the cancellation cut short is recorded as cancelled, never as failed
                ctx.record_result(ToolResult(ctx.call.id, ctx.call.name, "cancelled", error=cause,
                                             error_kind="cancelled"))
        results = [ctx.result for ctx in contexts]
        for ctx, r in zip(contexts, results, strict=True):
            assert r is not None
            if not ctx.result_emitted:
                await self._emit("tool_result", turn, r.event())
        return [r for r in results if r is not None]

    async def _one_tool(self, ctx: ToolCallContext, parsed: ParsedCall) -> None:
        result = await self.ports.effects.run(parsed, ctx)
        ctx.record_result(result)
