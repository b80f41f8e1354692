"""Recovery after a system restart: N non-terminal sessions, from system start to every coordinator settled.

    python -m benchmarks.bench_recovery [--quick] [--sizes simple:1000,simple:10000,multiproc:100]
                                        [--profile] [--json FILE]

**The workload.** N sessions are written durably straight into the node's store (setup, not timed), as a
node that crashed would have left them: half ``suspended`` (their coordinator claims the record and goes
idle: it holds no runtime), half ``running`` on a runtime that died with the system, with a workspace lease
whose capability was never stored — recovery cannot prove it may reclaim the reservation, so the coordinator
moves the session to ``recovering`` and parks it (``reservation_not_reclaimable``), visibly, with the reason.
Neither half starts a runtime: what is measured is the sweep and the coordinators, not N model sessions.

**The clock.** Start: ``time.time_ns()`` just before ``ActorSystem.start`` on the populated data dir (the
agent tree of ``supervision_trees/agent.toml`` is then started: storage, ledger, grants, workspace,
execution, coordinator, sessions; the directory's boot sweep judges every session in batch — see
:mod:`ouroactors.runtime.coordinator.sweep` — leaving the suspended half as it is, parking the running half
itself, and starting a coordinator only where one has work). Stop: the later of the sweep's ``recovery_swept``
event and the largest ``updated_ns`` of the records this boot wrote, once every session is settled (none running
or recovering) — timestamps the system writes itself, so the polling that finds the end (another process reading
the ``sessions_live`` projection and the event log every 0.5 s) is not counted.
A row per (base, N), repeated; medians with the spread of the repetitions.

**Bases.** ``multiproc`` runs one coordinator *process* per session that has work (the production layout); the
``simple`` base runs every actor in this process (the issue allows it for 10k). Each row says which.
``simple-heap`` is a diagnostic: the simple base with thespian's pending-wakeup list replaced by a heap in this
process (:func:`heap_wakeups`) — the simple base pays O(pending wakeups) per message, and every coordinator holds
one (its heartbeat); it mattered when the sweep started a coordinator per session, and matters for sessions that
get one. Baseline, same run: N synced LMDB commits of one record each, back to back in one process — the floor
of "one durable write per session", which a coordinator's claim is. ``--profile`` profiles the simple-base
runs in-process and prints where the time goes.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import io
import json
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ouroactors import ActorSystem
from ouroactors.system import _patches

from ._common import Row, Stat, print_table, progress

POLL_S = 0.5
DEFAULT_SIZES = "multiproc:1000,multiproc:10000,simple:1000,simple:10000"
NODE = "local"  # the directory's store node (directory.STORE_NODE)


# -- helpers that run in their own process (this one forks systems) -----------------------------------------


def populate_main(data_dir: str, count: int) -> None:
    """Write ``count`` sessions (half suspended, half running on a lost runtime with an unprovable lease)."""
    from ouroactors.authorities.storage.commit import Committed, write
    from ouroactors.authorities.storage.env import StorageConfig, ensure_schema, open_env
    from ouroactors.runtime.coordinator.record import (
        PinnedVersions,
        RuntimeAttachment,
        SessionRecord,
        WorkspaceLease,
    )
    from ouroactors.runtime.coordinator.store import SessionStore
    from ouroactors.runtime.coordinator.workflow import State

    config = StorageConfig.under(data_dir)
    env = open_env(config)
    ensure_schema(env, config.path)
    store = SessionStore(env)
    pinned = PinnedVersions(prompt="p1", model="scripted", tools="t1", workflow="w1", policy="pol1")
    records = []
    for i in range(count):
        running = i % 2 == 1
        records.append(SessionRecord(
            session_id=f"rec-{i:06d}", node=NODE, state=State.RUNNING if running else State.SUSPENDED,
            state_version=3, revision=5, pinned=pinned, principal="user:bench", tenant="default", channels=("cli",),
            runtime=RuntimeAttachment(runtime_id=f"rt-{i}", generation=1) if running else None,
            workspace=WorkspaceLease(lease_id=f"lease-{i}", root="/nonexistent", fencing_token=1) if running else None,
            last_generation=1, committed_cursor=12, coordinator="c.before-restart", created_ns=1, updated_ns=1))
    def put_all(txn: Any, chunk: list[SessionRecord]) -> None:
        for record in chunk:
            store._put(txn, None, record)

    for start in range(0, len(records), 5000):
        chunk = records[start:start + 5000]
        outcome = write(env, functools.partial(put_all, chunk=chunk))
        assert isinstance(outcome, Committed), outcome
    floor = env.open_db(b"bench_floor")
    started = time.perf_counter()
    for i in range(count):  # the baseline: one synced commit per session
        with env.begin(write=True, db=floor) as txn:
            txn.put(b"k%d" % i, b"x" * 300)
    print(json.dumps({"floor_s": time.perf_counter() - started}))


def wait_main(data_dir: str, count: int, since_ns: int, timeout: float) -> None:
    """Poll until this boot's sweep logged ``recovery_swept`` and every session it did not leave idle was written
    after ``since_ns`` and is neither running nor recovering; print the end (the later of the sweep's event and the
    largest ``updated_ns``) and the states."""
    from ouroactors.authorities.storage.env import StorageConfig, open_env
    from ouroactors.runtime.coordinator.store import SessionStore

    deadline = time.monotonic() + timeout
    store: SessionStore | None = None
    last: dict[str, int] = {}
    events = Path(data_dir) / "events.jsonl"
    while time.monotonic() < deadline:
        swept = _swept(events, since_ns)
        if store is None and (Path(data_dir) / "lmdb").exists():
            store = SessionStore(open_env(StorageConfig.under(data_dir)))
        if store is not None and swept is not None:
            found = store.list_recoverable(NODE).sessions
            written = [r for r in found if r.updated_ns >= since_ns]
            last = {}
            for r in found:
                last[r.state.value] = last.get(r.state.value, 0) + 1
            settled = all(r.state.value not in ("running", "recovering") for r in found)
            if settled and len(found) == count and len(found) - len(written) <= swept["idle"]:
                end = max([swept["time_ns"], *(r.updated_ns for r in written)])
                print(json.dumps({"end_ns": end, "states": last, "sweep": swept}), flush=True)
                return
        time.sleep(POLL_S)  # the end time comes from the records and the event, not from this poll
    print(json.dumps({"error": f"not all settled in {timeout:.0f} s: {last}"}), flush=True)


def _swept(events: Path, since_ns: int) -> dict[str, Any] | None:
    """This boot's ``recovery_swept`` event (its fields are the line's keys: time_ns, idle …), or None yet."""
    if not events.exists():
        return None
    for line in events.read_text().splitlines():
        event = json.loads(line)
        if event.get("kind") == "recovery_swept" and event.get("time_ns", 0) >= since_ns:
            return event
    return None


def heap_wakeups() -> None:
    """Diagnostic only (base ``simple-heap``): keep the simple base's pending wakeups in a heap.

    thespian's ``simpleSystemBase`` keeps them in a list that it partitions on every ``wakeupAfter`` and on
    every turn of its message loop, so each message costs O(pending wakeups). Every coordinator holds one
    (its heartbeat) and every outstanding ask holds one (its timeout), so the sweep of N sessions costs O(N²)
    there. This patch (in this process only, the simple base's) shows what the sweep costs without that.
    """
    import heapq
    import itertools

    from thespian.system import simpleSystemBase as ssb
    from thespian.system.timing import ExpirationTimer

    seq = itertools.count()

    def add(self: Any, from_actor: Any, period: Any, payload: Any) -> None:
        timer = ExpirationTimer(period)
        due = timer._time_to_quit if timer._time_to_quit is not None else float("inf")
        heapq.heappush(self._wakeUps, (due, next(seq), from_actor, timer, payload))

    def pop(self: Any, ct: Any) -> list[Any]:
        out = []
        while self._wakeUps and self._wakeUps[0][0] <= ct:
            _due, _n, addr, timer, payload = heapq.heappop(self._wakeUps)
            out.append((addr, timer, payload))
        return out

    def nxt(self: Any) -> Any:
        return self._wakeUps[0][3] if self._wakeUps else None

    def status(self: Any, message: Any) -> Any:
        message.addWakeups([(w[2], w[3]) for w in self._wakeUps])
        return message

    ssb.WakeupManager._add_wakeup = add
    ssb.WakeupManager._pop_expired_wakeups = pop
    ssb.WakeupManager._next_wakeup = nxt
    ssb.WakeupManager.add_wakeups_to_status = status


def _helper(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "benchmarks.bench_recovery", *args], stdout=subprocess.PIPE,
                            text=True, cwd=Path(__file__).resolve().parents[1])


# -- one restart ----------------------------------------------------------------------------------------------


def agent_tree() -> Any:
    from ouroactors.cli.demo_agent import AGENT_TOML
    from ouroactors.system.config import load_tree

    return load_tree(AGENT_TOML).tree


def restart(base: str, data_dir: Path, count: int, timeout: float, profile: cProfile.Profile | None
            ) -> tuple[float, float, dict[str, int]]:
    """Start the system on ``data_dir`` and its agent tree; seconds until every session settled, from the system's
    start and from the directory's start (its ``started`` event: the sweep begins there)."""
    t0 = time.time_ns()
    waiter = _helper("--wait", str(data_dir), str(count), str(t0), str(timeout))
    if profile is not None:
        profile.enable()
    system = ActorSystem.start(base, data_dir)
    try:
        system.start_tree(agent_tree(), timeout=timeout)
        while waiter.poll() is None:
            system.run_for(1.0)  # multiproc: waits; simple: the in-process system runs only while called
        swept_from = system.wait_for("started", "agent/sessions", after=0).time_ns
    finally:
        if profile is not None:
            profile.disable()
        system.shutdown(timeout=120)
    out, _ = waiter.communicate(timeout=30)
    answer = json.loads(out.strip().splitlines()[-1])
    if "error" in answer:
        raise TimeoutError(answer["error"])
    return (answer["end_ns"] - t0) / 1e9, (answer["end_ns"] - swept_from) / 1e9, answer["states"]


def run(sizes: list[tuple[str, int]], repeats: int, profile: bool) -> list[Row]:
    _patches.install()
    sizes = sorted(sizes, key=lambda s: s[0] == "simple-heap")  # the patch stays once applied: those runs last
    os.environ["OUROACTORS_BIND_HOST"] = os.environ["THESPIAN_BASE_IPADDR"] = "127.0.0.1"
    rows: list[Row] = []
    per_session: dict[tuple[str, int], float] = {}
    for kind, count in sizes:
        base = "multiproc" if kind == "multiproc" else "simple"
        if kind == "simple-heap":
            heap_wakeups()
        ours, sweep, floor = Stat(), Stat(), Stat()
        error = ""
        states: dict[str, int] = {}
        prof = cProfile.Profile() if profile and base == "simple" else None
        progress(f"{kind}: {count} sessions")
        for rep in range(repeats):
            work = Path(tempfile.mkdtemp(prefix="bench-recovery-"))
            try:
                progress(f"{kind}, {count} sessions, run {rep + 1}/{repeats}: populating")
                filler = _helper("--populate", str(work / "data"), str(count))
                out, _ = filler.communicate(timeout=600)
                if filler.returncode != 0:
                    raise RuntimeError(f"populating failed (exit {filler.returncode})")
                floor.samples.append(json.loads(out.strip().splitlines()[-1])["floor_s"] * 1e3)
                progress(f"{kind}, {count} sessions, run {rep + 1}/{repeats}: restart")
                seconds, swept, states = restart(base, work / "data", count, 60 + count * 0.2, prof)
                ours.samples.append(seconds * 1e3)
                sweep.samples.append(swept * 1e3)
            except (RuntimeError, TimeoutError, OSError, subprocess.TimeoutExpired) as exc:
                error = f"{type(exc).__name__}: {exc}"
                break
            finally:
                shutil.rmtree(work, ignore_errors=True)
        goal, check = ("≤ 2000 ms", (lambda o, _r: o <= 2000)) if count == 10_000 else ("report", None)
        label = " + wakeups in a heap (diagnostic)" if kind == "simple-heap" else ""
        rows.append(Row("recovery", f"{base} base{label}: start → {count} sessions settled", "ms", ours, floor, goal,
                        check, f"{states}; base: {count} synced 1-record commits back to back; "
                               f"runs: {', '.join(f'{s:.0f}' for s in ours.samples)} ms", error))
        rows.append(Row("recovery", "  of which the sweep: directory started → all settled", "ms", sweep, floor,
                        "report", None, f"runs: {', '.join(f'{s:.0f}' for s in sweep.samples)} ms"))
        if sweep.samples:
            per_session[(kind, count)] = sweep.p50 / count
        if prof is not None:
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(30)
            print(text.getvalue(), file=sys.stderr)
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
            print(text.getvalue(), file=sys.stderr)
    for base in sorted({b for b, _ in per_session}):
        counts = sorted(c for b, c in per_session if b == base)
        if len(counts) >= 2:
            lo, hi = counts[0], counts[-1]
            ratio = per_session[(base, hi)] / per_session[(base, lo)]
            rows.append(Row("recovery", f"{base}: sweep per session, {hi} vs {lo} (linear: ~1)", "×", ratio, None,
                            "≤ 1.3", lambda o, _r: o <= 1.3,
                            f"{per_session[(base, lo)]:.2f} ms vs {per_session[(base, hi)]:.2f} ms per session"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one run per size")
    parser.add_argument("--sizes", default=DEFAULT_SIZES,
                        help="base:count pairs, comma separated; base: multiproc, simple, simple-heap")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--profile", action="store_true", help="profile the simple-base runs (stderr)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--populate", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--wait", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.populate:
        populate_main(args.populate[0], int(args.populate[1]))
        return
    if args.wait:
        wait_main(args.wait[0], int(args.wait[1]), int(args.wait[2]), float(args.wait[3]))
        return
    sizes = [(s.split(":")[0], int(s.split(":")[1])) for s in args.sizes.split(",")]
    repeats = args.repeats or (1 if args.quick else 3)
    started = time.monotonic()
    rows = run(sizes, repeats, args.profile)
    print_table(rows, "recovery after a restart: system start → every session's coordinator settled",
                footer=[f"run time {time.monotonic() - started:.0f} s; {os.cpu_count()} cores; the box is shared"])
    if args.json:
        args.json.write_text(json.dumps([row.to_json() for row in rows], indent=2))


if __name__ == "__main__":
    main()
