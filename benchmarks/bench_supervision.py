"""Supervision overhead: ouroactors against raw thespian, same run, same base (multiprocTCPBase).

    python -m benchmarks.bench_supervision            # full run (a few minutes)
    python -m benchmarks.bench_supervision --quick    # smoke run for CI (< 60 s)

Both systems run side by side in this process: an ouroactors :class:`~ouroactors.ActorSystem`
and a plain ``thespian.actors.ActorSystem('multiprocTCPBase', transientUnique=True)`` on its own
free admin port. ouroactors' process patches (loopback binding, parent-death signal, quiet
admin) are installed before either starts, so both use the same transport on 127.0.0.1.
Measurements of the two sides are interleaved (block by block, or repetition by repetition) so
drift on this shared machine hits both equally. Cross-process latencies use ``time.time_ns()``
on both ends (the supervisor's event ``time_ns``, the raw parent's ``time.time_ns()``).

Every system is shut down in a ``finally``; afterwards the run checks that no process of either
system's process group survives and that neither admin port still listens.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from thespian.actors import ActorExitRequest
from thespian.actors import ActorSystem as ThespianSystem
from thespian.system import utilis as thespian_utilis

from ouroactors import ActorCrashed, ActorRef, ActorSystem, AskTimeout, OuroactorsError, supervisor, worker
from ouroactors.examples.workers import Echo
from ouroactors.system import _frames, _patches

from ._actors import PusherWorker, RawEcho, RawParent, RawPusher, RawSink, SinkWorker
from ._common import (
    Row,
    Stat,
    count_in_thespian_log,
    free_port,
    listening_ports,
    minor_faults,
    print_table,
    progress,
    sweep_group,
)

LOOPBACK = "127.0.0.1"
SECTIONS = ("ask", "crash", "kill", "rest_for_one", "dynamic", "push")


@dataclass(frozen=True)
class Config:
    asks: int  # per ask variant
    warmup: int
    crashes: int
    kills: int
    rfo_reps: int
    rfo_children: int
    dynamic: tuple[int, ...]
    push_n: int
    push_batch: int
    push_reps_single: int
    push_reps_batched: int


FULL = Config(asks=1000, warmup=100, crashes=30, kills=30, rfo_reps=20, rfo_children=6,
              dynamic=(250, 500, 1000), push_n=2000, push_batch=100, push_reps_single=2, push_reps_batched=9)
QUICK = Config(asks=200, warmup=30, crashes=10, kills=10, rfo_reps=5, rfo_children=6,
               dynamic=(100, 200), push_n=500, push_batch=100, push_reps_single=1, push_reps_batched=5)


def ms(ns: int | float) -> float:
    return ns / 1e6


def expect(answer: Any, wanted: Any, what: str) -> None:
    if answer != wanted:
        raise RuntimeError(f"{what}: expected {wanted!r}, got {answer!r}")


class Bench:
    def __init__(self, ours: ActorSystem, raw: Any, cfg: Config) -> None:
        self.ours = ours
        self.raw = raw
        self.cfg = cfg
        self.rows: list[Row] = []

    # -- 1. asks --------------------------------------------------------------------------------------

    def ask(self) -> None:
        cfg, ours, raw = self.cfg, self.ours, self.raw
        # The baseline is thespian's own frames: its admin port has no ouroactors secret, so its
        # frames carry no MAC (_frames.RAW) while every frame of ours is tagged and checked.
        raw_port = raw._systemBase.transport._adminAddr.addressDetails.sockname[1]
        if _frames.auth_for(raw_port)[0] is not _frames.RAW or isinstance(_frames.auth_for(ours.admin_port)[0],
                                                                         _frames._Raw):
            raise RuntimeError("ask rows need an untagged raw baseline and a tagged ouroactors system")
        mac_us = mac_cost_us()
        ours.start_tree(supervisor("askbench", [worker("echo", Echo)]))
        ref = ours.ref("askbench/echo")
        echo = raw.createActor(RawEcho)
        try:
            variants: dict[str, Callable[[int], Any]] = {
                "ref": lambda i: ref.ask(i),
                "raw": lambda i: raw.ask(echo, i, 5.0),
                "path": lambda i: ours.ask("askbench/echo", i),
            }
            pids = {"ref": [ref.ask("pid")], "raw": [raw.ask(echo, "pid", 5.0)]}
            sup_pid = next(t.pid for t in ours.trees() if t.name == "askbench" and t.status == "running")
            pids["path"] = [*pids["ref"], sup_pid]
            faults = dict.fromkeys(variants, 0)
            samples: dict[str, list[float]] = {name: [] for name in variants}
            for name, call in variants.items():
                for i in range(cfg.warmup):
                    expect(call(i), i, f"warm-up ask {name}")
            blocks = 10
            per_block = max(1, cfg.asks // blocks)
            names = list(variants)
            for block in range(blocks):
                for name in names[block % 3:] + names[: block % 3]:  # rotate who goes first
                    call = variants[name]
                    before = minor_faults(pids[name])
                    for i in range(per_block):
                        t0 = time.perf_counter_ns()
                        answer = call(i)
                        samples[name].append(ms(time.perf_counter_ns() - t0))
                        expect(answer, i, f"ask {name}")
                    faults[name] += minor_faults(pids[name]) - before
        finally:
            raw.tell(echo, ActorExitRequest())
            ours.stop_tree("askbench")
        raw_stat = Stat(samples["raw"])
        per_ask = {name: faults[name] / max(1, len(samples[name])) for name in faults}
        self.rows.append(Row("1", "ask via resolved ActorRef", "ms", Stat(samples["ref"]), raw_stat,
                             goal="ratio ≤ 1.15×", check=lambda _o, r: r <= 1.15,
                             note=f"ours: every frame HMAC-tagged and checked (≈{mac_us:.1f} µs per frame to frame, "
                                  "tag and check; 2 tagged frames per ask, acks untagged); raw: untagged frames; "
                                  f"actor page faults/ask: ours {per_ask['ref']:.1f}, raw {per_ask['raw']:.1f}"))
        self.rows.append(Row("1", "ask by path (system.ask)", "ms", Stat(samples["path"]), raw_stat,
                             note=f"path resolved once then cached (re-resolved when a dead letter says it moved); "
                                  f"worker+supervisor page faults/ask {per_ask['path']:.1f}"))

    # -- 2. crash -> replacement answering -------------------------------------------------------------

    def crash(self) -> None:
        cfg, ours, raw = self.cfg, self.ours, self.raw
        path = "crashbench/w"
        ours.start_tree(supervisor("crashbench", [worker("w", Echo)], strategy="one_for_one",
                                   intensity=10_000, period=1))
        e2e, exited, started, base = [], [], [], []
        warm = 2
        try:
            for rep in range(cfg.crashes + warm):
                # ours: "crash" to the worker, then re-resolve until the new incarnation answers.
                info = ours.child_info(path)
                old_pid = info.pid
                mark = ours.mark()
                ts0 = time.time_ns()
                t0 = time.perf_counter_ns()
                try:
                    ActorRef(ours, path, info.address).ask("crash")
                    raise RuntimeError("crash did not crash")
                except ActorCrashed:
                    pass
                deadline = time.monotonic() + 10
                while True:
                    # which_child is deferred by the supervisor while a restart is in progress,
                    # so this returns as soon as the replacement is up (no sleep needed).
                    info = ours.child_info(path)
                    if (info.status == "running" and info.pid != old_pid
                            and ActorRef(ours, path, info.address).ask("x") == "x"):
                        break
                    if time.monotonic() > deadline:
                        raise RuntimeError("the crashed worker was not replaced within 10 s")
                t1 = time.perf_counter_ns()
                ev_exit = ours.wait_for("exited", path, after=mark)
                ev_start = ours.wait_for("started", path, after=mark)
                # raw: createActor + first ask
                r0 = time.perf_counter_ns()
                address = raw.createActor(RawEcho)
                answer = raw.ask(address, "x", 5.0)
                r1 = time.perf_counter_ns()
                expect(answer, "x", "raw first ask")
                raw.tell(address, ActorExitRequest())
                if rep >= warm:
                    e2e.append(ms(t1 - t0))
                    exited.append(ms(ev_exit.time_ns - ts0))
                    started.append(ms(ev_start.time_ns - ts0))
                    base.append(ms(r1 - r0))
        finally:
            ours.stop_tree("crashbench")
        base_stat = Stat(base)
        self.rows.append(Row("2", "crash → replacement answers", "ms", Stat(e2e), base_stat,
                             goal="ratio ≤ 2×", check=lambda _o, r: r <= 2.0,
                             note="base: createActor + 1st ask"))
        self.rows.append(Row("2", "  crash → supervisor 'exited' event", "ms", Stat(exited), None))
        self.rows.append(Row("2", "  crash → 'started' event of replacement", "ms", Stat(started), base_stat))

    # -- 3. SIGKILL -> supervisor notified -------------------------------------------------------------

    def kill(self) -> None:
        cfg, ours, raw = self.cfg, self.ours, self.raw
        path = "killbench/w"
        ours.start_tree(supervisor("killbench", [worker("w", Echo)], strategy="one_for_one",
                                   intensity=10_000, period=1))
        parent = raw.createActor(RawParent)
        lat_ours, lat_raw = [], []
        try:
            for rep in range(1, cfg.kills + 1):
                info = ours.child_info(path)
                expect(info.status, "running", "child status before kill")
                mark = ours.mark()
                t0 = time.time_ns()
                os.kill(info.pid, signal.SIGKILL)
                event = ours.wait_for("exited", path, after=mark)
                expect((event.reason or {}).get("kind"), "killed", "exit reason")
                lat_ours.append(ms(event.time_ns - t0))
                ours.wait_for("started", path, after=mark)  # back up before the next kill

                done = raw.ask(parent, ("spawn", 1), 10.0)
                t0 = time.time_ns()
                os.kill(done[3], signal.SIGKILL)
                noticed = raw.ask(parent, ("wait_exit", rep), 10.0)
                if not isinstance(noticed, int):
                    raise RuntimeError(f"raw parent did not notice the kill: {noticed!r}")
                lat_raw.append(ms(noticed - t0))
        finally:
            raw.tell(parent, ActorExitRequest())
            ours.stop_tree("killbench")
        self.rows.append(Row("3", "SIGKILL → supervisor notified", "ms", Stat(lat_ours), Stat(lat_raw),
                             goal="p50 ≤ 10 ms", check=lambda o, _r: o <= 10.0,
                             note="base: raw parent's ChildActorExited"))

    # -- 4. rest_for_one restart of 6 ------------------------------------------------------------------

    def rest_for_one(self) -> None:
        cfg, ours, raw = self.cfg, self.ours, self.raw
        k = cfg.rfo_children
        names = [f"w{i}" for i in range(1, k + 1)]
        ours.start_tree(supervisor("rfobench", [worker(n, Echo) for n in names], strategy="rest_for_one",
                                   intensity=10_000, period=1))
        parent = raw.createActor(RawParent)
        lat_ours, stop_phase, lat_raw = [], [], []
        try:
            expect(raw.ask(parent, ("spawn", k), 30.0)[0], "done", "raw spawn")
            for _ in range(cfg.rfo_reps):
                first = ours.ref(f"rfobench/{names[0]}")
                mark = ours.mark()
                ts0 = time.time_ns()
                try:
                    first.ask("crash")
                except ActorCrashed:
                    pass
                last = ours.wait_for("started", f"rfobench/{names[-1]}", after=mark, timeout=60)
                lat_ours.append(ms(last.time_ns - ts0))
                stopped = ours.wait_for("terminated", f"rfobench/{names[1]}", after=mark)
                stop_phase.append(ms(stopped.time_ns - ts0))

                ts0 = time.time_ns()
                done = raw.ask(parent, ("rest_for_one",), 60.0)
                expect(done[0], "done", "raw rest_for_one")
                lat_raw.append(ms(done[2] - ts0))
        finally:
            raw.tell(parent, ActorExitRequest())
            ours.stop_tree("rfobench")
        self.rows.append(Row("4", f"rest_for_one: crash 1st of {k} → {k}th started", "ms", Stat(lat_ours),
                             Stat(lat_raw), note="base: hand-written parent, same steps"))
        self.rows.append(Row("4", f"  of which: stopping the {k - 1} later ones", "ms", Stat(stop_phase), None))

    # -- 5. dynamic children ---------------------------------------------------------------------------

    def dynamic(self) -> None:
        cfg, ours, raw = self.cfg, self.ours, self.raw
        costs: dict[int, dict[str, float]] = {}
        for n in cfg.dynamic:
            cost = costs[n] = dict.fromkeys(("ours_start", "ours_stop", "raw_start", "raw_stop"), math.nan)
            # raw: one parent creates n children one after the other, then stops them all at once.
            parent = raw.createActor(RawParent)
            try:
                progress(f"  dynamic N={n}: raw")
                t0 = time.perf_counter_ns()
                expect(raw.ask(parent, ("spawn", n), 600.0)[0], "done", "raw spawn")
                t1 = time.perf_counter_ns()
                expect(raw.ask(parent, ("stop_all",), 600.0)[0], "done", "raw stop_all")
                t2 = time.perf_counter_ns()
                cost["raw_start"], cost["raw_stop"] = ms(t1 - t0) / n, ms(t2 - t1) / n
            finally:
                raw.tell(parent, ActorExitRequest())
            # ours: start_child n times under simple_one_for_one, then stop the tree.
            name = f"pool{n}"
            progress(f"  dynamic N={n}: ours")
            ours.start_tree(supervisor(name, [worker("w", Echo, restart="temporary")],
                                       strategy="simple_one_for_one", intensity=10_000, period=1))
            errors: list[str] = []
            started = 0
            t0 = time.perf_counter_ns()
            try:
                for _ in range(n):
                    expect(ours.start_child(name, ()).status, "running", "start_child")
                    started += 1
                cost["ours_start"] = ms(time.perf_counter_ns() - t0) / n
                expect(ours.count_children(name)["active"], n, "active children")
            except (OuroactorsError, RuntimeError) as exc:
                errors.append(f"start_child failed after {started}: {exc}")
            dropped = count_in_thespian_log("Dropping TX")
            limit = 60.0  # ~5-10 ms per child; a stuck child costs its 5 s shutdown time + 5 s kill grace, per window
            progress(f"  dynamic N={n}: stop_tree (waiting at most {limit:.0f} s)")
            t1 = time.perf_counter_ns()
            try:
                ours.stop_tree(name, timeout=limit)
                cost["ours_stop"] = ms(time.perf_counter_ns() - t1) / n
            except AskTimeout:
                dropped = count_in_thespian_log("Dropping TX") - dropped
                errors.append(f"stop_tree of {n} children did not return within {limit:.0f} s; thespian dropped "
                              f"{dropped} transmits ('Dropping TX: overloaded' in $THESPLOG_FILE)")
                progress(f"  dynamic N={n}: {errors[-1]}")
            self.rows.append(Row("5", f"start_child, per child (N={n})", "ms", cost["ours_start"],
                                 cost["raw_start"], note="base: raw parent, createActor + 1st reply, sequential"))
            self.rows.append(Row("5", f"stop all, per child (N={n})", "ms", cost["ours_stop"], cost["raw_stop"],
                                 goal="completes", check=lambda _o, _r: True, error="; ".join(errors),
                                 note="stop_tree vs ActorExitRequest to all"))
        if len(costs) >= 2:
            lo, hi = min(costs), max(costs)
            for what in ("start", "stop"):
                ours_growth = costs[hi][f"ours_{what}"] / costs[lo][f"ours_{what}"]
                raw_growth = costs[hi][f"raw_{what}"] / costs[lo][f"raw_{what}"]
                self.rows.append(Row(
                    "5", f"  {what} per-child cost N={hi} / N={lo}", "×", ours_growth, raw_growth,
                    goal="ratio ≤ 1.25", check=lambda _o, r: r <= 1.25,
                    note="1.0 would be linear; ratio ≤ 1.25: ours grows no faster than raw thespian, whose parent "
                         "re-registers every open child socket in a fresh epoll on each loop turn"))

    # -- 6. actor-to-actor pushes ----------------------------------------------------------------------

    def push(self) -> None:
        cfg, ours, raw = self.cfg, self.ours, self.raw
        ours.start_tree(supervisor("pushbench", [worker("sink", SinkWorker), worker("pusher", PusherWorker)]))
        pusher = ours.ref("pushbench/pusher")
        raw_sink = raw.createActor(RawSink)
        raw_pusher = raw.createActor(RawPusher)
        n = cfg.push_n
        rates: dict[tuple[str, int], list[float]] = {}
        pids = {"ours": [ours.child_info(f"pushbench/{c}").pid for c in ("sink", "pusher")],
                "raw": [raw.ask(a, "pid", 5.0) for a in (raw_sink, raw_pusher)]}
        faults = {"ours": 0, "raw": 0}
        try:
            expect(pusher.ask(("push", 50, 1), timeout=60), 50, "warm-up push (ours)")
            expect(raw.ask(raw_pusher, ("push", raw_sink, 50, 1), 60.0), 50, "warm-up push (raw)")
            for batch, reps in ((1, cfg.push_reps_single), (cfg.push_batch, cfg.push_reps_batched)):
                progress(f"  push N={n}, {batch} per tell")
                for _ in range(reps):
                    before = minor_faults(pids["raw"])
                    t0 = time.perf_counter()
                    count = raw.ask(raw_pusher, ("push", raw_sink, n, batch), 600.0)
                    rates.setdefault(("raw", batch), []).append(n / (time.perf_counter() - t0))
                    expect(count, n, f"raw sink count (batch {batch})")
                    if batch == 1:
                        faults["raw"] += minor_faults(pids["raw"]) - before
                    before = minor_faults(pids["ours"])
                    t0 = time.perf_counter()
                    count = pusher.ask(("push", n, batch), timeout=600.0)
                    rates.setdefault(("ours", batch), []).append(n / (time.perf_counter() - t0))
                    expect(count, n, f"supervised sink count (batch {batch})")
                    if batch == 1:
                        faults["ours"] += minor_faults(pids["ours"]) - before
        finally:
            raw.tell(raw_pusher, ActorExitRequest())
            raw.tell(raw_sink, ActorExitRequest())
            ours.stop_tree("pushbench")
        b = cfg.push_batch
        single = (Stat(rates[("ours", 1)]).p50, Stat(rates[("raw", 1)]).p50)
        batched = (Stat(rates[("ours", b)]).p50, Stat(rates[("raw", b)]).p50)
        sent = n * cfg.push_reps_single
        self.rows.append(Row("6", f"push, 1 msg per tell (N={n})", "msg/s", single[0], single[1],
                             note=f"higher is better; page faults/msg: ours {faults['ours'] / sent:.1f}, "
                                  f"raw {faults['raw'] / sent:.1f}"))
        self.rows.append(Row("6", f"push, {b} msgs per tell (N={n})", "msg/s", batched[0], batched[1],
                             note="same payload as lists"))
        self.rows.append(Row("6", f"  speed-up from batching {b}", "×", batched[0] / single[0],
                             batched[1] / single[1]))


def mac_cost_us(reps: int = 20000) -> float:
    """The MAC work of one ask-sized frame, as the transport does it: frame and tag it when sent,
    check its length tag and its tag on receipt (µs, median of 5 runs; unpickling not included)."""
    import pickle

    key = _frames.frame_key(b"b" * 32)
    body = pickle.dumps(("ActorAddr-(T|:40000)", 12345))
    runs = []
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(reps):
            buffer = _frames.FrameBuffer()
            buffer.auth = (key, None)
            buffer.addMore(_frames.encode(key, body))
            if not buffer.accept():
                raise RuntimeError("a frame tagged with the right key was refused")
        runs.append((time.perf_counter_ns() - t0) / reps / 1000)
    return sorted(runs)[2]


def start_raw(workdir: Path) -> tuple[Any, int]:
    """A plain thespian multiprocTCPBase system on a free loopback port (ouroactors patches on)."""
    _patches.admin_settings.update(detached=False, stdio_path=str(workdir / "raw-admin.out"))
    port = free_port(LOOPBACK)
    log_defs = {
        "version": 1,
        "disable_existing_loggers": False,
        "handlers": {"file": {"class": "logging.FileHandler", "filename": str(workdir / "raw-actors.log")}},
        "root": {"handlers": ["file"], "level": "INFO"},
    }
    system = ThespianSystem("multiprocTCPBase", {"Admin Port": port, "Process Startup Method": "fork"},
                            logDefs=log_defs, transientUnique=True)
    return system, port


def timed_shutdown(side: str, shutdown: Callable[[], None], timings: dict[str, float]) -> None:
    """Shut one system down, timing it; a failure is reported, not raised (the other must go too)."""
    t0 = time.perf_counter()
    try:
        shutdown()
    except Exception as exc:
        progress(f"{side} shutdown raised {exc!r}; its process group is swept below")
    finally:
        timings[f"{side}_shutdown"] = ms((time.perf_counter() - t0) * 1e9)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_supervision", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes for a CI smoke run (< 60 s)")
    parser.add_argument("--only", action="append", choices=SECTIONS, help="run only these sections")
    parser.add_argument("--dynamic-sizes", type=lambda text: tuple(int(x) for x in text.split(",")),
                        help="N values of the dynamic-children section, e.g. 250,500,1000")
    parser.add_argument("--plain", action="store_true", help="plain-text table even if rich is installed")
    parser.add_argument("--json", type=Path, help="also write every sample to this JSON file")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir with logs and events")
    parser.add_argument("--strict", action="store_true", help="exit 1 if a goal is missed")
    args = parser.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    if args.dynamic_sizes:
        cfg = dataclasses.replace(cfg, dynamic=args.dynamic_sizes)
    sections = args.only or list(SECTIONS)

    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="ouroactors-bench-"))
    os.environ["THESPLOG_FILE"] = str(workdir / "thespian.log")
    os.environ["THESPLOG_THRESHOLD"] = "WARNING"
    # thespian read THESPLOG_FILE_MAXSIZE (50 KB) when imported; no rotation, so its warnings can be counted
    level, primary, _size = thespian_utilis._thesplog_control_settings
    thespian_utilis._thesplog_control_settings = (level, primary, 64 * 1024 * 1024)
    os.environ["OUROACTORS_BIND_HOST"] = LOOPBACK
    os.environ["THESPIAN_BASE_IPADDR"] = LOOPBACK
    _patches.install()  # raw thespian gets the same loopback transport as ouroactors

    raw: Any = None
    ours: ActorSystem | None = None
    raw_pgid: int | None = None
    raw_port: int | None = None
    bench: Bench | None = None
    timings: dict[str, float] = {}
    failed = False
    try:
        t0 = time.perf_counter()
        raw, raw_port = start_raw(workdir)
        probe = raw.createActor(RawEcho)
        raw_pgid = raw.ask(probe, "pgid", 10.0)
        raw.tell(probe, ActorExitRequest())
        timings["raw_start"] = ms((time.perf_counter() - t0) * 1e9)
        t0 = time.perf_counter()
        ours = ActorSystem.start("multiproc", data_dir=workdir / "ours")
        timings["ours_start"] = ms((time.perf_counter() - t0) * 1e9)
        progress(f"systems up: raw admin :{raw_port} (pgid {raw_pgid}), ours :{ours.admin_port} "
                 f"(pgid {ours.pgid}); logs in {workdir}")
        bench = Bench(ours, raw, cfg)
        for section in SECTIONS:
            if section in sections:
                progress(f"section {section}")
                getattr(bench, section)()
    except BaseException:
        failed = True
        raise
    finally:
        progress("shutting down")
        if ours is not None:
            timed_shutdown("ours", ours.shutdown, timings)
        if raw is not None:
            timed_shutdown("raw", raw.shutdown, timings)
        killed = {pgid: sweep_group(pgid) for pgid in (raw_pgid, ours.pgid if ours else None) if pgid}
        ports = [p for p in (raw_port, ours.admin_port if ours else None) if p]
        still_listening = listening_ports(ports)
        leftovers = {pgid: pids for pgid, pids in killed.items() if pids}
        if failed and args.keep is False:
            print(f"benchmark failed; logs kept in {workdir}", file=sys.stderr)

    rows = bench.rows if bench is not None else []
    rows.insert(0, Row("0", "system start", "ms", timings.get("ours_start"), timings.get("raw_start")))
    shutdown_note = "ours stops trees in order, then thespian"
    if any(row.error for row in rows):
        shutdown_note += "; after a FAILED stop below, thespian's shutdown waits out its 10 s limit"
    rows.insert(1, Row("0", "system shutdown", "ms", timings.get("ours_shutdown"), timings.get("raw_shutdown"),
                       note=shutdown_note))
    elapsed = time.monotonic() - started
    title = (f"ouroactors vs raw thespian — multiprocTCPBase, {'quick' if args.quick else 'full'} run, "
             f"{os.cpu_count()} CPUs, {elapsed:.0f} s")
    if leftovers or still_listening:
        cleanup = f"CLEANUP PROBLEM: had to kill {leftovers}; still listening: {still_listening}"
    else:
        cleanup = f"cleanup: no process left in process groups {sorted(killed)}, admin ports {ports} closed"
    footer = ["ratio = ours / baseline of the p50 (or of the value); for msg/s higher is better.", cleanup]
    print_table(rows, title, plain=args.plain, footer=footer)
    if args.json:
        args.json.write_text(json.dumps({"config": dataclasses.asdict(cfg), "elapsed_s": elapsed,
                                         "rows": [r.to_json() for r in rows]}, indent=1, default=str))
    if args.keep:
        print(f"logs and events kept in {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    missed = [r for r in rows if r.verdict == "MISSED"]
    if leftovers or still_listening:
        return 2
    return 1 if (args.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
