"""Crash enumeration: record the fault points a scenario hits, then crash at each one in turn.

1. **Record**: run the scenario once with ``FaultRule("*", DELAY)`` (delay 0) armed in every
   worker; every point reached becomes a ``fault_fired`` event naming the actor and the point.
   Numbering the hits per (actor, point) gives the sequence of crash sites.
2. **Enumerate**: for every site ``(actor, point, n)`` run the scenario again on a fresh system with
   ``FaultRule(point, KILL, nth=n)`` armed in that actor's process only — a real SIGKILL of that
   process the n-th time it reaches the point — let the supervisor restart the tree, recover
   (ledger restart → ambiguous, reconcilers), and check every invariant.
3. **Report**: a table of site → outcome (``ok``, ``VIOLATION``, ``not reached``, ``error``).

Hit counts are per process and reset when a plan is armed, and the workload's interleaving is
deterministic (see :mod:`.workload`), so the n-th hit of a point in the recording is the n-th hit
in the crash run.

**On the simulated base** (``base="simple"``: one process on virtual time, see
:mod:`ouroactors.system._simulation`) a crash is the simulated death of the actor: its supervisor
sees ``killed``, its memory is gone, LMDB keeps what was committed. Every actor shares the process,
so a plan is armed for all of them and hit counts are counted across actors: a site's ``nth`` is
then the n-th hit of the point *by any actor* (``CrashSite.shared``), the kill rule has no target
(the actor reaching that hit dies), and every run arms every worker the same way, so the crash run
replays the recording exactly, to the delivery, until the crash. No process is forked per site:
an enumeration there costs a fraction of the multiproc one.

Timer-driven messages (the workspace heartbeat) would make message counts drift on multiproc:
:func:`enumeration_tree` sets its heartbeat longer than a run. A site that a crash run does not
reach is reported as ``not reached``, never silently dropped.
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.faults import FaultAction, FaultPlan, FaultRule
from ..supervision.specs import ChildSpec
from .checks import Violation
from .runner import Bench, RunResult, workload_tree
from .workload import WorkloadConfig
from .world import World

RECORD_PLAN = FaultPlan((FaultRule("*", FaultAction.DELAY),))
# Small on purpose: every site is a whole run. Short timeouts: a kill mid-ask costs one ask timeout.
DEFAULT_CONFIG = WorkloadConfig(sessions=2, effects=2, ask_timeout=0.5, lease_wait=3.0, op_deadline=10.0)


BASES = ("multiproc", "simple")


@dataclass(frozen=True, order=True)
class CrashSite:
    """The n-th time the actor at ``path`` reached ``point`` (``shared``: the n-th hit of ``point``
    by any actor, which was ``path``'s: hits counted across a simulated system's one process)."""

    path: str
    point: str
    nth: int
    shared: bool = False

    def plan(self) -> FaultPlan:
        return FaultPlan((FaultRule(self.point, FaultAction.KILL, nth=self.nth),))

    def __str__(self) -> str:
        return f"{self.path} @ {self.point} #{self.nth}"


@dataclass
class CrashRow:
    """The outcome of crashing at one site."""

    index: int
    site: CrashSite
    outcome: str  # ok | VIOLATION | not reached | error
    fired: bool = False
    killed: list[str] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)  # final ledger statuses of the effects
    outcomes: dict[str, int] = field(default_factory=dict)  # what the driver saw per effect
    violations: list[Violation] = field(default_factory=list)
    escalated: bool = False
    duration_s: float = 0.0
    error: str | None = None
    result: RunResult | None = None


@dataclass
class EnumerationReport:
    sites: list[CrashSite]
    rows: list[CrashRow]
    baseline: RunResult
    duration_s: float = 0.0
    recorded: list[CrashSite] = field(default_factory=list)  # every site the recording reached (before points)

    @property
    def violations(self) -> list[tuple[CrashSite, Violation]]:
        return [(row.site, v) for row in self.rows for v in row.violations]

    def summary(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for row in self.rows:
            counts[row.outcome] = counts.get(row.outcome, 0) + 1
        return counts

    def table(self) -> list[dict[str, Any]]:
        """Plain rows (for printing or JSON): site → outcome."""
        return [{"#": row.index, "actor": row.site.path, "point": row.site.point, "hit": row.site.nth,
                 "fired": row.fired, "outcome": row.outcome, "statuses": row.statuses, "driver": row.outcomes,
                 "violations": [str(v) for v in row.violations], "error": row.error,
                 "seconds": round(row.duration_s, 3)} for row in self.rows]


def enumeration_tree(name: str = "agent") -> ChildSpec:
    """The authorities tree for enumeration: a workspace heartbeat longer than any run."""
    return workload_tree(name, heartbeat_s=60.0, owner_lost_after_s=120.0)


def sites_from(firings: Sequence[dict[str, Any]], *, shared: bool = False) -> list[CrashSite]:
    """Number the recorded firings per (actor, point) — per point alone when ``shared`` (one process
    for every actor, as a simulated system) — : the crash sites, in the order reached."""
    counts: dict[tuple[str, str], int] = {}
    sites = []
    for firing in firings:
        key = ("", firing["point"]) if shared else (firing["path"], firing["point"])
        counts[key] = counts.get(key, 0) + 1
        sites.append(CrashSite(firing["path"], firing["point"], counts[key], shared))
    return sites


def select_sites(sites: Sequence[CrashSite], points: Sequence[str] | None,
                 warn: Callable[[str], None] | None = None) -> list[CrashSite]:
    """Keep the sites whose point matches one of ``points`` (globs); warn about patterns matching none."""
    if not points:
        return list(sites)
    known = sorted({s.point for s in sites})
    for pattern in points:
        if not any(fnmatch.fnmatchcase(k, pattern) for k in known) and warn is not None:
            warn(f"point {pattern!r} is not reached by this scenario; points it reaches: {', '.join(known)}")
    return [s for s in sites if any(fnmatch.fnmatchcase(s.point, p) for p in points)]


def record_sites(bench: Bench) -> tuple[RunResult, list[CrashSite]]:
    """The crash-free run with every point recorded."""
    baseline = bench.run("record", RECORD_PLAN)
    return baseline, sites_from(baseline.firings, shared=bench.base == "simple")


def crash_at(bench: Bench, site: CrashSite, index: int) -> CrashRow:
    began = time.monotonic()
    try:
        # Shared counts: armed in every worker, as the recording was (one process: one plan anyway).
        result = bench.run(f"crash{index}", site.plan(), at=None if site.shared else [site.path])
    except Exception as exc:  # the harness itself failed: reported as such, never as "ok"
        bench.arm(None)
        return CrashRow(index, site, "error", error=f"{type(exc).__name__}: {exc}",
                        duration_s=time.monotonic() - began)
    fired = any(f.get("point") == site.point and f["path"] == site.path for f in result.firings)
    outcome = "VIOLATION" if result.violations else ("ok" if fired else "not reached")
    return CrashRow(index, site, outcome, fired=fired, killed=result.killed, statuses=result.statuses,
                    outcomes=result.record.outcomes(),
                    violations=result.violations, escalated=result.escalated, duration_s=result.duration_s,
                    result=result)


def enumerate_crashes(
    tree: ChildSpec | None = None,
    config: WorkloadConfig | None = None,
    *,
    points: Sequence[str] | None = None,
    fresh: bool = True,
    data_dir: str | Path | None = None,
    world: World | None = None,
    on_row: Callable[[CrashRow], None] | None = None,
    warn: Callable[[str], None] | None = None,
    limit: int | None = None,
    base: str = "multiproc",
) -> EnumerationReport:
    """Record the scenario's crash sites, crash at each, and return the table.

    ``fresh`` starts a new system per site (the default, and the most faithful); otherwise one
    system serves every site (runs are independent by name, counters reset on arming). ``points``
    restricts the sites to matching points (globs). ``limit`` caps the number of sites run.
    ``base`` is ``"multiproc"`` (a crash is a SIGKILL of the actor's process) or ``"simple"`` (a
    simulated system; a crash is the simulated death of the actor, see the module docstring).
    """
    if base not in BASES:
        raise ValueError(f"base: must be one of {', '.join(BASES)}, got {base!r}")
    tree = tree if tree is not None else enumeration_tree()
    config = config if config is not None else DEFAULT_CONFIG
    began = time.monotonic()
    own_world = world is None
    shared = world or World()
    if own_world:
        shared.start()
    try:
        root = Path(data_dir) if data_dir is not None else None
        rows: list[CrashRow] = []
        with _bench(tree, config, root, "record", shared, base) as recording:
            baseline, sites = record_sites(recording)
            if baseline.violations:
                return EnumerationReport([], [], baseline, time.monotonic() - began, sites)
            chosen = select_sites(sites, points, warn)[:limit]
            if not fresh:
                for index, site in enumerate(chosen, start=1):
                    rows.append(_report(crash_at(recording, site, index), on_row))
        if fresh:
            for index, site in enumerate(chosen, start=1):
                with _bench(tree, config, root, f"site{index}", shared, base) as bench:
                    rows.append(_report(crash_at(bench, site, index), on_row))
        return EnumerationReport(chosen, rows, baseline, time.monotonic() - began, sites)
    finally:
        if own_world:
            shared.stop()


def _report(row: CrashRow, on_row: Callable[[CrashRow], None] | None) -> CrashRow:
    if on_row is not None:
        on_row(row)
    return row


def _bench(tree: ChildSpec, config: WorkloadConfig, root: Path | None, name: str, world: World,
           base: str) -> Bench:
    return Bench(tree, config, base=base, data_dir=(root / name) if root is not None else None, world=world)
