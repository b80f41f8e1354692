"""The live effect port in this process, on a real LMDB data dir: what a call's tool sees, and what is refused.

The port validates what every call of a session shares once (the tool context's session, root, sandbox and caps)
and copies it with each call's ids; these tests hold it to what validating every call gave: the same context,
the root still checked on every call (a root swapped for a link since is refused, and nothing is started), an
over-long call id refused as before. A decided, started and settled call is recorded as the ledger and the
journal always recorded it.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import trio
from pydantic import ValidationError

from benchmarks.bench_effect_path import prepared
from ouroactors.authorities.ledger.domain import Status
from ouroactors.authorities.storage.env import close_env
from ouroactors.runtime import sandbox
from ouroactors.runtime.execution import reading
from ouroactors.runtime.execution.effects import _boundary_fields
from ouroactors.runtime.execution.loop import ParsedCall, ToolResult
from ouroactors.runtime.execution.model import ToolCall
from ouroactors.runtime.execution.tools import BoundaryRecord, ToolContext, ToolOutcome
from ouroactors.runtime.execution.tools.shell import ShellTool

AUTHORITY = {"storage": 3, "ledger": 5, "grants": 7}


class SeeingShell(ShellTool):
    """The shell tool's declaration, with a run that only keeps the context it was given."""

    def __init__(self) -> None:
        self.seen: list[ToolContext] = []

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutcome:
        self.seen.append(ctx)
        return ToolOutcome(status="ok", evidence={"ran": True})


class Ctx:
    """The loop's side of one call (:class:`~ouroactors.runtime.execution.loop.CallContext`)."""

    session = "s1"
    turn = 1
    output_cap_bytes = 4096
    timeout_s = 30.0

    def __init__(self, call: ToolCall) -> None:
        self.call = call
        self.results: list[ToolResult] = []

    def record_result(self, result: ToolResult) -> None:
        self.results.append(result)

    def record_approval(self, fields: dict[str, Any]) -> None:
        pass

    async def emit(self, kind: str, data: dict[str, Any]) -> None:
        pass

    async def result_ready(self) -> None:
        pass

    def cancel_cause(self) -> str:
        return "interrupted"


@pytest.fixture
def port(tmp_path: Path) -> Any:
    root = tmp_path / "ws"
    root.mkdir()
    ready = prepared(tmp_path / "data", root, session="s1", authority=AUTHORITY, watch=False)
    try:
        yield ready.effects, ready.store, ready.journal.env, root.resolve()
    finally:
        close_env(ready.config)


def _call(tool: SeeingShell, call_id: str) -> tuple[ParsedCall, Ctx]:
    call = ToolCall(id=call_id, name="shell", arguments={"command": "true"})
    return ParsedCall(call, (tool, tool.Args.model_validate(call.arguments))), Ctx(call)


def test_each_call_sees_the_context_validating_it_would_give(port):
    effects, store, env, root = port
    tool = SeeingShell()
    for call_id in ("c1", "c2"):
        parsed, ctx = _call(tool, call_id)
        result = trio.run(effects.run, parsed, ctx)
        assert result.status == "ok" and ctx.results == [result]
    for seen, call_id in zip(tool.seen, ("c1", "c2"), strict=True):
        assert seen == ToolContext(session_id="s1", root=str(root), sandbox_mode=sandbox.SandboxMode.NONE,
                                   data_dir=effects.settings.data_dir, output_cap_bytes=4096, timeout_s=30.0,
                                   call_id=call_id, effect_id=f"s1/t1/{call_id}", idempotency_key=f"s1/t1/{call_id}")
        entry = store.get(f"s1/t1/{call_id}")
        assert entry is not None and entry.status is Status.OK and entry.authority == AUTHORITY
        assert entry.grant is not None and entry.grant.startswith("permission-")  # the decision, recorded with it
    assert reading.verify(env, "s1").ok


def test_a_root_swapped_for_a_link_is_refused_at_the_next_call_and_nothing_starts(port, tmp_path):
    effects, store, _env, root = port
    tool = SeeingShell()
    parsed, ctx = _call(tool, "c1")
    trio.run(effects.run, parsed, ctx)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root.rename(tmp_path / "moved")
    root.symlink_to(elsewhere)
    parsed, ctx = _call(tool, "c2")
    with pytest.raises(ValidationError, match="not canonical"):
        trio.run(effects.run, parsed, ctx)
    assert store.get("s1/t1/c2") is None and len(tool.seen) == 1


def test_a_call_id_too_long_for_the_context_is_refused_as_before(port):
    effects = port[0]
    tool = SeeingShell()
    parsed, ctx = _call(tool, "c" * 201)
    with pytest.raises(ValidationError, match="call_id"):
        trio.run(effects.run, parsed, ctx)
    assert tool.seen == []


def test_a_boundary_becomes_the_fields_its_dump_gives(tmp_path):
    boundary = sandbox.plan(["/bin/true"], mode=sandbox.SandboxMode.NONE, workspace=str(tmp_path)).boundary
    record = BoundaryRecord.of(boundary)
    assert _boundary_fields(record) == record.model_dump(mode="python")
    assert list(_boundary_fields(record) or {}) == list(record.model_dump(mode="python"))
    assert _boundary_fields(None) is None


class ThreadSeeingLedger:
    """The real writer, noting the thread each call of the effect path ran on."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer
        self.threads: list[tuple[str, int]] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.writer, name)

        def noted(*args: Any, **kwargs: Any) -> Any:
            self.threads.append((name, threading.get_ident()))
            return method(*args, **kwargs)

        return noted


def test_a_lone_call_commits_on_the_loops_thread_and_a_batch_in_worker_threads(port):
    """The lone call of a model turn (``ctx.alone``) records its start and settlement inline; calls run together go
    through worker threads (where the writer shares their commits), each recorded as always. (A settlement of a batch
    may still be inline: once its sibling has returned, the call is alone.)"""
    effects, store, env, _root = port
    effects.ledger = ThreadSeeingLedger(effects.ledger)
    tool = SeeingShell()
    parsed, ctx = _call(tool, "lone")
    ctx.alone = True  # type: ignore[attr-defined]
    loop_thread = threading.get_ident()
    assert trio.run(effects.run, parsed, ctx).status == "ok"
    assert effects.ledger.threads == [("submit", loop_thread), ("record_settled", loop_thread)]
    effects.ledger.threads.clear()

    async def batch() -> None:
        async with trio.open_nursery() as nursery:
            for call_id in ("b1", "b2"):
                nursery.start_soon(effects.run, *_call(tool, call_id))

    trio.run(batch)
    starts = [thread for name, thread in effects.ledger.threads if name == "submit"]
    assert len(starts) == 2 and loop_thread not in starts
    for call_id in ("lone", "b1", "b2"):
        entry = store.get(f"s1/t1/{call_id}")
        assert entry is not None and entry.status is Status.OK
    assert reading.verify(env, "s1").ok


class RemoteAsk:
    """A grants authority deciding remotely (no inline decision, hence no permission record to commit): it asks, and
    its approval wait notes what the journal holds durably when it is asked."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.durable_at_ask: list[str] = []

    async def decide(self, request: Any, root: str | None) -> Any:
        from ouroactors.authorities.grants.rules import Decision, Verdict

        return Verdict(Decision.ASK, "no rule: ask")

    async def approve(self, session: str, tool: str, arguments: dict[str, Any], call_id: str) -> tuple[bool, str]:
        self.durable_at_ask = [r.kind for r in reading.records(self.env, session)]
        return True, "approval approval-0123456789ab approved by op"


def test_an_ask_that_records_nothing_still_commits_the_models_answer_before_the_wait(port):
    """The wait may outlive the runtime (the coordinator closes it and a new one re-runs the turn): the answer that
    asked is durable first, so the re-run takes it from the journal instead of asking the model (.reuse)."""
    effects, store, env, _root = port
    effects.inline = None
    effects.grants = grants = RemoteAsk(env)
    tool = SeeingShell()
    parsed, ctx = _call(tool, "asked")
    effects.journal.stage("model_result", {"index": 0, "chunks": [], "finish": "tool_calls", "usage": None,
                                           "tool_calls": [parsed.call.model_dump(mode="python")]}, turn=1, at=1)
    effects.journal.stage("tool_call", {"call_id": "asked", "name": "shell", "arguments": parsed.call.arguments},
                          turn=1, at=2)
    assert trio.run(effects.run, parsed, ctx).status == "ok"
    assert grants.durable_at_ask == ["model_result", "tool_call"]
    entry = store.get("s1/t1/asked")
    assert entry.status is Status.OK
    assert entry.grant is not None and entry.grant.endswith("; approval approval-0123456789ab approved by op")


class HangingShell(SeeingShell):
    async def run(self, args: Any, ctx: ToolContext) -> ToolOutcome:
        await trio.sleep_forever()
        raise AssertionError("unreachable")


def test_a_call_a_cancel_cuts_short_is_ambiguous_at_once_saying_why(port):
    """Started, then cancelled while its tool ran: never settled as failed (it may have acted), and marked
    ambiguous by the port itself with the cause the loop gives — not left started for the writer's exit to mark
    with a reason that says only that the writer went."""
    effects, store, _env, _root = port
    parsed, ctx = _call(HangingShell(), "hang")
    ctx.cancel_cause = lambda: "turn deadline exceeded"  # type: ignore[method-assign]

    async def cut() -> None:
        with trio.move_on_after(0.3):
            await effects.run(parsed, ctx)

    trio.run(cut)
    entry = store.get("s1/t1/hang")
    assert entry is not None and entry.status is Status.AMBIGUOUS and entry.settled_by is None
    assert entry.reason == ("cancelled while it ran (turn deadline exceeded): the tool was stopped, and what it did "
                            "before that is unknown")
    assert ctx.results == []  # the loop records the cancelled result itself


class UnsureShell(ShellTool):
    """The shell tool's declaration, with a run that cannot tell whether it acted (a request sent, no reply)."""

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutcome:
        return ToolOutcome(status="unknown", error="ReadTimeout: no reply within 3s", error_kind="timeout",
                           evidence={"ran": "unknown"})


def test_an_unknown_outcome_is_ambiguous_at_once_with_the_tools_own_reason(port):
    """Not left started until the writer's process exits, whose mark said only "exited before settlement": the
    ledger keeps what the tool said (a timeout), for the reconciler and for `ouroactors ledger show`."""
    effects, store, _env, _root = port
    parsed, ctx = _call(UnsureShell(), "u1")
    result = trio.run(effects.run, parsed, ctx)
    assert result.status == "unknown"
    entry = store.get("s1/t1/u1")
    assert entry is not None and entry.status is Status.AMBIGUOUS
    assert entry.reason == "the tool could not tell whether it acted: ReadTimeout: no reply within 3s"
