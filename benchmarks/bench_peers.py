"""Per-step overhead of a durable 3-step session: ouroactors vs DBOS Transact vs LangGraph, same machine, same run.

    pip install -e '.[bench]'                    # the peers: dbos, langgraph, langgraph-checkpoint-sqlite
    python -m benchmarks.bench_peers [--quick] [--breakdown] [--via-directory] [--json FILE]

**The same step body everywhere**: run ``true`` through ``ouroactors.runtime.sandbox.run`` in mode ``none``
(a fork/exec of a no-op command, the cheapest real tool this runtime has). It is measured alone in the same
run and subtracted: **per-step overhead = wall time of the 3-step session / 3 − the body's median**.

* **ours**: a real multiproc system with ``supervision_trees/agent.toml``'s tree. Each session is created
  through the session directory and sent one message (``last``); its one turn on the scripted model makes
  3 model calls each asking for one ``shell true``, then answers with text (that fourth model call is charged
  to the 3 steps). Every step writes **two** durable records in the ledger (``started`` before the tool,
  ``settled`` after it; each a synced LMDB commit that also carries the step's journal records) after a grants
  decision made in the runtime's own process from grants' published policy, whose ``permission`` record rides in
  the start's transaction: two synced commits per step, no actor hop.
  Wall time of the session: from the runtime's journal, ``turn_settled.at − turn_started.at`` (the
  loop itself; process start, workspace lease and opening are not in it, as DBOS's ``launch`` and LangGraph's
  ``compile`` are not in theirs).
  **Readers.** Our sessions alternate between two readers, each in a process of its own. The ratio rows use
  sessions read every 50 ms (as ``bench_runtime``'s reader): the peers publish nothing to anybody, so these are
  like for like. The other half is followed live, as ``ouroactors session events --follow`` does (reading the
  committed log, woken by the committers after each commit; ``--via-directory``: through the directory and the
  coordinator's stream): every commit then wakes a second process, which competes with the turn for the box's two
  cores. Its per-step overhead is a row of its own, and so is the whole session seen from outside: ``send`` until
  the live subscriber received ``turn_settled`` (runtime start, lease, open, publication included).
* **DBOS Transact**: ``@DBOS.workflow`` calling a ``@DBOS.step`` 3 times, on its default SQLite system database
  (a file in a temp dir; SQLite's defaults: rollback journal, ``synchronous=FULL``), launched once; each
  workflow is called directly with a fresh id. DBOS writes one row per step (its output, after the step),
  plus the workflow's status row at start and end.
* **LangGraph**: a ``StateGraph`` of 3 nodes in a line, compiled with ``SqliteSaver`` (a file in a temp dir,
  WAL as it sets up, ``synchronous=FULL`` by default), ``invoke(..., durability="sync")`` on a fresh thread
  each time: one checkpoint per superstep (plus the input's), written before the next node runs.

**First and later steps.** Every message of ours runs on a fresh runtime process, so every turn is its process's
first. Two report rows split our read-periodically sessions by step, model call to model call in the journal: a
session's first step, which pays for the process's first run through code and memory it shares with the process
it was forked from, and its later steps.

Peers run in their own processes (no global state shared with our system), and the three alternate round by
round so load from other jobs hits all alike. ``--breakdown`` adds the parts of our steps from the runtime's timing
marks (as ``bench_runtime --breakdown`` names them), where a session's start goes (:func:`start_spans`, from the
trace marks of :mod:`ouroactors.runtime.coordinator.trace`) and, per turn of ours, what the runtime's scheduling
figures say (:func:`.bench_runtime.sched_stats`): its turn thread's time on a CPU and waiting for one. Every turn
of a session here is the first of its runtime process (a suspended session holds none). Goals (issue 14): ours
≤ 0.33× DBOS's per-step overhead and ≤ 0.8× LangGraph's per-node overhead. A peer that is not installed is skipped
with the reason.
"""

from __future__ import annotations

import argparse
import importlib.util
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

from ._common import Row, Stat, print_table, progress

STEPS = 3
PEERS = {"dbos": ("dbos",), "langgraph": ("langgraph", "langgraph.checkpoint.sqlite")}


def missing(peer: str) -> str | None:
    """Why ``peer`` cannot run here (a module it needs is not installed), or None."""
    for module in PEERS[peer]:
        try:
            found = importlib.util.find_spec(module)
        except ModuleNotFoundError:
            found = None
        if found is None:
            return f"{module} is not installed (pip install -e '.[bench]')"
    return None


def body_of(work: Path) -> Callable[[], None]:
    """The step body shared by all: ``true`` through the sandbox in mode ``none``."""
    from ouroactors.runtime import sandbox

    ws = work / "body-ws"
    ws.mkdir(exist_ok=True)

    def body() -> None:
        sandbox.run(["true"], mode=sandbox.SandboxMode("none"), workspace=str(ws), leased_root=str(ws))

    return body


# -- the peers (each in its own process) ----------------------------------------------------------------------


def dbos_main(work: Path, runs: int) -> list[float]:
    from dbos import DBOS

    body = body_of(work)

    @DBOS.step()
    def step(i: int) -> int:
        body()
        return i

    @DBOS.workflow()
    def session() -> int:
        return sum(step(i) for i in range(STEPS))

    DBOS(config={"name": "bench-peers", "system_database_url": f"sqlite:///{work / 'dbos.sqlite'}"})
    DBOS.launch()
    try:
        session()  # warm
        out = []
        for _ in range(runs):
            start = time.perf_counter()
            session()
            out.append((time.perf_counter() - start) * 1e3)
        return out
    finally:
        DBOS.destroy()


def langgraph_main(work: Path, runs: int) -> list[float]:
    import sqlite3
    import uuid
    from typing import TypedDict

    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph

    body = body_of(work)

    class State(TypedDict):
        n: int

    def node(state: State) -> dict[str, int]:
        body()
        return {"n": state["n"] + 1}

    graph = StateGraph(State)
    names = [f"step{i}" for i in range(STEPS)]
    for name in names:
        graph.add_node(name, node)
    for a, b in zip([START, *names], [*names, END], strict=True):
        graph.add_edge(a, b)
    conn = sqlite3.connect(str(work / "langgraph.sqlite"), check_same_thread=False)
    app = graph.compile(checkpointer=SqliteSaver(conn))
    try:
        def invoke() -> None:
            app.invoke({"n": 0}, {"configurable": {"thread_id": uuid.uuid4().hex}}, durability="sync")

        invoke()  # warm (and the tables)
        out = []
        for _ in range(runs):
            start = time.perf_counter()
            invoke()
            out.append((time.perf_counter() - start) * 1e3)
        return out
    finally:
        conn.close()


def peer_round(peer: str, work: Path, runs: int) -> list[float]:
    """``runs`` sessions of ``peer`` in a fresh process (ms each)."""
    done = subprocess.run([sys.executable, "-m", "benchmarks.bench_peers", "--peer", peer, str(work), str(runs)],
                          capture_output=True, text=True, timeout=600, cwd=Path(__file__).resolve().parents[1])
    if done.returncode != 0:
        raise RuntimeError(f"{peer} failed (exit {done.returncode}): {done.stderr.strip()[-400:]}")
    samples: list[float] = json.loads(done.stdout.strip().splitlines()[-1])
    return samples


# -- ours -----------------------------------------------------------------------------------------------------


class Ours:
    """The agent tree on multiproc; :meth:`session` runs one 3-step session through the directory."""

    def __init__(self, work: Path, breakdown: bool = False, direct: bool = True) -> None:
        from ouroactors import ActorSystem
        from ouroactors.sessions import Sessions
        from ouroactors.system import _patches

        from .bench_publication import Lines, agent_tree

        self.work = work
        self.ws = work / "ws"
        self.ws.mkdir()
        _patches.install()
        os.environ["OUROACTORS_BIND_HOST"] = os.environ["THESPIAN_BASE_IPADDR"] = "127.0.0.1"
        os.environ.setdefault("THESPLOG_FILE", str(work / "thespian.log"))
        self.timing_file: Path | None = None
        self.trace_file: Path | None = None
        if breakdown:
            from ouroactors.runtime.coordinator import trace
            from ouroactors.runtime.execution import timing

            self.timing_file = work / "timing.jsonl"
            timing.enable(str(self.timing_file))  # before the system forks: its processes inherit the switch
            self.trace_file = work / "trace.txt"  # the session start's marks
            trace.enable(str(self.trace_file))
        self.system = ActorSystem.start("multiproc", work / "data")
        self.sessions = Sessions(self.system)
        self.sids: list[str] = []
        self.outside: list[float] = []
        self.live: list[bool] = []  # per session in sids: followed by a live subscriber
        self.steps: list[list[float]] = []  # per session in sids, after close: its steps in ms, in order
        self.follower: subprocess.Popen[str] | None = None
        try:
            self.system.start_tree(agent_tree(self.ws))
            # the subscriber, in a process of its own, follows as `ouroactors session events --follow` does
            # (bench_publication's; with direct False, through the directory and the coordinator's stream)
            self.follower = subprocess.Popen(
                [sys.executable, "-m", "benchmarks.bench_publication", "--follow", str(self.system.data_dir),
                 *([] if direct else ["--via-directory"])], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                text=True, cwd=Path(__file__).resolve().parents[1])
            self.lines = Lines(self.follower)
        except BaseException:
            self.close_follower()
            self.system.shutdown()
            raise

    def close_follower(self) -> None:
        if self.follower is not None:
            if self.follower.stdin is not None:
                self.follower.stdin.close()  # its loop over stdin ends
            try:
                self.follower.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.follower.kill()
                self.follower.wait()
            self.follower = None

    def session(self, live: bool = True, model: dict[str, Any] | None = None) -> float:
        """One session of one message (``last``); answers ``send`` → the subscriber has ``turn_settled``, in ms.
        ``live``: the subscriber follows every event as it is committed (else it reads the session every 50 ms, and
        no commit of the session wakes anyone but its coordinator). ``model``: the session's ``[model]`` table
        (default: a scripted 3-step turn)."""
        from .bench_publication import script_for

        sid = f"peer-{len(self.sids)}"
        if model is None:
            model = {"kind": "scripted", "script": str(script_for(self.work / f"{sid}.json", sid, STEPS))}
        config = {"workspace": str(self.ws), "sandbox": {"mode": "none"}, "model": model}
        self.sessions.new(sid, config)
        assert self.follower is not None and self.follower.stdin is not None
        self.follower.stdin.write(("" if live else "periodic ") + sid + "\n")
        self.follower.stdin.flush()
        deadline = time.monotonic() + 60
        if self.lines.next(deadline) != "ready":
            raise RuntimeError("the subscriber did not get ready")
        start = time.perf_counter()
        self.sessions.send(sid, "go", last=True)
        while self.lines.next(deadline) != "end":  # every event up to turn_settled, then its end
            pass
        took = (time.perf_counter() - start) * 1e3
        if live:
            self.outside.append(took)
        self.sids.append(sid)
        self.live.append(live)
        return took

    def close(self) -> list[float]:
        """Shut down; the loop's time per session (ms) from the journals, read in another process. Each session's
        steps, model call to model call, go to :attr:`steps` (the first of them is its process's first)."""
        self.close_follower()
        self.system.shutdown()
        code = ("import json, sys\n"
                "from ouroactors.authorities.storage.env import StorageConfig, open_env\n"
                "from ouroactors.runtime.execution.reading import records\n"
                f"env = open_env(StorageConfig.under({str(self.work / 'data')!r}))\n"
                "out = []\n"
                "for sid in sys.argv[1:]:\n"
                "    found = list(records(env, sid))\n"
                "    at = {r.kind: r.at for r in found if r.kind in ('turn_started', 'turn_settled')}\n"
                "    calls = [r.at for r in found if r.kind == 'model_call']\n"
                "    out.append([(at['turn_settled'] - at['turn_started']) / 1e6,\n"
                "                [(b - a) / 1e6 for a, b in zip(calls, calls[1:])]])\n"
                "print(json.dumps(out))\n")
        done = subprocess.run([sys.executable, "-c", code, *self.sids], capture_output=True, text=True, timeout=120,
                              check=True)
        read: list[tuple[float, list[float]]] = json.loads(done.stdout)
        self.steps = [steps for _, steps in read]
        return [ms for ms, _ in read]


# -- the run --------------------------------------------------------------------------------------------------

START_SPANS = (  # (row, from mark, to mark): where a session's start goes (ouroactors.runtime.coordinator.trace)
    ("session start (at creation): the directory starts its coordinator", "start.coordinator_asked",
     "start.coordinator_started"),
    ("session start: the message's resume event, checked and committed", "start.message_received", "start.resumed"),
    ("session start: a runtime started (execution supervisor, new process)", "start.runtime_asked",
     "start.runtime_started"),
    ("session start: its workspace lease", "start.runtime_started", "start.leased"),
    ("session start: the runtime opens the session (ask included)", "start.leased", "start.opened"),
    ("session start: the text reaches the runtime", "start.opened", "start.text_received"),
)


def start_spans(trace_file: Path) -> dict[str, Stat]:
    """Per session start, in ms, the spans of :data:`START_SPANS` (the marks of every process, one clock)."""
    marks: list[tuple[int, str]] = []
    for line in trace_file.read_text().splitlines():
        at, _pid, name, *_ = line.split(" ", 3)
        if name.startswith("start."):
            marks.append((int(at), name))
    marks.sort()
    found = {row: Stat() for row, _, _ in START_SPANS}
    for row, first, last in START_SPANS:
        began: int | None = None
        for at, name in marks:
            if name == first:
                began = at
            elif name == last and began is not None:
                found[row].samples.append((at - began) / 1e6)
                began = None
    return {row: stat for row, stat in found.items() if stat.samples}


def run(quick: bool, breakdown: bool = False, direct: bool = True) -> list[Row]:
    rounds, per_round = (3, 4) if quick else (6, 8)
    work = Path(tempfile.mkdtemp(prefix="bench-peers-"))
    skipped = {peer: why for peer in PEERS if (why := missing(peer)) is not None}
    samples: dict[str, list[float]] = {peer: [] for peer in PEERS}
    errors: dict[str, str] = {}
    body_ms = Stat()
    body = body_of(work)
    ours = Ours(work, breakdown, direct)
    loop: list[float] = []
    sched: dict[str, Stat] = {}
    parts: list[Row] = []
    starts: dict[str, Stat] = {}
    try:
        for r in range(rounds):
            progress(f"round {r + 1}/{rounds}: {per_round} sessions each of ours (twice: read periodically, live), "
                     + ", ".join(p for p in PEERS if p not in skipped))
            for i in range(2 * per_round):
                ours.session(live=i % 2 == 1)
            for peer in PEERS:
                if peer in skipped or peer in errors:
                    continue
                try:
                    samples[peer] += peer_round(peer, work / f"{peer}-{r}", per_round)
                except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError) as exc:
                    errors[peer] = str(exc)
            for _ in range(20):
                start = time.perf_counter()
                body()
                body_ms.samples.append((time.perf_counter() - start) * 1e3)
    finally:
        loop = ours.close()
        if ours.timing_file is not None and ours.timing_file.exists():
            from .bench_runtime import part_rows, sched_stats

            sched = sched_stats(ours.timing_file)
            parts = part_rows(ours.timing_file, "  part", "ours, per step: ", all_parts=False)
        if ours.trace_file is not None and ours.trace_file.exists():
            starts = start_spans(ours.trace_file)
        shutil.rmtree(work, ignore_errors=True)
    b = body_ms.p50

    def overhead(session_ms: list[float]) -> Stat:
        return Stat([ms / STEPS - b for ms in session_ms])

    ours_step = overhead([ms for ms, live in zip(loop, ours.live, strict=True) if not live])
    ours_live = overhead([ms for ms, live in zip(loop, ours.live, strict=True) if live])
    rows = [Row("body", "the step body alone: `true` via sandbox.run (none)", "ms", body_ms, None, "—", None,
                "subtracted from every per-step figure below")]
    goals = {"dbos": (0.33, "DBOS: 1 row per step + workflow status rows, SQLite default (rollback journal, FULL)"),
             "langgraph": (0.8, "LangGraph: SqliteSaver, durability=sync, 1 checkpoint per node + input")}
    def within(goal: float) -> Callable[[float, float], bool]:
        return lambda _ours, ratio: ratio <= goal

    for peer, (goal, what) in goals.items():
        if peer in skipped:
            rows.append(Row("vs " + peer, f"ours per-step overhead vs {peer}", "ms", ours_step, None, f"≤ {goal}×",
                            None, f"skipped: {skipped[peer]}", f"skipped: {skipped[peer]}"))
            continue
        theirs = overhead(samples[peer])
        rows.append(Row("peer", f"{peer}: per-step overhead (3-step session / 3 − body)", "ms", theirs, None,
                        "—", None, what, errors.get(peer, "")))
        rows.append(Row("vs " + peer, f"ours per-step overhead vs {peer}", "ms", ours_step, theirs, f"≤ {goal}×",
                        within(goal),
                        "ours: 2 synced commits per step (ledger started, with the grants decision's record, and "
                        "settled; the journal inside them) + scripted model call; the turn's final model call "
                        "charged to the steps",
                        errors.get(peer, "")))
    if "dbos" not in skipped:
        rows.append(Row("ours", "ours with a live subscriber: per-step overhead vs dbos", "ms", ours_live,
                        overhead(samples["dbos"]), "report", None,
                        "a second process follows every event as it is committed (as `session events --follow`); "
                        "the rows above read the session every 50 ms, as the peers, which publish nothing"))
    rows.append(Row("ours", "ours: the whole session from outside, per step (send → subscriber has "
                    "turn_settled) / 3 − body", "ms", overhead(ours.outside), None, "report", None,
                    "includes runtime process start, workspace lease, open, coordinator publication"))
    # a session's runtime is a fresh process per message: its first step pays for the process's first run
    periodic = [steps for steps, live in zip(ours.steps, ours.live, strict=True) if not live and steps]
    rows.append(Row("  step", "ours, a session's first step (model call to model call) − body", "ms",
                    Stat([steps[0] - b for steps in periodic]), None, "report", None,
                    "the first step of its runtime process: code and memory the fork shares, touched for the first "
                    "time"))
    rows.append(Row("  step", "ours, its later steps − body", "ms",
                    Stat([ms - b for steps in periodic for ms in steps[1:]]), None, "report"))
    rows += parts
    for name, stat in starts.items():
        rows.append(Row("  start", f"ours, per session: {name}", "ms", stat, None))
    for name, stat in sched.items():
        rows.append(Row("  sched", f"ours, per 3-step turn: {name}", "" if "page faults" in name else "ms", stat,
                        None))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer sessions")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    parser.add_argument("--breakdown", action="store_true",
                        help="add the parts of our steps and the runtime's scheduling figures per turn")
    parser.add_argument("--via-directory", action="store_true",
                        help="our subscriber follows through the directory and the coordinator's stream (default: "
                             "as the CLI follows, reading the log in its own process)")
    parser.add_argument("--peer", nargs=3, help=argparse.SUPPRESS)  # one peer's round, in its own process
    args = parser.parse_args()
    if args.peer:
        peer, where, runs = args.peer[0], Path(args.peer[1]), int(args.peer[2])
        where.mkdir(parents=True, exist_ok=True)
        runner: dict[str, Callable[[Path, int], list[float]]] = {"dbos": dbos_main, "langgraph": langgraph_main}
        print(json.dumps(runner[peer](where, runs)))
        return
    started = time.monotonic()
    rows = run(args.quick, args.breakdown, not args.via_directory)
    print_table(rows, "per-step overhead of a durable 3-step session: ouroactors vs DBOS vs LangGraph",
                footer=[f"run time {time.monotonic() - started:.0f} s; {os.cpu_count()} cores; the box is shared"])
    if args.json:
        args.json.write_text(json.dumps([row.to_json() for row in rows], indent=2))


__all__ = ["missing", "run"]

if __name__ == "__main__":
    main()
