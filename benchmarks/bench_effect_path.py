"""The effect path of one tool call in one process, split into its CPU and its synced commits.

    python -m benchmarks.bench_effect_path [--quick] [--json FILE] [--parts]

``bench_runtime`` measures a tool call inside a live runtime (an actor process with a turn thread, an actor thread
and a reader); what it finds there mixes the path's own cost with the system's. This benchmark runs the *same*
path — :class:`~ouroactors.runtime.execution.effects.LiveEffects` with the inline grants decision, a watched
:class:`~ouroactors.authorities.ledger.direct.LedgerWriter` and the session's journal riding in its start and
settle transactions — alone in this process, on a real LMDB data dir (synced), with the records a model turn
stages around it (``model_result``, ``tool_call`` before the start, ``tool_result`` before the settlement), in one
trio run. Each sample is followed by the baseline's sample: two raw synced LMDB put commits of 300 bytes in an
environment of their own on the same filesystem, so both see the same moments of a shared disk.

Rows:

* **the path with a tool that does nothing** (``shell`` whose run returns at once): wall time, vs the two raw
  commits — what the path costs beyond the physical floor of two durable records;
* **its CPU**: the same samples' thread CPU time (``time.thread_time``: user and system time of this thread, so
  the commits' page writes count, their waits for the disk do not), vs the raw commits' — the part of the excess
  that is Python and LMDB work rather than I/O;
* **the path with the real tool** (``true`` through ``sandbox`` mode ``none``), vs the bare tool plus the two raw
  commits: issue 13's per-tool-call goal (≤ 1.5×) without the runtime's process around it. The gap between this
  row and ``bench_runtime``'s is what the live runtime adds (its threads, the loop, the model call, the reader).

``--parts`` adds one more pass of no-op calls with the path's functions timed (:mod:`._effect_parts`): a row per
part, its mean per call (nested parts included in their callers'), and ``txn.commit()`` per commit against a raw
put's commit timed the same way.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lmdb
import trio

from ouroactors.authorities.grants.inline import InlineGrants
from ouroactors.authorities.ledger.direct import LedgerWriter
from ouroactors.authorities.ledger.store import LedgerStore
from ouroactors.authorities.storage.env import (
    StorageConfig,
    close_env,
    open_env,
)
from ouroactors.runtime import sandbox
from ouroactors.runtime.execution.effects import EffectSettings, LiveEffects
from ouroactors.runtime.execution.journal import Journal
from ouroactors.runtime.execution.loop import ParsedCall, ToolResult
from ouroactors.runtime.execution.model import ToolCall
from ouroactors.runtime.execution.rehearsal_turn import publish_authorities
from ouroactors.runtime.execution.tools import ToolOutcome
from ouroactors.runtime.execution.tools.shell import ShellTool

from ._common import Row, Stat, bench_main, progress
from ._effect_parts import COMMIT, means_us, timed_parts

AUTHORITY = {"storage": 1, "ledger": 1, "grants": 1}
SESSION = "bench"


class _NoopShell(ShellTool):
    """The shell tool's declaration (grant request, intent, fingerprint), with a run that does nothing."""

    async def run(self, args: Any, ctx: Any) -> ToolOutcome:
        return ToolOutcome(status="ok", evidence={"exit_code": 0})


class _Call:
    """The loop's side of one call (:class:`~ouroactors.runtime.execution.loop.CallContext`): its tool_result is
    staged in the journal before the settling commit, as the loop's is."""

    session = SESSION
    turn = 1
    output_cap_bytes = 4096
    timeout_s = 30.0
    alone = True  # the one call of its model turn: committed on this thread, as the runtime's lone calls are

    def __init__(self, journal: Journal, call: ToolCall) -> None:
        self.journal, self.call = journal, call

    def record_result(self, result: ToolResult) -> None:
        self.journal.stage("tool_result", {"call_id": result.call_id, "status": result.status,
                                           "output": result.output, "evidence": dict(result.evidence)},
                           turn=self.turn, at=time.time_ns())

    def record_approval(self, fields: dict[str, Any]) -> None:
        raise AssertionError("the benchmark's policy allows `true`: nothing asks")

    async def emit(self, kind: str, data: dict[str, Any]) -> None:
        pass

    async def result_ready(self) -> None:
        pass

    def cancel_cause(self) -> str:
        return "interrupted"


@dataclass
class Prepared:
    """A data dir as the agent tree leaves it, and the live effect path of one session on it."""

    config: StorageConfig
    store: LedgerStore
    journal: Journal
    effects: LiveEffects


def prepared(data: Path, root: Path, session: str = SESSION, authority: dict[str, int] | None = None,
             rules: tuple[str, ...] = ("allow:Bash(true)",), watch: bool = True) -> Prepared:
    """Write what the tree's authorities would (the storage generation, grants' policy with ``rules`` for
    ``user``, a recovered ledger, grants' published generation) into ``data``'s environment, opened in this process,
    and build ``session``'s :class:`LiveEffects` over the leased ``root`` as a runtime does: the inline decision, a
    ``LedgerWriter`` (``watch``: registered as a runtime's is) and the journal riding in its transactions. Shared
    with ``tests/execution/test_effects_inprocess.py``. Close with :func:`close_env` ``(result.config)``."""
    authority = dict(authority or AUTHORITY)
    config = StorageConfig.under(data)
    env = open_env(config)
    store = publish_authorities(env, authority, rules, node="bench")
    journal = Journal(env, session)
    settings = EffectSettings(session=session, root=os.path.realpath(root), sandbox_mode=sandbox.SandboxMode.NONE,
                              data_dir=str(data), authority=authority)
    effects = LiveEffects(settings, grants=None, ledger=LedgerWriter(data, node="bench", watch=watch),  # type: ignore[arg-type]
                          journal=journal, inline=InlineGrants(env))
    return Prepared(config, store, journal, effects)


class _Path:
    """The benchmark's session on a prepared data dir."""

    def __init__(self, base: Path) -> None:
        self.root = base / "ws"
        self.root.mkdir()
        ready = prepared(base / "data", self.root)
        self.config, self.store, self.journal, self.effects = ready.config, ready.store, ready.journal, ready.effects
        self.calls = 0

    async def one(self, tool: ShellTool) -> float:
        """One call through the path (the records of its model turn staged first), its wall time in ms."""
        self.calls += 1
        call = ToolCall(id=f"c{self.calls}", name="shell", arguments={"command": "true"})
        now = time.time_ns()
        self.journal.stage("model_result", {"index": self.calls, "chunks": [], "finish": "tool_calls",
                                            "tool_calls": [call.model_dump(mode="python")],
                                            "usage": {"input_tokens": 10, "output_tokens": 5}}, turn=1, at=now)
        self.journal.stage("tool_call", {"call_id": call.id, "name": call.name, "arguments": call.arguments},
                           turn=1, at=now)
        parsed = ParsedCall(call, (tool, tool.Args.model_validate(call.arguments)))
        started = time.perf_counter()
        result = await self.effects.run(parsed, _Call(self.journal, call))
        took = (time.perf_counter() - started) * 1e3
        if result.status != "ok":
            raise RuntimeError(f"the benchmark's call did not succeed: {result}")
        return took

    def close(self) -> None:
        close_env(self.config)


class _Raw:
    """Two raw synced put commits of 300 bytes (LMDB's defaults: sync and metasync), in an environment of their own."""

    def __init__(self, path: Path) -> None:
        self.env = lmdb.open(str(path), map_size=1 << 28, sync=True, metasync=True)
        self.n = 0

    def two(self) -> None:
        for _ in range(2):
            self.n += 1
            with self.env.begin(write=True) as txn:
                txn.put(self.n.to_bytes(8, "big"), os.urandom(300))

    def two_commits_timed(self) -> list[float]:
        """:meth:`two`, each ``txn.commit()`` timed alone (ms), as ``--parts`` times the path's."""
        took = []
        for _ in range(2):
            self.n += 1
            txn = self.env.begin(write=True)
            txn.put(self.n.to_bytes(8, "big"), os.urandom(300))
            began = time.perf_counter_ns()
            txn.commit()
            took.append((time.perf_counter_ns() - began) / 1e6)
        return took

    def close(self) -> None:
        self.env.close()


def _timed(fn: Any) -> tuple[float, float]:
    """``fn()``'s wall and thread CPU time, in ms."""
    wall, cpu = time.perf_counter(), time.thread_time()
    fn()
    return (time.perf_counter() - wall) * 1e3, (time.thread_time() - cpu) * 1e3


def run(quick: bool) -> list[Row]:
    samples, warm = (150, 30) if quick else (600, 100)
    base = Path(tempfile.mkdtemp(prefix="bench-effect-path-"))
    path, raw = _Path(base), _Raw(base / "raw")
    noop, shell = _NoopShell(), ShellTool()
    path_wall, path_cpu, raw_wall, raw_cpu = Stat(), Stat(), Stat(), Stat()
    tool_path, bare_floor = Stat(), Stat()

    async def measure() -> None:
        for i in range(warm + samples):
            cpu = time.thread_time()
            wall = await path.one(noop)
            cpu = (time.thread_time() - cpu) * 1e3
            floor_wall, floor_cpu = _timed(raw.two)
            if i >= warm:
                path_wall.samples.append(wall)
                path_cpu.samples.append(cpu)
                raw_wall.samples.append(floor_wall)
                raw_cpu.samples.append(floor_cpu)
        for i in range(warm // 2 + samples // 2):
            wall = await path.one(shell)
            started = time.perf_counter()
            sandbox.run(["/bin/sh", "-c", "true"], mode=sandbox.SandboxMode.NONE, workspace=str(path.root),
                        leased_root=str(path.root))
            raw.two()
            if i >= warm // 2:
                tool_path.samples.append(wall)
                bare_floor.samples.append((time.perf_counter() - started) * 1e3)

    parts: list[Row] = []

    async def by_part() -> None:
        with timed_parts() as spent:
            for _ in range(samples):
                await path.one(noop)
        raw_commits: list[float] = []
        for _ in range(samples):
            raw_commits.extend(raw.two_commits_timed())
        for label, mean, count in means_us(spent, samples):
            base_us = sum(raw_commits) / len(raw_commits) * 1e3 if label == COMMIT else None
            parts.append(Row("part", f"{label} (n {count})", "µs", mean, base_us,
                             note="baseline: a raw 300-byte put's txn.commit(), mean" if base_us else ""))

    progress(f"{samples} calls with a tool that does nothing, then {samples // 2} running `true`; each followed by "
             "the baseline's sample" + (f"; then {samples} more by part (--parts)" if PARTS else ""))
    try:
        trio.run(measure)
        if PARTS:
            trio.run(by_part)
    finally:
        path.close()
        raw.close()
        shutil.rmtree(base, ignore_errors=True)
    return [
        Row("effect path", "decide → start (+journal) → no-op tool → settle (+journal), wall", "ms",
            path_wall, raw_wall, note="baseline: 2 raw synced LMDB put commits, each sample right after ours"),
        Row("effect path", "  its thread CPU time (I/O waits left out)", "ms", path_cpu, raw_cpu,
            note="time.thread_time: user + system time of this thread"),
        Row("effect path", "with the real tool: `true` via sandbox none, wall", "ms", tool_path, bare_floor,
            "≤ 1.5×", lambda _o, r: r <= 1.5,
            note="baseline: the bare tool (sandbox.run, none) + 2 raw synced commits; issue 13's goal, here without "
                 "the runtime's process around the path"),
        *parts,
    ]


PARTS = "--parts" in sys.argv
if PARTS:
    sys.argv.remove("--parts")  # bench_main's parser knows --quick and --json only

if __name__ == "__main__":
    bench_main(run, "the effect path in one process: CPU and synced commits", __doc__)
