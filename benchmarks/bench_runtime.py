"""Runtime benchmark: what one tool call costs inside a live session, against the bare tool and two raw commits.

    python -m benchmarks.bench_runtime [--quick] [--json FILE] [--breakdown]

A real multiproc system runs the agent authorities and one session runtime. A scripted model makes N model calls,
each asking for one ``shell`` call of ``true`` (then a final answer), so the turn is N steps of: model call →
grants decision → ledger start (synced commit) → the tool → ledger settlement (synced commit) → journal. Each
step's time is read from the session's own journal — from one ``model_call`` record to the next — so no polling
from outside is counted, and the p50 is over single steps, as the floor's is over single samples. (A turn's mean
per step, ``(turn_settled.at − turn_started.at) / N`` with the final text answer charged to the steps, is the
``turn`` row: on a box whose disk stalls now and then, a mean of ten steps carries the stalls a p50 of samples
leaves out, so it reads higher than the steps do.)

Baseline, same run and same filesystem, sampled in slices between the session's turns (the same moments, on a shared
machine): the bare tool (what the shell tool runs, ``/bin/sh -c true``, by ``sandbox.run`` in the same mode; ~0.1 ms
more than a bare ``true``) plus two raw synced LMDB put commits — the physical floor of a recorded effect. Goal
(issue 13): ≤ 1.5×. The row "steps without a tool" (the model answers with text only, N turns) shows what the loop
and journal cost alone.

``--breakdown`` turns on the runtime's timing marks (:mod:`ouroactors.runtime.execution.timing`) and adds one row
per part of a step, per mode (its name gives the turn thread's CPU in the part: the rest of its wall time is waiting
— for a flush, the child, a CPU): call setup, the grant decision, the ledger start (its records and synced commit), the
tool, the settlement (records and synced commit), and what lies between two calls (the loop, the model, journal
staging). The marks cost a lock and an append each; without the flag they cost a branch.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lmdb

from ouroactors import ActorSystem, supervisor, worker
from ouroactors.authorities.asking import ask_authority
from ouroactors.authorities.workspace.messages import Acquire
from ouroactors.runtime import sandbox
from ouroactors.runtime.execution import timing
from ouroactors.runtime.execution.messages import AckOutput, DrainOutput, OpenSession, SendText

from ._common import Row, Stat, bench_main, progress


def _tree(root: str) -> Any:
    rules = {"user": ["allow:Bash(true)"]}
    return supervisor("agent", strategy="rest_for_one", intensity=10, children=[
        worker("storage", "ouroactors.authorities.storage.actor:Storage"),
        worker("ledger", "ouroactors.authorities.ledger.actor:Ledger"),
        worker("grants", "ouroactors.authorities.grants.actor:Grants", kwargs={"rules": rules}),
        worker("workspace", "ouroactors.authorities.workspace.actor:Workspace", kwargs={"allowed_roots": [root]}),
        supervisor("execution", [worker("runtime", "ouroactors.runtime.execution.runtime:Runtime",
                                        restart="transient")], strategy="simple_one_for_one", intensity=10),
    ])


READER_PERIOD_S = 0.05


def _drain_until_settled(system: ActorSystem, path: str, cursor: int, timeout: float = 300.0) -> int:
    """Read the turn's output the way a reader that refreshes every READER_PERIOD_S would (a UI, a tailing CLI).

    The timing comes from the journal, not from here; but every ask is work for the runtime's actor thread, in the
    runtime's process, on the box's two cores. A reader that asked again at once whenever output was waiting kept
    that thread (and this process) busy for the whole turn — most of what it measured was the reader, not the loop.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        batch = system.ask(path, DrainOutput(after=cursor, limit=4096), timeout=30)
        if batch.events:
            cursor = batch.events[-1].cursor
            system.ask(path, AckOutput(cursor), timeout=30)
            if any(e.kind == "turn_settled" for e in batch.events):
                return cursor
        time.sleep(READER_PERIOD_S)  # the output buffer holds far more than a period's events: no back-pressure
    raise TimeoutError("the benchmark turn did not settle")


def _journal_times(data_dir: Path, session: str) -> tuple[list[float], list[float]]:
    """From the session's journal, read in another process (this one runs systems), in ms: (settled − started) per
    turn, and each tool step — from one ``model_call`` record to the next in its turn (a model call, its tool
    call, and the records between)."""
    code = ("from ouroactors.authorities.storage.env import StorageConfig, open_env\n"
            "from ouroactors.runtime.execution.reading import records\n"
            f"env = open_env(StorageConfig.under({str(data_dir)!r}))\n"
            "start, calls = {}, {}\n"
            f"for r in records(env, {session!r}):\n"
            "    if r.kind == 'turn_started': start[r.turn] = r.at\n"
            "    elif r.kind == 'model_call': calls.setdefault(r.turn, []).append(r.at)\n"
            "    elif r.kind == 'turn_settled':\n"
            "        print('turn', (r.at - start[r.turn]) / 1e6)\n"
            "        at = calls.get(r.turn, [])\n"
            "        for a, b in zip(at, at[1:]): print('step', (b - a) / 1e6)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    found: dict[str, list[float]] = {"turn": [], "step": []}
    for line in out.stdout.splitlines():
        kind, value = line.split()
        found[kind].append(float(value))
    return found["turn"], found["step"]


SEGMENTS = (  # (row, from mark, to mark): the parts of one step, in order
    ("call setup (tool context, grant request)", "eff.begin", "eff.startreq"),
    ("grant decision (inline)", "eff.startreq", "eff.decided"),
    ("ledger start: records + synced commit", "eff.decided", "eff.admitted"),
    ("the tool", "eff.admitted", "eff.ran"),
    ("  of which the sandbox run (plan, spawn, wait, result)", "tool.spawn", "tool.done"),
    ("settlement: records + synced commit", "eff.ran", "eff.settled"),
    ("between calls: loop, model, journal staging", "eff.settled", "eff.begin"),
    ("  of which the model call (scripted)", "model.begin", "model.end"),
    ("a turn's start: records, its event (per turn)", "turn.begin", "turn.staged"),
    ("a turn's start: its synced commit, with the riders' work (per turn)", "turn.staged", "turn.committed"),
    ("a turn's start: on to the first model call (per turn)", "turn.committed", "model.begin"),
    ("a turn's end: records + synced commit (per turn)", "turn.settling", "turn.flushed"),
)


def segments(timing_file: Path) -> dict[str, tuple[Stat, Stat]]:
    """Per-step durations (ms) of each segment, from the marks the runtime appended (one JSON line per turn): its
    wall time, and the CPU time the marking thread (the turn's: every segment's marks are its) spent in it."""
    found = {name: (Stat(), Stat()) for name, _, _ in SEGMENTS}
    for line in timing_file.read_text().splitlines():
        marks = json.loads(line)["marks"]
        for name, start, end in SEGMENTS:
            for i, (mark, at, cpu) in enumerate(marks):
                if mark != start:
                    continue
                for later, later_at, later_cpu in marks[i + 1:]:
                    if later == end:
                        found[name][0].samples.append((later_at - at) / 1e6)
                        found[name][1].samples.append((later_cpu - cpu) / 1e6)
                        break
                    if later == start:
                        break
    return found


def part_rows(timing_file: Path, section: str, prefix: str = "", *, all_parts: bool = True) -> list[Row]:
    """One row per segment of a step: its wall time, and in its name how much of that was the turn thread's own
    CPU (the rest it waited: for a disk flush, a child process, a CPU another thread held). ``all_parts=False``
    leaves out the segments no turn reached."""
    return [Row(section, f"{prefix}{name} (thread CPU p50 {cpu.p50:.2f} ms)" if cpu.samples else f"{prefix}{name}",
                "ms", wall, None)
            for name, (wall, cpu) in segments(timing_file).items() if all_parts or wall.samples]


def sched_stats(timing_file: Path) -> dict[str, Stat]:
    """Per turn, in ms, from the scheduling figures the runtime dumped with its marks (:mod:`~ouroactors.runtime.
    execution.timing`): the turn thread's time on a CPU and waiting for one, the other threads' time on a CPU, and
    minor page faults (a count) — the first turn of each runtime process apart from the later ones."""
    found = {name: Stat() for name in SCHED_ROWS}
    seen: set[int] = set()
    for line in timing_file.read_text().splitlines():
        entry = json.loads(line)
        sched = entry.get("sched")
        if not sched:
            continue
        which = "later" if entry["pid"] in seen else "first"
        seen.add(entry["pid"])
        run, wait = sched.get(entry["turn_thread"], (0, 0))
        others = sum(r for tid, (r, _) in sched.items() if tid != entry["turn_thread"])
        for name, value in ((f"turn thread on a CPU ({which} turn of its process)", run / 1e6),
                            (f"turn thread waiting for a CPU ({which} turn)", wait / 1e6),
                            (f"other threads on a CPU ({which} turn)", others / 1e6),
                            (f"minor page faults, count ({which} turn)", float(entry["minflt"]))):
            found[name].samples.append(value)
    return {name: stat for name, stat in found.items() if stat.samples}


SCHED_ROWS = tuple(f"{what} ({which} turn{' of its process' if i == 0 else ''})"
                   for which in ("first", "later")
                   for i, what in enumerate(("turn thread on a CPU", "turn thread waiting for a CPU",
                                             "other threads on a CPU", "minor page faults, count")))


def _session_steps(mode: str, steps: int, tool: bool, rounds: int, timing_file: Path | None = None,
                   between: Callable[[], None] | None = None) -> tuple[Stat, Stat]:
    """Over ``rounds`` turns of ``steps`` steps each, in one session, in ms: each tool step (one sample per step),
    and each turn's time per step (its final answer charged to its steps); ``between`` runs before each turn and
    after the last (the floor's samples, so that both see the same load on a shared machine)."""
    base = Path(tempfile.mkdtemp(prefix="bench-runtime-"))
    ws = base / "ws"
    ws.mkdir()
    script = base / "script.toml"
    if timing_file is not None:
        timing.enable(str(timing_file))  # before the system forks: its processes inherit the switch
    system = ActorSystem.start("multiproc", base / "data")
    try:
        system.start_tree(_tree(str(base)))
        path = f"agent/execution/{system.start_child('agent/execution', ()).id}"
        lease = ask_authority(system, "agent/workspace", Acquire(str(ws), "exclusive", "bench",
                                                                 owner=system.resolve(path))).lease
        # One script for every round: each round's turn k answers the request holding k assistant messages, so
        # the script holds all rounds' turns one after the other.
        one = [] if not tool else [f'[[turns]]\nevents = [{{ kind = "tool_call", id = "r{{r}}c{i}", name = "shell", '
                                   f'arguments = {{ command = "true" }} }}]\n' for i in range(steps)]
        parts = []
        for r in range(rounds):
            parts += [t.replace("{r}", str(r)) for t in one]
            parts.append('[[turns]]\nevents = [{ kind = "text", text = "done" }]\n')
        script.write_text("\n".join(parts))
        config = {"workspace": str(ws), "sandbox": {"mode": mode},
                  "model": {"kind": "scripted", "script": str(script)}}
        system.ask(path, OpenSession("bench", config, lease.lease_id), timeout=30)
        cursor = 0
        for _ in range(rounds):
            if between is not None:
                between()
            system.ask(path, SendText("go"), timeout=30)
            cursor = _drain_until_settled(system, path, cursor)
        if between is not None:
            between()
        times, step_times = _journal_times(system.data_dir, "bench")
    finally:
        system.shutdown()
        shutil.rmtree(base, ignore_errors=True)
        if timing_file is not None:  # the next session's processes must not write to a file about to be removed
            timing.disable()
    per_turn = Stat([t / max(steps, 1) for t in times])  # the final answer's model call is counted in the steps
    return (Stat(step_times) if steps else per_turn), per_turn


class _Floor:
    """The bare tool (same sandbox mode) alone, and plus two raw synced LMDB commits, in ms — sampled in slices
    between the session's turns: the machine is shared, and a floor measured minutes apart from the steps it is
    compared with measured the neighbours' load as much as anything (floors of 3.6-11.8 ms in one hour here)."""

    def __init__(self, mode: str) -> None:
        self.mode = sandbox.SandboxMode(mode)
        self.base = Path(tempfile.mkdtemp(prefix="bench-floor-"))
        self.ws = self.base / "ws"
        self.ws.mkdir()
        self.env: lmdb.Environment | None = None  # opened at the first sample: after the system has forked
        self.bare, self.floor = Stat(), Stat()

    def sample(self, n: int) -> None:
        if self.env is None:
            self.env = lmdb.open(str(self.base / "lmdb"), map_size=1 << 26, sync=True, metasync=True)
        for _ in range(n):
            i = self.floor.n
            started = time.perf_counter()
            sandbox.run(["/bin/sh", "-c", "true"], mode=self.mode, workspace=str(self.ws), leased_root=str(self.ws))
            ran = time.perf_counter()
            for j in range(2):
                with self.env.begin(write=True) as txn:
                    txn.put(f"k{i}-{j}".encode(), os.urandom(300))
            done = time.perf_counter()
            self.bare.samples.append((ran - started) * 1e3)
            self.floor.samples.append((done - started) * 1e3)

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
        shutil.rmtree(self.base, ignore_errors=True)


def run(quick: bool) -> list[Row]:
    steps, rounds, samples = (5, 3, 30) if quick else (10, 6, 100)
    modes = ["none"] + (["bwrap"] if sandbox.probe_cached().available else [])
    rows: list[Row] = []
    parts: list[Row] = []
    for mode in modes:
        progress(f"session: {rounds} turns of {steps} tool calls ({mode}), and between them the floor: bare `true` "
                 "+ 2 synced commits")
        timing_file = Path(tempfile.mkdtemp(prefix="bench-timing-")) / "marks.jsonl" if BREAKDOWN else None
        slices = _Floor(mode)
        per_slice = max(samples // (rounds + 1), 1)
        try:
            ours, per_turn = _session_steps(mode, steps, True, rounds, timing_file,
                                            between=functools.partial(slices.sample, per_slice))
        finally:
            slices.close()
        bare, floor = slices.bare, slices.floor
        rows.append(Row("tool call", f"one step: model → grants → start → `true` ({mode}) → settle → journal", "ms",
                        ours, floor, "≤ 1.5×", lambda _o, r: r <= 1.5,
                        note=f"bare tool alone p50 {bare.p50:.2f} ms"))
        parts.append(Row(f"  turn ({mode})", "a turn's time per step (final answer included; n = turns)", "ms",
                         per_turn, floor))
        if timing_file is not None:
            parts += part_rows(timing_file, f"  part ({mode})")
            for name, stat in sched_stats(timing_file).items():
                unit = "" if "page faults" in name else "ms"
                parts.append(Row(f"  sched ({mode})", f"per turn of {steps} steps: {name}", unit, stat, None))
            shutil.rmtree(timing_file.parent, ignore_errors=True)
    rows += parts
    progress(f"session: {rounds * 3} text-only turns (loop and journal alone)")
    text_only, _ = _session_steps("none", 0, False, rounds * 3)
    rows.append(Row("loop", "one model call, text only (no tool)", "ms", text_only, None))
    return rows


BREAKDOWN = "--breakdown" in sys.argv
if BREAKDOWN:
    sys.argv.remove("--breakdown")  # bench_main's parser knows --quick and --json only

if __name__ == "__main__":
    bench_main(run, "ouroactors runtime: the cost of one tool call in a live session", __doc__)
