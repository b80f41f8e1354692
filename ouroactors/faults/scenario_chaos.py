"""Seeded chaos on your own scenario: each seed's random kills, storage faults and delays, then your check.

The companion of :mod:`.scenario` (one crash per run, at every site in turn): here each run arms one seed's plan —
drawn by :func:`~.chaos_plans.plan_for_seed` from the points the scenario's recording reached (every
``message.<path>`` a worker handled, every ``faults.point`` its code passed, storage points if your tree has the
storage authority) with kills aimed at the tree's workers — in every worker, then runs ``drive(system)``, lets the
tree settle and runs ``check(system)``::

    campaign = chaos_scenario("trees/app.toml", drive, check, seeds=200, base="simple")
    for row in campaign.failed:
        print(row.seed, row.violations, plan_to_toml(row.plan))

Same seed, same recording → same plan; ``seed=S`` (a one-seed campaign) replays one. On the simulated base a run is
deterministic end to end and the plan's kills are aimed among the recording's hits (and one more *death* per seed at
a hit drawn uniformly: what restart bugs hide behind); on multiproc a kill's ``nth`` is drawn blind (1-8) since hit
counts of timer-driven code vary between runs. On multiproc, children started during ``drive`` (a pool's
``start_child``) are armed at their first start by their supervisor (``arm_faults(..., children=True)``) and a
restart runs free, so a plan that killed a child does not kill it again at every restart (the simulated base arms
its one process, every actor in it). A row's outcome: ``ok``,
``VIOLATION`` (check, the tree ending, or not settling) or ``error`` (the harness).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..core.faults import FaultPlan, validate_plan
from ..supervision.specs import ChildSpec
from .bench_trees import static_workers
from .chaos_plans import parse_seed, plan_for_seed
from .scenario import (
    DRIVE_TIMEOUT_S,
    Check,
    Drive,
    ScenarioRow,
    ScenarioRunner,
    check_timeouts,
    scenario_tree,
    work_dir,
)


@dataclass
class SeedRow:
    """One seed's run: its plan, what fired, and the run's outcome."""

    seed: int
    plan: FaultPlan
    run: ScenarioRow
    fired: list[tuple[str, str, str]] = field(default_factory=list)  # (actor, point, action) of each firing

    @property
    def outcome(self) -> str:
        return self.run.outcome

    @property
    def violations(self) -> list[str]:
        return self.run.violations


@dataclass
class ScenarioCampaign:
    tree: str
    base: str
    baseline: ScenarioRow
    rows: list[SeedRow]
    duration_s: float = 0.0

    @property
    def failed(self) -> list[SeedRow]:
        """The seeds whose run violated or could not run."""
        return [row for row in self.rows if row.outcome != "ok"]

    def summary(self) -> dict[str, int]:
        return dict(Counter(row.outcome for row in self.rows))


def chaos_scenario(tree: ChildSpec | str | os.PathLike[str], drive: Drive, check: Check | None = None, *,
                   seeds: int | Iterable[int] = 100, base: str | None = None, raises: bool = False,
                   plan: FaultPlan | None = None, data_dir: str | os.PathLike[str] | None = None,
                   settle_timeout: float = 20.0, drive_timeout: float = DRIVE_TIMEOUT_S,
                   on_row: Callable[[SeedRow], None] | None = None,
                   warn: Callable[[str], None] | None = None) -> ScenarioCampaign:
    """Record ``drive`` on ``tree`` once, then run it under each seed's plan and ``check`` after each.

    ``seeds``: how many (0 … n-1) or which. ``raises``: the draws include ``raise`` rules (an exception at a point,
    in the code that reaches it) — every seed's plan then differs from the one it has without. ``plan``: run this
    plan once instead of drawing any (a printed plan you edited; its row's seed is the first of ``seeds``).
    ``data_dir`` keeps each run's data dir below it (``record``, ``seed-S``); by default a temp dir, removed after.
    ``settle_timeout``, ``drive_timeout``: as :func:`~.scenario.enumerate_scenario`'s. ``warn`` gets a warning per
    rule of ``plan`` whose point matches none the recording reached nor any declared one (a misspelt point: the
    plan would run and fire nowhere), naming the nearest.
    """
    if not callable(drive) or (check is not None and not callable(check)):
        raise TypeError("drive and check must be callables taking the ActorSystem")
    check_timeouts(settle_timeout=settle_timeout, drive_timeout=drive_timeout)
    chosen = [parse_seed(s) for s in (range(seeds) if isinstance(seeds, int) else seeds)]
    spec, base = scenario_tree(tree, base)
    began = time.monotonic()
    with work_dir(data_dir, "ouroactors-chaos-") as root:
        runner = ScenarioRunner(spec, drive, check, base, root, settle_timeout, drive_timeout)
        baseline, firings = runner.record()
        if baseline.outcome != "ok" or not firings:
            if not firings and baseline.outcome == "ok":
                baseline.outcome, baseline.violations = "VIOLATION", ["the scenario reached no fault point: "
                                                                      "nothing to draw a plan from"]
            return ScenarioCampaign(spec.id, base, baseline, [], time.monotonic() - began)
        simulated = base == "simple"
        hits = Counter(str(f["point"]) for f in firings)
        if plan is not None and warn is not None:
            for warning in validate_plan(plan, hits):  # as `faults arm` warns: the nearest point named
                warn(warning)
        targets = static_workers(spec)
        rows = []
        for seed in chosen[:1] if plan is not None else chosen:
            drawn = plan if plan is not None else plan_for_seed(
                seed, sorted(hits), kill_targets=targets, hits=hits if simulated else None,
                deaths=1 if simulated else 0, raises=raises)
            run, fired = runner.run_plan(f"seed-{seed}", seed, drawn)
            row = SeedRow(seed, drawn, run, [(str(f["path"]), str(f["point"]), str(f.get("action")))
                                             for f in fired])
            rows.append(row)
            if on_row is not None:
                on_row(row)
        return ScenarioCampaign(spec.id, base, baseline, rows, time.monotonic() - began)


def replay_hint(row: SeedRow, tree: str, drive: str, check: str | None, base: str, raises: bool,
                drive_timeout: float = DRIVE_TIMEOUT_S) -> str:
    """The command that runs ``row``'s seed again (the same recording gives the same plan)."""
    return " ".join(["ouroactors chaos", tree, "--scenario", drive, *(["--check", check] if check else []),
                     "--seed", str(row.seed), *(["--base", base] if base != "multiproc" else []),
                     *(["--raises"] if raises else []),
                     *(["--drive-timeout", f"{drive_timeout:g}"] if drive_timeout != DRIVE_TIMEOUT_S else [])])


__all__ = ["ScenarioCampaign", "SeedRow", "chaos_scenario", "replay_hint"]
