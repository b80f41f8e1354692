"""Fault-injection benchmark: what unarmed points cost, and how fast chaos campaigns run.

    python -m benchmarks.bench_faults [--quick] [--json FILE]

Rows (same run, same machine):

* one unarmed ``faults.point()`` call vs a bare Python call of a function that returns None;
* how many points a durable effect (record_started + record_settled) passes, counted on a
  simulated system with a record-everything plan armed;
* the overhead of unarmed points on the ledger's durable effect (goal < 2 %): measured directly
  (effect latency with the points as shipped vs with ``faults.point`` replaced by a no-op in every
  actor process, interleaved A/B rounds) and estimated (points per effect × cost per point ÷
  effect latency);
* chaos schedules per minute: on real processes (multiproc, kills) and on the simulated simple
  base (simulated kills: an actor's death, not the process's), each against the same workload run
  with no plan armed (goal for the simulated base: ≥ 1,000 seeds/min);
* the planted restart bug (``tests/faults/planted_restart.py``: recovery presumes unsettled entries
  failed): the share of simulated seeds that catch it (goal ≥ 25 %) against the same seeds drawn
  without kills, and how fast those seeds run;
* your own scenario (``faults.chaos_scenario`` / ``enumerate_scenario`` on a store that rewrites its file in place):
  seeds and sites per minute on both bases, and the share of seeds that catch the torn write.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ouroactors import ActorSystem, supervisor, worker
from ouroactors.authorities.asking import StampedRef
from ouroactors.authorities.ledger.actor import RecordSettled, RecordStarted
from ouroactors.authorities.ledger.domain import StartRequest, fingerprint
from ouroactors.core import faults
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule
from ouroactors.faults.chaos import Campaign
from ouroactors.faults.runner import workload_tree
from ouroactors.faults.workload import WorkloadConfig

from ._common import Row, Stat, bench_main, progress

TREE = supervisor("agent", strategy="rest_for_one", children=[
    worker("storage", "ouroactors.authorities.storage.actor:Storage"),
    worker("ledger", "ouroactors.authorities.ledger.actor:Ledger"),
])
CONFIG = WorkloadConfig(sessions=2, effects=2, refuse_every=3, ask_timeout=0.4, lease_wait=3.0, op_deadline=10.0)
EVERYWHERE = FaultPlan((FaultRule("*", FaultAction.DELAY),))


def request(tag: str, i: int) -> StartRequest:
    return StartRequest(effect_id=f"{tag}-{i}", kind="example", idempotency_key=f"{tag}-{i}",
                        fingerprint=fingerprint("example", {"i": i}), principal=tag, session_id=tag)


def effect(ledger: Any, tag: str, i: int) -> None:
    ledger.ask(RecordStarted(request(tag, i)))
    ledger.ask(RecordSettled(f"{tag}-{i}", "ok"))


def timed_ms(fn: Callable[[], Any]) -> float:
    began = time.perf_counter()
    fn()
    return (time.perf_counter() - began) * 1000.0


def point_cost_ns(repeats: int, number: int) -> tuple[Stat, Stat]:
    faults.disarm()

    def bare(name: str) -> None:
        return None

    ours = Stat([min(timeit.repeat(lambda: faults.point("storage.before_commit"), number=number, repeat=3))
                 / number * 1e9 for _ in range(repeats)])
    base = Stat([min(timeit.repeat(lambda: bare("storage.before_commit"), number=number, repeat=3))
                 / number * 1e9 for _ in range(repeats)])
    return ours, base


def points_per_effect(work: Path) -> int:
    system = ActorSystem.start("simple", work / "count", simulated=True)
    try:
        system.start_tree(TREE)
        ledger = StampedRef(system, "agent/ledger")
        effect(ledger, "warm", 0)
        system.arm_faults(None, EVERYWHERE)
        effect(ledger, "count", 0)
        system.arm_faults(None, None)
        return len(faults.firings())
    finally:
        system.shutdown()


def start_system(work: Path, name: str, stub: bool) -> ActorSystem:
    """A multiproc system running TREE; ``stub`` compiles the points out (its processes fork with it)."""
    original = faults.point
    if stub:
        faults.point = lambda name: None  # type: ignore[assignment]
    try:
        system = ActorSystem.start("multiproc", work / name)
    finally:
        faults.point = original
    system.start_tree(TREE)
    return system


def effect_latency_ab(work: Path, n: int, rounds: int) -> tuple[Stat, Stat]:
    """Effects alternate between a system with the points as shipped and one without them, so the
    machine's drift hits both alike."""
    shipped, stubbed = Stat(), Stat()
    for r in range(rounds):
        with_points = start_system(work, f"shipped{r}", stub=False)
        without = start_system(work, f"stubbed{r}", stub=True)
        try:
            a, b = StampedRef(with_points, "agent/ledger"), StampedRef(without, "agent/ledger")
            for i in range(20):
                effect(a, "warm", i)
                effect(b, "warm", i)
            for i in range(n):
                tag = f"r{r}"
                shipped.samples.append(timed_ms(lambda i=i, a=a, tag=tag: effect(a, tag, i)))
                stubbed.samples.append(timed_ms(lambda i=i, b=b, tag=tag: effect(b, tag, i)))
        finally:
            with_points.shutdown()
            without.shutdown()
    return shipped, stubbed


def schedules_per_minute(base: str, seeds: int, work: Path, plan: bool) -> float:
    with Campaign(workload_tree(), CONFIG, base=base, data_dir=work) as campaign:
        campaign.points()  # the recording run is start-up, not a schedule
        began = time.monotonic()
        for seed in range(seeds):
            if plan:
                campaign.run_seed(seed)
            else:
                campaign.bench.run(f"calm{seed}")
        return 60.0 * seeds / (time.monotonic() - began)


PLANTED_CONFIG = WorkloadConfig(sessions=4, effects=2, ask_timeout=0.4, lease_wait=3.0, op_deadline=10.0)


def planted_catch_rate(seeds: int, work: Path, kills: bool) -> tuple[float, float, int]:
    """(share of seeds catching the planted restart bug, seeds/min, simulated deaths) on the simulated base."""
    from tests.faults.planted_restart import PRESUMES_FAILED_LEDGER

    with Campaign(workload_tree(ledger=PRESUMES_FAILED_LEDGER), PLANTED_CONFIG, base="simple",
                  data_dir=work) as campaign:
        campaign.kills = kills
        campaign.points()
        began = time.monotonic()
        caught = sum(1 for r in campaign.run(range(seeds))
                     if any(v.invariant in ("ambiguous-not-failed", "outcome-diverged") for v in r.violations))
        rate = 60.0 * seeds / (time.monotonic() - began)
        return caught / seeds, rate, campaign.stats.kills


def scenario_rates(base: str, seeds: int) -> tuple[float, float, float, float]:
    """Your own scenario (``tests/faults/scenario_app.py``'s store that rewrites its file in place; 3 puts, then a
    check): chaos seeds/min, the same runs with an empty plan per min, the share of seeds that catch the torn write,
    and crash-enumeration sites/min — on ``base``, each run a fresh system (its start and stop counted)."""
    from ouroactors.faults import chaos_scenario, enumerate_scenario
    from tests.faults.test_scenario_enumeration import Scenario

    tree = supervisor("app", [worker("store", "tests.faults.scenario_app:TornStore", kwargs={"path": "s.json"})],
                      intensity=20)
    scenario = Scenario()
    seeded = chaos_scenario(tree, scenario.drive, scenario.check, seeds=seeds, base=base).rows
    calm = [row for i in range(min(seeds, 10))
            for row in chaos_scenario(tree, scenario.drive, scenario.check, seeds=[i], base=base,
                                      plan=FaultPlan(())).rows]
    sites = enumerate_scenario(tree, scenario.drive, scenario.check, base=base).rows

    def per_minute(seconds: list[float]) -> float:
        return 60.0 * len(seconds) / sum(seconds) if seconds and sum(seconds) > 0 else float("nan")

    caught = sum(1 for row in seeded if row.outcome == "VIOLATION") / max(len(seeded), 1)
    return (per_minute([r.run.duration_s for r in seeded]), per_minute([r.run.duration_s for r in calm]), caught,
            per_minute([r.duration_s for r in sites]))


def run(quick: bool) -> list[Row]:
    rows: list[Row] = []
    work = Path(tempfile.mkdtemp(prefix="bench-faults-"))
    os.environ.setdefault("THESPLOG_FILE", str(work / "thespian.log"))
    try:
        progress("unarmed point")
        ours, bare = point_cost_ns(5 if quick else 15, 200_000)
        rows.append(Row("points", "one unarmed faults.point()", "ns", ours, bare, "report", None,
                        "baseline: a call of a function returning None"))

        progress("points per effect")
        per_effect = points_per_effect(work)
        rows.append(Row("points", "points a durable effect passes", "points", float(per_effect), None, "report",
                        None, "record_started + record_settled, every actor, counted by a plan armed on '*'"))

        progress("ledger effect, points as shipped vs compiled out")
        n = 100 if quick else 300
        rounds = 2 if quick else 3
        shipped, stubbed = effect_latency_ab(work, n, rounds)
        rows.append(Row("points", "ledger effect: points as shipped vs none", "ms", shipped, stubbed, "< 2 %",
                        lambda _o, r: r < 1.02, "measured: effects alternate between two systems, with and without"))
        estimate = per_effect * ours.p50 / (stubbed.p50 * 1e6) * 100
        rows.append(Row("points", "estimated overhead on a ledger effect", "%", estimate, None, "< 2 %",
                        lambda o, _r: o < 2.0, "points × ns per point ÷ effect latency"))

        progress("chaos campaigns")
        seeds = 15 if quick else 60
        chaos = schedules_per_minute("multiproc", seeds, work / "chaos-mp", plan=True)
        calm = schedules_per_minute("multiproc", seeds, work / "calm-mp", plan=False)
        rows.append(Row("chaos", "schedules/min, multiproc (real kills)", "/min", chaos, calm, "report", None,
                        "baseline: the same workload runs, no plan"))
        sim_seeds = 60 if quick else 200
        sim = schedules_per_minute("simple", sim_seeds, work / "chaos-sim", plan=True)
        sim_calm = schedules_per_minute("simple", sim_seeds, work / "calm-sim", plan=False)
        rows.append(Row("chaos", "schedules/min, simulated simple base (simulated kills)", "/min", sim, sim_calm,
                        "≥ 1,000/min", lambda o, _r: o >= 1000,
                        "baseline: the same workload runs, no plan; deterministic event log"))

        progress("planted restart bug, simulated")
        planted_seeds = 40 if quick else 200
        share, planted_rate, deaths = planted_catch_rate(planted_seeds, work / "planted-sim", kills=True)
        calm_share, _, _ = planted_catch_rate(planted_seeds, work / "planted-calm", kills=False)
        rows.append(Row("chaos", f"planted restart bug: simulated seeds that catch it (of {planted_seeds})", "%",
                        100 * share, 100 * calm_share, "≥ 25 %", lambda o, _r: o >= 25.0,
                        "baseline: the same seeds drawn without kills (the simple base before)"))
        rows.append(Row("chaos", "planted restart bug: simulated seeds/min (4 sessions × 2 effects)", "/min",
                        planted_rate, None, "report", None,
                        f"{deaths} simulated deaths in {planted_seeds} seeds"))

        progress("your own scenario: chaos seeds and enumeration sites")
        for base, count in (("simple", 60 if quick else 200), ("multiproc", 10 if quick else 30)):
            seeded, calm_rate, caught, sites = scenario_rates(base, count)
            rows.append(Row("scenario", f"chaos --scenario seeds/min, {base} (torn-write store)", "/min", seeded,
                            calm_rate, "report", None, "baseline: the same runs with an empty plan"))
            rows.append(Row("scenario", f"seeds that catch the torn write, {base} (of {count})", "%", 100 * caught,
                            None, "report"))
            rows.append(Row("scenario", f"enumerate-scenario sites/min, {base}", "/min", sites, None, "report",
                            None, "each site a fresh system: start, drive, crash, settle, check, stop"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return rows


def main() -> None:
    bench_main(run, "ouroactors fault injection: unarmed cost and campaign speed (same run)", __doc__)


if __name__ == "__main__":
    main()
