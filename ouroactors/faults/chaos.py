"""Seeded chaos: random kills, storage faults and delays drawn from a seed, every invariant checked.

::

    with Campaign(workload_tree(), WorkloadConfig()) as campaign:
        for result in campaign.run(range(200)):
            for violation in result.violations:
                print(result.seed, violation)
                print(result.plan_toml())           # arm it by hand: ouroactors faults arm FILE

**Same seed → same plan.** :func:`plan_for_seed` draws from ``random.Random(seed)`` over a sorted,
static list of candidate points (the registered fault points plus ``message.<path>`` of every
declared worker) and kill targets (the declared workers), so it depends only on the seed and the
tree. The workload's interleaving is deterministic too (:mod:`.workload`), so a seed replays the
same faults at the same places; what timing still varies (heartbeats, how long a restart takes)
can change what a replay sees, never the plan.

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

import json
import random
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import faults as fault_points
from ..core.faults import FaultAction, FaultPlan, FaultRule
from ..supervision.specs import ChildSpec, resolve_actor
from .checks import Violation
from .runner import Bench, RunResult, static_workers
from .workload import Grant, WorkloadConfig
from .world import World

STORAGE_POINTS = ("storage.before_commit", "storage.after_commit")
MAX_RULES = 3
FRESH_EVERY = 50  # seeds per simulated system (see Campaign.fresh_every)
DEATHS = 1  # simulated deaths added to every simulated seed's plan (see plan_for_seed)


class PlanWarning(UserWarning):
    """A plan names a point this tree never reaches (likely a typo); the message lists the known ones."""


def _warn(message: str) -> None:
    warnings.warn(message, PlanWarning, stacklevel=3)


def parse_seed(value: Any) -> int:
    """A seed is an integer (``"42"`` is accepted); anything else is a clear error."""
    if isinstance(value, bool):
        raise ValueError(f"seed: must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text, 10)
        except ValueError:
            pass
    raise ValueError(f"seed: must be an integer, got {value!r}")


def _weight(point: str) -> int:
    if point.startswith("storage."):
        return 4
    if point.startswith("message.") or point.startswith("workspace."):
        return 2
    return 1


def plan_for_seed(seed: int | str, known_points: Iterable[str] | Mapping[str, str], *,
                  kill_targets: Sequence[str] = (), kills: bool = True, max_rules: int = MAX_RULES,
                  hits: Mapping[str, int] | None = None, deaths: int = 0) -> FaultPlan:
    """The fault plan of ``seed``: 1 to ``max_rules`` rules of kill, storage fault or delay.

    Deterministic: the same seed, points and targets give the same plan (points and targets are
    sorted first, so their order does not matter). ``kills=False`` draws no kill (both bases kill:
    the simple base's simulation ends one actor as a SIGKILL ends its process).

    ``hits`` (point → how many times a crash-free run reaches it) aims kills where they land: a
    kill's point is drawn among the points reached and its ``nth`` among their hits, instead of
    1–8 blindly. Only a deterministic recording may be passed (the simulated base's): on
    multiproc the counts of timer-driven points vary between runs, and the plan must not.

    ``deaths`` (needs ``hits``) appends that many more kills, each at a crash site drawn uniformly
    among every hit of the recording — the death of whichever actor reaches it — from a stream of
    its own: the rules before them are exactly the plan without deaths. The simulated base draws
    one per seed: a death costs it no process, and deaths are the faults restart bugs hide behind.
    """
    seed = parse_seed(seed)
    points = sorted(set(known_points))
    if not points:
        raise ValueError("known_points: no fault point to draw from")
    if type(max_rules) is not int or max_rules < 1:
        raise ValueError(f"max_rules: must be an int >= 1, got {max_rules!r}")
    targets = sorted(set(kill_targets))
    storage = [p for p in points if p in STORAGE_POINTS]
    kinds = (["kill"] if kills else []) + (["storage"] if storage else []) + ["delay"]
    kind_weights = {"kill": 4, "storage": 4, "delay": 2}
    point_weights = [_weight(p) for p in points]
    reached = [p for p in points if hits is not None and hits.get(p, 0) > 0]
    rng = random.Random(seed)
    rules = []
    for _ in range(rng.randint(1, max_rules)):
        kind = rng.choices(kinds, weights=[kind_weights[k] for k in kinds])[0]
        if kind == "kill" and hits is not None and reached:
            point = rng.choices(reached, weights=[_weight(p) for p in reached])[0]
            target = rng.choice([None, None, *targets]) if targets else None
            rules.append(FaultRule(point, FaultAction.KILL, nth=rng.randint(1, hits[point]), times=1, target=target))
        elif kind == "kill":
            point = rng.choices(points, weights=point_weights)[0]
            target = rng.choice([None, None, *targets]) if targets else None
            rules.append(FaultRule(point, FaultAction.KILL, nth=rng.randint(1, 8), times=1, target=target))
        elif kind == "storage":
            point = rng.choice(storage)
            action = (FaultAction.COMMIT_UNKNOWN if point == "storage.after_commit" else
                      rng.choice([FaultAction.COMMIT_REJECTED, FaultAction.COMMIT_UNKNOWN, FaultAction.MAP_FULL]))
            if rng.random() < 0.5:
                rules.append(FaultRule(point, action, nth=rng.randint(1, 10)))
            else:
                rules.append(FaultRule(point, action, probability=round(rng.uniform(0.05, 0.3), 3),
                                       seed=rng.randrange(2**31), times=rng.randint(1, 3)))
        else:
            point = rng.choices(points, weights=point_weights)[0]
            rules.append(FaultRule(point, FaultAction.DELAY, probability=round(rng.uniform(0.1, 0.5), 3),
                                   seed=rng.randrange(2**31), delay_s=round(rng.uniform(0.001, 0.03), 4)))
    if deaths:
        if not reached or hits is None:
            raise ValueError("deaths: need the hits of a recording that reached some point")
        fate = random.Random(f"{seed}:deaths")  # its own stream: the plan's other draws stay as they are
        for _ in range(deaths):
            point = fate.choices(reached, weights=[hits[p] for p in reached])[0]
            rules.append(FaultRule(point, FaultAction.KILL, nth=fate.randint(1, hits[point]), times=1))
    return FaultPlan(tuple(rules))


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string: the same escapes
    raise ValueError(f"cannot write {value!r} to a plan file")


def plan_to_toml(plan: FaultPlan, comments: Sequence[str] = ()) -> str:
    """The plan as a TOML plan file (``[[rules]]``), loadable by ``load_plan``/``faults arm``."""
    lines = [f"# {c}" for c in comments]
    for rule in plan.to_dict()["rules"]:
        lines.append("[[rules]]")
        for key, value in rule.items():
            if key in ("target_pid", "target_start") or value is None:
                continue  # resolved when armed
            lines.append(f"{key} = {_toml_value(getattr(value, 'value', value))}")
        lines.append("")
    return "\n".join(lines)


def check_plan(plan: FaultPlan, known_points: Iterable[str]) -> list[str]:
    """Warnings for rules whose point matches none of ``known_points``, listing the known ones.

    Invalid actions, probabilities and other values never get this far: a :class:`FaultRule`
    (and :func:`~ouroactors.core.faults.load_plan`) refuses them with an error naming the rule.
    """
    import fnmatch

    known = sorted(set(known_points))
    listing = ", ".join(known) if known else "(none)"
    warnings = []
    for i, rule in enumerate(plan.rules):
        if not isinstance(rule.action, FaultAction):
            raise ValueError(f"rules[{i}]: invalid action {rule.action!r}")
        if any(k == rule.point or fnmatch.fnmatchcase(k, rule.point) for k in known):
            continue
        warnings.append(f"rules[{i}]: point {rule.point!r} is not a known point; known points: {listing}")
    return warnings


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
                 warn: Callable[[str], None] = _warn) -> None:
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
                             hits=hits, deaths=DEATHS if hits is not None and self.kills else 0)

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
