"""A tool call's :class:`~.loop_ports.CallContext` in a live or replayed turn: what the effect port may do through
the loop (record the call's result and approvals, emit its events) without holding the loop itself."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import trio

from . import steps
from .loop_ports import ToolResult
from .model import ToolCall

if TYPE_CHECKING:
    from .loop import SessionLoop

EARLY_RESULT_WAIT_S = 0.5  # how long a lone call's early tool_result may wait for room in the output buffer


class ToolCallContext:
    """The :class:`CallContext` of one tool call: records its result (once) and approvals through the loop.

    ``alone``: the only call of its model turn that runs (in the loop's own task, no nursery) — no sibling call can
    be on its way into the effect port, which then need not yield to let one in before a ledger commit.
    """

    alone = False
    only = False  # the one call its model turn asked for (valid or not): its result event may go out early
    result_emitted = False  # the tool_result event went out already (result_ready)

    def __init__(self, loop: SessionLoop, turn: int, call: ToolCall) -> None:
        self.session = loop.session
        self.turn = turn
        self.call = call
        self.output_cap_bytes = loop.config.limits.max_output_bytes
        self.timeout_s = loop.config.limits.tool_deadline_s
        self._loop = loop
        self.result: ToolResult | None = None

    def record_result(self, result: ToolResult) -> None:
        if self.result is None:
            if steps.text_problem(result.output) or (result.error and steps.text_problem(result.error)):
                result = replace(result, output=steps.repaired(result.output),
                                 error=steps.repaired(result.error) if result.error else None)
            self.result = result
            self._loop._record("tool_result", self.turn, result.fields())

    def record_approval(self, fields: dict[str, Any]) -> None:
        self._loop._record("approval", self.turn, {"call_id": self.call.id, **fields})

    async def emit(self, kind: str, data: dict[str, Any]) -> None:
        await self._loop._emit(kind, self.turn, {"call_id": self.call.id, **data})

    def cancel_cause(self) -> str:
        return self._loop.cut_cause()

    async def result_ready(self) -> None:
        """The effect port recorded the result and commits its settlement next. The ``tool_result`` of the one call
        of its model turn is emitted now, to ride in that commit (see :mod:`.carried`): the order is the same as at
        the batch's end, as nothing else of the turn happens in between (replay, which emits it there, derives the
        same events). Calls asked together keep theirs for the end, in call order."""
        if not self.only or self.result is None or self.result_emitted:
            return
        # Shielded, so an interrupt cannot land between the tool's end and its settlement; bounded, so a full
        # buffer cannot hold the settlement back: then the event waits for the batch's end, as before.
        with trio.move_on_after(EARLY_RESULT_WAIT_S) as scope:
            scope.shield = True
            await self._loop.ports.sink.emit("tool_result", self.turn, self.result.event(), rides=True)
            self.result_emitted = True


__all__ = ["EARLY_RESULT_WAIT_S", "ToolCallContext"]
