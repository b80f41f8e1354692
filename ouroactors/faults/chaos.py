"""Seeded chaos: random kills, storage faults and delays drawn from a seed, every invariant checked.

::

    with Campaign(workload_tree(), WorkloadConfig()) as campaign:
        for result in campaign.run(range(200)):
            for violation in result.violations:
                print(result.seed, violation)
                print(result.plan_toml())           # arm it by hand: ouroactors faults arm FILE

**Same seed → same plan.** :func:`plan_for_seed` (:mod:`.chaos_plans`) draws from
``random.Random(seed)`` over a sorted, static list of candidate points (the registered fault
points plus ``message.<path>`` of every declared worker) and kill targets (the declared workers),
so it depends only on the seed and the tree. The workload's interleaving is deterministic too
(:mod:`.workload`), so a seed replays the same faults at the same places; what timing still varies
(heartbeats, how long a restart takes) can change what a replay sees, never the plan.

**One system per campaign.** Starting a system costs about as much as a run, so a campaign drives
every seed on one :class:`~.runner.Bench`: runs are independent (fresh session, effect and key
names per seed, a workspace root per run), the plan is armed before and disarmed after each run,
a tree that ended by escalation is started again, and every unsettled entry is recovered and
reconciled before the checks. On the multiproc base kills are real SIGKILLs of real processes;
on the simple base the system is simulated (one process on virtual time) and a kill ends one
actor as a SIGKILL ends its process: the supervisor sees ``killed``, and a seed replays byte for
byte (:mod:`ouroactors.system._simulation`). Only ``exit`` rules (``os._exit`` of the process) need
the multiproc base.

**Simulated seeds kill more.** The simulated recording is deterministic, so its hit counts aim the
kills (every drawn kill lands), and every simulated seed adds one death at a crash site drawn
uniformly among all the recording's hits (``plan_for_seed(deaths=1)``, a stream of its own: the
other rules are the seed's usual draws). A death costs a simulated system no process, and a
restart bug only shows when something dies mid-effect: the planted restart-bug ledger
(``tests/faults/planted_restart.py``) is caught by about a quarter of the seeds or more this way.
"""

from __future__ import annotations

import logging
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import faults as fault_points
from ..core.faults import FaultAction, FaultPlan, FaultRule
from ..supervision.specs import ChildSpec, resolve_actor
from .chaos_plans import MAX_RULES as MAX_RULES  # re-exported: the plans' home is .chaos_plans
from .chaos_plans import STORAGE_POINTS as STORAGE_POINTS
from .chaos_plans import check_plan, parse_seed, plan_for_seed, plan_to_toml
from .checks import Violation
from .runner import Bench, RunResult, static_workers
from .workload import Grant, WorkloadConfig
from .world import World

log = logging.getLogger("ouroactors.faults")
FRESH_EVERY = 50  # seeds per simulated system (see Campaign.fresh_every)
DEATHS = 1  # simulated deaths added to every simulated seed's plan (see plan_for_seed)


class PlanWarning(UserWarning):
    """A plan names a point this tree never reaches (likely a typo); the message lists the known ones."""


def _warn(message: str) -> None:
    warnings.warn(message, PlanWarning, stacklevel=3)


@dataclass
class SeedResult:
    """One seed of a campaign: its plan, what happened, what broke."""

    seed: int
    plan: FaultPlan
    run: RunResult | None = None
    error: str | None = None  # the harness could not run or check this seed
    duration_s: float = 0.0
    replay: str = ""  # a command line that replays this seed

    @property
    def violations(self) -> list[Violation]:
        return self.run.violations if self.run is not None else []

    @property
    def ok(self) -> bool:
        return self.error is None and not self.violations

    def fired(self) -> list[str]:
        """``action@point`` of every firing during the run."""
        if self.run is None:
            return []
        return [f"{f.get('action')}@{f.get('point')}" for f in self.run.firings]

    def plan_toml(self) -> str:
        comments = [f"chaos seed {self.seed}"] + ([f"replay: {self.replay}"] if self.replay else [])
        return plan_to_toml(self.plan, comments)


@dataclass
class CampaignStats:
    seeds: int = 0
    violations: int = 0
    failing_seeds: list[int] = field(default_factory=list)
    errors: int = 0
    kills: int = 0
    firings: int = 0
    escalations: int = 0
    anomalies: list[str] = field(default_factory=list)  # "seed N: …" harness interventions
    statuses: dict[str, int] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def add(self, result: SeedResult) -> None:
        self.seeds += 1
        self.seconds += result.duration_s
        if result.error:
            self.errors += 1
        if result.violations:
            self.violations += len(result.violations)
            self.failing_seeds.append(result.seed)
        if result.run is not None:
            self.kills += len(result.run.killed)
            self.firings += len(result.run.firings)
            self.escalations += int(result.run.escalated)
            self.anomalies += [f"seed {result.seed}: {note}" for note in result.run.anomalies]
            for name, count in result.run.statuses.items():
                self.statuses[name] = self.statuses.get(name, 0) + count
            for name, count in result.run.record.outcomes().items():
                self.outcomes[name] = self.outcomes.get(name, 0) + count

    @property
    def per_minute(self) -> float:
        return 60.0 * self.seeds / self.seconds if self.seconds else 0.0


class Campaign:
    """Seeds run one after another on one :class:`~.runner.Bench`. Use as a context manager."""

    def __init__(self, tree: ChildSpec, config: WorkloadConfig, *, base: str = "multiproc",
                 data_dir: str | Path | None = None, world: World | None = None, grant: Grant | None = None,
                 extra_points: Iterable[str] = (), replay_command: str = "",
                 warn: Callable[[str], None] = _warn, raises: bool = False) -> None:
        self.bench = Bench(tree, config, base=base, data_dir=data_dir, world=world, grant=grant)
        self._bench_args = (tree, config, base, data_dir, grant)
        # A simulated system's state grows with every seed, and restarts re-read it (leases, ledger
        # recovery): a fresh system every so many seeds keeps a seed's cost flat. Deterministic too.
        self.fresh_every: int | None = FRESH_EVERY if base == "simple" else None
        self._fresh_count = 0
        self._seeds_on_bench = 0
        self.warn = warn
        self.kills = True  # multiproc: SIGKILL; simple: the simulation's process death (same draws)
        self.exits = base == "multiproc"  # an exit rule ends the whole process
        self.raises = raises  # seeds draw raise rules too (plan_for_seed: other plans than without)
        self.extra_points = tuple(extra_points)
        self.replay_command = replay_command
        self.stats = CampaignStats()
        self._points: list[str] | None = None
        self._hits: dict[str, int] = {}

    def __enter__(self) -> Campaign:
        self.bench.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bench.close()

    def points(self) -> list[str]:
        """The candidate points of seeded plans for this tree and workload (sorted).

        ``message.<path>`` of every declared worker, the registered points the actor classes' modules
        declare (module constants, e.g. ``workspace.owner_died``), and the registered points a
        recorded crash-free run reaches (e.g. ``storage.before_commit``). It depends on the tree and
        the workload only — not on which other modules this process happened to import — so the same
        seed gives the same plan in a test and in ``ouroactors chaos``. Needs the bench started.
        """
        if self._points is None:
            record = self.bench.run("points", FaultPlan((FaultRule("*", FaultAction.DELAY),)))
            reached = {f["point"] for f in record.firings if not str(f["point"]).startswith("message.")}
            self._points = sorted(reached | set(_module_points(self.bench.tree)) | self._message_points()
                                  | set(self.extra_points))
            if self.bench.base == "simple":  # a simulated recording is deterministic: its counts may aim kills
                for firing in record.firings:
                    self._hits[firing["point"]] = self._hits.get(firing["point"], 0) + 1
        return list(self._points)

    def hits(self) -> dict[str, int] | None:
        """Hits per point in the recording, where it is deterministic (the simulated base); else None."""
        self.points()
        return dict(self._hits) if self.bench.base == "simple" else None

    def declared_points(self) -> list[str]:
        """Every point a plan for this tree may name (registered ones and message points); no system needed."""
        return sorted(set(fault_points.known_points()) | self._message_points() | set(self.extra_points))

    def _message_points(self) -> set[str]:
        return {f"message.{p}" for p in self.bench.worker_paths()}

    def kill_targets(self) -> list[str]:
        return self.bench.worker_paths()

    def plan(self, seed: int) -> FaultPlan:
        hits = self.hits()
        return plan_for_seed(seed, self.points(), kill_targets=self.kill_targets(), kills=self.kills,
                             hits=hits, deaths=DEATHS if hits is not None and self.kills else 0, raises=self.raises)

    def run_seed(self, seed: int, plan: FaultPlan | None = None) -> SeedResult:
        """Run one seed (or an explicit ``plan``) and check it; a harness failure is an error, not ok."""
        seed = parse_seed(seed)
        if plan is None:
            plan = self.plan(seed)
        else:
            if not isinstance(plan, FaultPlan):
                raise TypeError(f"plan: expected a FaultPlan, got {type(plan).__name__}")
            for warning in check_plan(plan, self.declared_points()):
                self.warn(warning)
        if not self.exits and any(r.action is FaultAction.EXIT for r in plan.rules):
            raise ValueError("exit rules end the whole process (every actor of a simple base): use the "
                             "multiproc base, or a kill rule")
        began = time.monotonic()
        replay = self.replay_command.format(seed=seed) if self.replay_command else ""
        try:
            self._refresh()
            run = self.bench.run(f"seed{seed}", plan)
            result = SeedResult(seed, plan, run, duration_s=time.monotonic() - began, replay=replay)
        except Exception as exc:
            log.warning("seed %s: the harness failed", seed, exc_info=True)  # where: for whoever reads the log
            result = SeedResult(seed, plan, error=f"{type(exc).__name__}: {exc}",
                                duration_s=time.monotonic() - began, replay=replay)
            try:
                self.bench.arm(None)
            except Exception:
                pass  # the next seed's ensure_ready reports what is still wrong
        self.stats.add(result)
        return result

    def run(self, seeds: Iterable[int]) -> Iterator[SeedResult]:
        for seed in seeds:
            yield self.run_seed(seed)

    def _refresh(self) -> None:
        """Every ``fresh_every`` seeds, go on with a fresh system (and data dir) on the same world."""
        self._seeds_on_bench += 1
        if self.fresh_every is None or self._seeds_on_bench <= self.fresh_every:
            return
        tree, config, base, data_dir, grant = self._bench_args
        self._fresh_count += 1
        old = self.bench
        where = None if data_dir is None else Path(data_dir) / f"fresh{self._fresh_count}"
        owned, old._own_world = old._own_world, False  # the world outlives the old system
        old.close()
        fresh = Bench(tree, config, base=base, data_dir=where, world=old.world, grant=grant)
        self.bench = fresh
        try:
            fresh.start()  # a world it was given: started already, not started again
        finally:
            fresh._own_world = owned  # ... and stopped with this one (by the campaign's exit at the latest)
        self._seeds_on_bench = 1


def campaign(tree: ChildSpec, config: WorkloadConfig, seeds: Iterable[int], **kwargs: Any) -> Iterator[SeedResult]:
    """Run ``seeds`` on one system, yielding each :class:`SeedResult` as it finishes."""
    with Campaign(tree, config, **kwargs) as running:
        yield from running.run(seeds)


def declared_points(tree: ChildSpec) -> list[str]:
    """Every point a plan for ``tree`` may name: registered points and its workers' message points."""
    return sorted(set(fault_points.known_points()) | {f"message.{p}" for p in static_workers(tree)})


def _module_points(tree: ChildSpec) -> list[str]:
    """Registered points declared as constants by the modules of the tree's actor classes (and bases)."""
    known = fault_points.known_points()
    found: set[str] = set()

    def visit(node: ChildSpec) -> None:
        for child in node.children or ():
            if child.is_supervisor:
                visit(child)
                continue
            try:
                cls = resolve_actor(child.actor or "")
            except ValueError:
                continue
            for klass in cls.__mro__:
                module = sys.modules.get(klass.__module__)
                if module is None or klass.__module__.startswith(("ouroactors.supervision", "thespian")):
                    continue
                found.update(v for v in vars(module).values() if isinstance(v, str) and v in known)

    visit(tree)
    return sorted(found)
