"""The loop with the real tools behind a minimal effect port (no grants or ledger: those are the runtime's), a
tool output over the session's cap, and a live turn deadline cancelling a model stream."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import lmdb
import pytest
import trio

from ouroactors.authorities.storage.env import StorageConfig, close_env, open_env
from ouroactors.runtime.execution import reading
from ouroactors.runtime.execution.journal import Journal
from ouroactors.runtime.execution.loop import CallContext, ParsedCall, ToolResult
from ouroactors.runtime.execution.replay import replay
from ouroactors.runtime.execution.tools import ToolContext
from ouroactors.runtime.sandbox import SandboxMode

from .loop_support import FakeEffects, call, make_session, text


@pytest.fixture
def env(tmp_path) -> Iterator[lmdb.Environment]:
    config = StorageConfig.under(tmp_path / "data")
    handle = open_env(config)
    try:
        yield handle
    finally:
        close_env(config)


class DirectTools:
    """Runs the parsed tool in ``root`` (what the runtime's port does after grants and the ledger start)."""

    def __init__(self, root: Path) -> None:
        self.root = os.path.realpath(root)

    async def run(self, call: ParsedCall, ctx: CallContext) -> ToolResult:
        tool, args = call.payload
        outcome = await tool.run(args, ToolContext(
            session_id=ctx.session, root=self.root, sandbox_mode=SandboxMode.NONE, call_id=call.call.id,
            output_cap_bytes=ctx.output_cap_bytes, timeout_s=ctx.timeout_s))
        return ToolResult(call.call.id, call.call.name, outcome.status, outcome.output, outcome.truncated,
                          outcome.error, outcome.error_kind, outcome.evidence,
                          outcome.boundary.model_dump() if outcome.boundary else None)


def test_real_tools_through_the_loop_and_replay(env, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "NOTES.md").write_text("- [ ] ship it\n")
    h = make_session(env, "s1", [
        [call("c1", "read", path="NOTES.md"), call("c2", "list", path=".")],
        [call("c3", "edit", path="NOTES.md", old="[ ]", new="[x]")],
        [text("Ticked.")],
    ], config='[sandbox]\nmode = "none"\n[tools]\nenabled = ["read", "list", "edit"]',
        hook=lambda ports: setattr(ports, "effects", DirectTools(work)))
    outcome = trio.run(h.loop.run_turn, "tick it")
    assert outcome.status == "completed" and (work / "NOTES.md").read_text() == "- [x] ship it\n"
    results = {r.fields["call_id"]: r.fields for r in reading.records(env, "s1") if r.kind == "tool_result"}
    assert results["c1"]["status"] == "ok" and "ship it" in results["c1"]["output"]
    assert results["c3"]["status"] == "ok"
    (work / "NOTES.md").write_text("changed after the fact")  # replay runs no tool: the world does not matter
    report = replay(env, "s1")
    assert report.ok and report.verified_turns == 1 and (work / "NOTES.md").read_text() == "changed after the fact"


def test_tool_output_over_the_cap_is_cut_for_the_model_and_says_so(env):
    big = "y" * 5000
    h = make_session(env, "s1", [[call("c1", "read", path="x")], [text("ok")]],
                     config='[limits]\nmax_output_bytes = 1024\n[sandbox]\nmode = "none"',
                     effects=FakeEffects(answers={"read": big}))
    trio.run(h.loop.run_turn, "go")
    said = next(m.content for m in h.loop.conversation if m.role == "tool")
    assert said.startswith("y" * 1024) and "[output truncated at 1024 bytes]" in said and len(said) < 1100
    recorded = next(r for r in reading.records(env, "s1") if r.kind == "tool_result")
    assert recorded.fields["output"]["bytes"] > 5000  # the whole output is evidence (spilled to a blob)
    assert replay(env, "s1").ok


def test_live_turn_deadline_cancels_a_slow_model_stream(env):
    h = make_session(env, "s1", [[text("a"), text("b")]], pace_ms=5000,
                     config='[limits]\nturn_deadline_s = 0.3\n[sandbox]\nmode = "none"')

    async def timed() -> tuple[str, float]:
        started = trio.current_time()
        outcome = await h.loop.run_turn("go")
        return outcome.status, trio.current_time() - started

    status, took = trio.run(timed)
    assert status == "deadline" and 0.2 < took < 2.0
    result = next(r for r in reading.records(env, "s1") if r.kind == "model_result")
    assert result.fields["error"]["kind"] == "cancelled" and "deadline" in result.fields["error"]["detail"]
    assert replay(env, "s1").ok


class RidingEffects:
    """An effect port shaped like the runtime's: a "start" and a "settle" commit per call, each carrying the
    journal's staged records in the same transaction (``Journal.put_staged``) — no commit of the journal's own."""

    def __init__(self, env: lmdb.Environment, journal: Journal) -> None:
        self.env, self.journal = env, journal

    def _commit(self, effect: str, status: bytes) -> None:
        from ouroactors.authorities.storage import commit
        from ouroactors.authorities.storage.env import db

        holder: list[object] = []

        def txn_fn(txn: lmdb.Transaction) -> None:
            txn.put(effect.encode(), status, db=db(self.env, b"ledger"))
            holder.append(self.journal.put_staged(txn))

        outcome = commit.write(self.env, txn_fn)
        self.journal.settle_staged(holder[0], outcome)  # type: ignore[arg-type]

    async def run(self, call: ParsedCall, ctx: CallContext) -> ToolResult:
        self._commit(call.call.id, b"started")  # carries model_result and tool_call
        result = ToolResult(call.call.id, call.call.name, "ok", output="done")
        ctx.record_result(result)  # staged before the settling commit, so it rides in it
        self._commit(call.call.id, b"settled")
        return result


def test_a_tool_call_costs_two_synced_commits_when_the_journal_rides_the_ledger(env, monkeypatch):
    from ouroactors.authorities.storage import commit

    commits: list[str] = []
    real = commit.write

    def counting(*args, **kwargs):
        commits.append("commit")
        return real(*args, **kwargs)

    monkeypatch.setattr(commit, "write", counting)
    h = make_session(env, "s1", [[call("c1", "read", path="x")], [text("ok")]])
    h.loop.ports.effects = RidingEffects(env, h.journal)
    h.loop.flush_before_tools = False
    commits.clear()
    trio.run(h.loop.run_turn, "go")
    # before model call 1, the effect's start and settle, before model call 2, at turn_settled
    assert len(commits) == 5
    kinds = [r.kind for r in reading.records(env, "s1")]
    assert kinds[1:] == ["turn_started", "prompt", "model_call", "model_result", "tool_call", "tool_result",
                         "model_call", "model_result", "turn_settled"]
    assert reading.verify(env, "s1").ok and replay(env, "s1").ok
