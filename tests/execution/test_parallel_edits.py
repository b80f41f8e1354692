"""Parallel ``edit`` and ``write`` calls of one model turn on one file: every ``ok`` change is in the file.

The calls of a model turn run concurrently (a trio nursery). Before the per-path lock (tools/_serial.py), two
edits that both read the file before either renamed its result each reported ``ok`` while the second rename dropped
the first change (and the ledger recorded intents whose "after" content never existed). Real files on disk, the
real tools; the loop test runs the real loop, the real live effect port, the real ledger and grants on LMDB.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from benchmarks.bench_effect_path import prepared
from ouroactors.authorities.ledger.domain import INTENT, Status
from ouroactors.authorities.storage.env import close_env
from ouroactors.runtime.execution import reading
from ouroactors.runtime.execution.config import parse_session_config
from ouroactors.runtime.execution.loop import Ports, SessionLoop
from ouroactors.runtime.execution.model import ToolCall
from ouroactors.runtime.execution.ports import JournalWriter, ProviderModel, SteeringQueue, ToolsCatalog
from ouroactors.runtime.execution.providers import ScriptedProvider, parse_script
from ouroactors.runtime.execution.tools import ToolOutcome, parse_call
from ouroactors.runtime.execution.tools._serial import PathBusy, serialised

from .loop_support import ListSink, StepClock, call, text
from .tools_support import context, lease

AUTHORITY = {"storage": 3, "ledger": 5, "grants": 7}
LINES = [f"line {i:02d} of the file" for i in range(20)]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def _together(ctx: Any, calls: list[dict[str, Any]]) -> list[ToolOutcome]:
    """Run the calls as the loop runs a model turn's calls: each started in one nursery, all at once."""
    outcomes: list[ToolOutcome | None] = [None] * len(calls)

    async def one(i: int, name: str, arguments: dict[str, Any]) -> None:
        tool, args = parse_call(ToolCall(id=f"c{i}", name=name, arguments=arguments))
        tool.grant_request(args, ctx)
        outcomes[i] = await tool.run(args, ctx)

    async with trio.open_nursery() as nursery:
        for i, spec in enumerate(calls):
            nursery.start_soon(one, i, spec["name"], spec["arguments"])
    return [o for o in outcomes if o is not None]


@pytest.mark.parametrize("attempt", range(5))
def test_two_parallel_edits_of_one_file_both_land(tmp_path: Path, attempt: int) -> None:
    root, _ = lease(tmp_path)
    Path(root, "two.txt").write_text("alpha\nbeta\n")
    outcomes = trio.run(_together, context(root), [
        {"name": "edit", "arguments": {"path": "two.txt", "old": "alpha", "new": "ALPHA"}},
        {"name": "edit", "arguments": {"path": "two.txt", "old": "beta", "new": "BETA"}}])
    assert [o.status for o in outcomes] == ["ok", "ok"], outcomes
    assert Path(root, "two.txt").read_text() == "ALPHA\nBETA\n"


def test_twenty_parallel_edits_of_distinct_lines_all_ok_and_all_in_the_file(tmp_path: Path) -> None:
    root, _ = lease(tmp_path)
    Path(root, "many.txt").write_text("\n".join(LINES) + "\n")
    outcomes = trio.run(_together, context(root), [
        {"name": "edit", "arguments": {"path": "many.txt", "old": line, "new": line.upper()}} for line in LINES])
    assert [o.status for o in outcomes] == ["ok"] * len(LINES), [o.error for o in outcomes if o.status != "ok"]
    assert Path(root, "many.txt").read_text() == "\n".join(line.upper() for line in LINES) + "\n"
    # each ok edit's evidence chains onto another's: one order in which they ran, from the first content to the last
    befores = {o.evidence["sha256_before"] for o in outcomes}
    afters = {o.evidence["sha256"] for o in outcomes}
    assert len(befores) == len(afters) == len(LINES)
    assert befores - afters == {_sha(("\n".join(LINES) + "\n").encode())}
    assert afters - befores == {_sha(Path(root, "many.txt").read_bytes())}


def test_two_spellings_of_one_file_share_its_lock(tmp_path: Path) -> None:
    """The lock is keyed by the resolved path: an edit through a symlink and one by the real name are ordered."""
    root, _ = lease(tmp_path)
    Path(root, "real.txt").write_text("\n".join(LINES) + "\n")
    os.symlink("real.txt", os.path.join(root, "alias.txt"))
    outcomes = trio.run(_together, context(root), [
        {"name": "edit", "arguments": {"path": "alias.txt" if i % 2 else "./real.txt", "old": line,
                                       "new": line.upper()}} for i, line in enumerate(LINES)])
    assert [o.status for o in outcomes] == ["ok"] * len(LINES)
    assert Path(root, "real.txt").read_text() == "\n".join(line.upper() for line in LINES) + "\n"


def test_calls_on_other_files_do_not_wait_for_the_lock_of_one() -> None:
    """Only one file's calls are ordered: a call on another file does not wait for a lock it does not need."""

    async def main() -> list[str]:
        order: list[str] = []
        other_done = trio.Event()

        async def hold() -> None:
            async with serialised(["/x/a"]):
                order.append("a held")
                with trio.fail_after(5):
                    await other_done.wait()  # held until the call on b has run: b never waits for a
                order.append("a released")

        async def other() -> None:
            async with serialised(["/x/b"]):
                order.append("b held")
            other_done.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(hold)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(other)
        return order

    assert trio.run(main) == ["a held", "b held", "a released"]


def test_a_task_holding_one_path_never_waits_for_another() -> None:
    """Re-entrant for its own path; for a different path held by another task: PathBusy at once (no deadlock)."""

    async def main() -> list[str]:
        seen: list[str] = []
        release = trio.Event()

        async def other() -> None:
            async with serialised(["/x/b"]):
                await release.wait()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(other)
            await trio.testing.wait_all_tasks_blocked()
            async with serialised(["/x/a"]):
                async with serialised(["/x/a"]):
                    seen.append("a again")
                with pytest.raises(PathBusy):
                    async with serialised(["/x/b"]):
                        seen.append("never")
            release.set()
        return seen

    assert trio.run(main) == ["a again"]


def test_parallel_edits_through_the_loop_and_the_live_effect_port(tmp_path: Path) -> None:
    """One model turn asks for 20 edits of one file and a write of another: the real loop runs them concurrently
    through the live effect port (grants, ledger start, tool, settlement). Every call is ``ok``, every change is in
    the file, and the ledger's intents chain: each start's digest "before" is the original content or another's
    "after", and the last "after" is the file as it is."""
    work = tmp_path / "ws"
    work.mkdir()
    original = ("\n".join(LINES) + "\n").encode()
    (work / "many.txt").write_bytes(original)
    ready = prepared(tmp_path / "data", work, session="s1", authority=AUTHORITY,
                     rules=("allow:Edit(**)", "allow:Write(**)"), watch=False)
    try:
        config = parse_session_config('[sandbox]\nmode = "none"\n[tools]\nenabled = ["edit", "write"]')
        edits = [call(f"e{i}", "edit", path="many.txt", old=line, new=line.upper()) for i, line in enumerate(LINES)]
        script = parse_script({"turns": [{"events": [*edits, call("w", "write", path="other.txt", content="x")]},
                                         {"events": [text("done")]}]})
        ports = Ports(model=ProviderModel(ScriptedProvider(script)), effects=ready.effects,
                      journal=JournalWriter(ready.journal), clock=StepClock(), control=SteeringQueue(),
                      sink=ListSink(), catalog=ToolsCatalog(config.tools.enabled))
        loop = SessionLoop("s1", config, ports, flush_before_tools=False)
        loop.open()
        outcome = trio.run(loop.run_turn, "upper-case every line")
        assert outcome.status == "completed", outcome
        results = {r.fields["call_id"]: r.fields for r in reading.records(ready.journal.env, "s1")
                   if r.kind == "tool_result"}
        assert {cid: f["status"] for cid, f in results.items()} == {**{f"e{i}": "ok" for i in range(20)}, "w": "ok"}
        final = (work / "many.txt").read_bytes()
        assert final == ("\n".join(line.upper() for line in LINES) + "\n").encode()
        intents = []
        for i in range(20):
            entry = ready.store.get(f"s1/t1/e{i}")
            assert entry is not None and entry.status is Status.OK
            intents.append(entry.evidence[INTENT])
        befores, afters = {i["before"] for i in intents}, {i["after"] for i in intents}
        assert len(befores) == len(afters) == 20  # no two starts claimed the same content before them
        assert befores - afters == {_sha(original)}
        assert afters - befores == {_sha(final)}
        assert reading.verify(ready.journal.env, "s1").ok
    finally:
        close_env(ready.config)
