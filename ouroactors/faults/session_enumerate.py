"""Crash enumeration over the session scenario: every coordinator/runtime boundary the scenario reaches, crashed.

Like :mod:`.enumerate` (the ledger workload's), in three steps, over :mod:`.session_workload`'s runs:

1. **Record**: one crash-free run with a ``delay 0`` rule for every chosen point pattern (:data:`DEFAULT_POINTS`)
   armed in the static workers, the session's first coordinator and its first runtime (see *Where a fault plan
   is armed* in :mod:`.session_workload`). Every point reached is a ``fault_fired`` event naming the actor; the
   hits numbered per (actor, point) are the crash sites. That run is also the reference its crashes are
   compared with (a delay of 0 changes nothing).
2. **Enumerate**: per site, a fresh system, the same scenario, ``FaultRule(point, kill, nth=n)`` armed where the
   recording found the actor — a real SIGKILL of that process the n-th time it reaches the point — and the four
   session invariants (:mod:`.session_checks`) checked on what the run left.
3. **Report**: site → ``ok`` / ``VIOLATION`` / ``not reached`` / ``error``, with the terminal state reached.

A session's coordinator and runtimes are numbered by their supervisors (``agent/execution/runtime#2`` is the
session's second runtime: the demo opens one for the turn and one after its approval) and every run is a fresh
system running one session, so the recording's actor paths name the same processes in the crash runs. Hit
counts that depend on timing (how many drains/acks the output needed) may differ between runs: a
site whose point is not reached n times is reported ``not reached``, never dropped. ``hits="first"`` crashes
each (actor, point) at its first hit only — every boundary once, the default — and ``"all"`` at every hit.

**Chaos over sessions**: ``sample=k, seed=s`` crashes at ``k`` sites drawn by the seed from every hit (the same
seed draws the same sites from the same recording), so repeated seeded runs wander over the later hits that the
first-hit enumeration leaves out.

**Not only kills** (``action``): a SIGKILL leaves no code of the process to run; ``raise`` makes the point raise
(:class:`~ouroactors.core.faults.FaultInjected`) in the code that reached it — the actor's own error handling, its
``on_stop``, a turn loop's unwinding, the supervisor's crash path — and ``exit`` ends the process with
``os._exit`` (no ``finally``). The storage actions (``commit_rejected``, ``commit_unknown``, ``map_full``) make a
commit fail the way the storage contract says it can, so they go only where a commit is about to happen or has
just returned: the sites of :data:`STORAGE_SITES` (recorded for them, whatever ``points`` says). Every action meets
the same invariants: a failure is a state with a reason, never a silent guess.
"""

from __future__ import annotations

import fnmatch
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.faults import FaultAction, FaultPlan, FaultRule
from .chaos_plans import STORAGE_POINTS
from .checks import Violation
from .session_workload import (
    COORDINATORS,
    EXECUTION,
    STATIC,
    Arming,
    SessionRun,
    SessionWorkload,
    incarnation_of,
    run_session,
)

# The coordinator/runtime boundaries (coordinator.*, runtime.*, effect.*) and the authorities' points the
# session's path reaches (the ledger's settle in the runtime's process, grants' approvals, workspace leases).
DEFAULT_POINTS = ("coordinator.*", "runtime.*", "effect.*", "ledger.*", "grants.*", "workspace.*")
HITS = ("first", "all")
STORAGE_ACTIONS = (FaultAction.COMMIT_REJECTED, FaultAction.COMMIT_UNKNOWN, FaultAction.MAP_FULL)
# what an enumeration may do at a site; drop/duplicate are message faults (message.* points), delay breaks nothing
ACTIONS = (FaultAction.KILL, FaultAction.RAISE, FaultAction.EXIT, *STORAGE_ACTIONS)
STORAGE_SITES = STORAGE_POINTS  # where a storage action goes: a commit about to happen or just returned


@dataclass(frozen=True, order=True)
class SessionSite:
    """The n-th time the actor at ``path`` reached ``point``; ``role``/``armed_at`` say where to arm the kill."""

    path: str
    point: str
    nth: int
    role: str = "static"
    armed_at: str = ""
    action: FaultAction = FaultAction.KILL

    def arming(self) -> Arming:
        plan = FaultPlan((FaultRule(self.point, self.action, nth=self.nth),))
        if self.role == "runtime":
            return Arming(plan, "runtime", incarnation=incarnation_of(self.path) or 1)
        return Arming(plan, self.role, self.armed_at if self.role == "static" else None)

    def __str__(self) -> str:
        done = "" if self.action is FaultAction.KILL else f" ({self.action.value})"
        return f"{self.path} @ {self.point} #{self.nth}{done}"


@dataclass
class SessionCrashRow:
    index: int
    site: SessionSite
    outcome: str  # ok | VIOLATION | not reached | error
    fired: bool = False
    state: str = ""  # where the session ended
    reason: str | None = None
    violations: list[Violation] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    error: str | None = None


@dataclass
class SessionEnumeration:
    sites: list[SessionSite]
    rows: list[SessionCrashRow]
    reference: SessionRun
    duration_s: float = 0.0
    recorded: list[SessionSite] = field(default_factory=list)  # every site the recording reached (before only)

    @property
    def violations(self) -> list[tuple[SessionSite, Violation]]:
        return [(row.site, v) for row in self.rows for v in row.violations]

    def summary(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for row in self.rows:
            counts[row.outcome] = counts.get(row.outcome, 0) + 1
        return counts

    def table(self) -> list[dict[str, Any]]:
        return [{"#": row.index, "actor": row.site.path, "point": row.site.point, "hit": row.site.nth,
                 "action": row.site.action.value, "fired": row.fired, "outcome": row.outcome, "state": row.state,
                 "reason": row.reason,
                 "violations": [str(v) for v in row.violations], "error": row.error,
                 "seconds": round(row.duration_s, 3)} for row in self.rows]


def recording_armings(points: Sequence[str]) -> list[Arming]:
    plan = FaultPlan(tuple(FaultRule(p, FaultAction.DELAY) for p in points))
    return [*(Arming(plan, "static", path) for path in STATIC), Arming(plan, "coordinator"),
            Arming(plan, "runtime", incarnation=None)]


def sites_of(firings: Sequence[dict[str, Any]], *, hits: str = "first",
             action: FaultAction | str = FaultAction.KILL) -> list[SessionSite]:
    """Number the recorded firings per (actor, point): the crash sites in the order reached, each doing ``action``
    (a storage action only at :data:`STORAGE_SITES`)."""
    if hits not in HITS:
        raise ValueError(f"hits: {hits!r}; allowed: {', '.join(HITS)}")
    action = check_action(action)
    counts: dict[tuple[str, str], int] = {}
    sites = []
    for firing in firings:
        key = (firing["path"], firing["point"])
        counts[key] = counts.get(key, 0) + 1
        if hits == "first" and counts[key] > 1:
            continue
        if action in STORAGE_ACTIONS and firing["point"] not in STORAGE_SITES:
            continue
        armed_at = firing.get("armed_at") or firing["path"]
        role = {COORDINATORS: "coordinator", EXECUTION: "runtime"}.get(armed_at, "static")
        sites.append(SessionSite(firing["path"], firing["point"], counts[key], role, armed_at, action))
    return sites


def check_action(action: FaultAction | str) -> FaultAction:
    """``action`` as one of :data:`ACTIONS`, or a ValueError naming the allowed ones."""
    try:
        chosen = FaultAction(action)
    except ValueError:
        chosen = None
    if chosen not in ACTIONS:
        raise ValueError(f"action: {action!r}; allowed: {', '.join(a.value for a in ACTIONS)}")
    return chosen


def recorded_points(points: Sequence[str], action: FaultAction | str) -> tuple[str, ...]:
    """The points a recording arms for ``action``: a storage action's sites are the storage points'."""
    return tuple(STORAGE_SITES) if check_action(action) in STORAGE_ACTIONS else tuple(points)


def select(sites: Sequence[SessionSite], points: Sequence[str] | None) -> list[SessionSite]:
    if not points:
        return list(sites)
    return [s for s in sites if any(fnmatch.fnmatchcase(s.point, p) for p in points)]


def sample(sites: Sequence[SessionSite], count: int, seed: int | str) -> list[SessionSite]:
    """``count`` sites drawn by ``seed`` alone (in the order reached)."""
    if count < 1:
        raise ValueError(f"sample: at least 1 site, got {count}")
    drawn = random.Random(f"session-sites:{seed}").sample(range(len(sites)), min(count, len(sites)))
    return [sites[i] for i in sorted(drawn)]


def crash_at(work: Path, site: SessionSite, index: int, reference: SessionRun,
             config: SessionWorkload | None) -> SessionCrashRow:
    began = time.monotonic()
    try:
        run = run_session(work, f"site{index}", armings=[site.arming()], reference=reference.reference(),
                          config=config)
    except Exception as exc:  # the harness failed: reported as such, never as "ok"
        return SessionCrashRow(index, site, "error", error=f"{type(exc).__name__}: {exc}"[:500],
                               duration_s=time.monotonic() - began)
    fired = any(f["point"] == site.point and f["path"] == site.path and f.get("action") == site.action.value
                for f in run.firings)
    outcome = "VIOLATION" if run.violations else ("ok" if fired else "not reached")
    return SessionCrashRow(index, site, outcome, fired, run.history.state, run.history.reason, run.violations,
                           run.errors, time.monotonic() - began)


def enumerate_session_crashes(work: str | Path, *, points: Sequence[str] = DEFAULT_POINTS, hits: str = "first",
                              only: Sequence[str] | None = None, limit: int | None = None,
                              config: SessionWorkload | None = None, sample_of: int | None = None,
                              seed: int | str = 0, action: FaultAction | str = FaultAction.KILL,
                              on_row: Callable[[SessionCrashRow], None] | None = None) -> SessionEnumeration:
    """Record the scenario's sites for ``points`` (globs), crash at each (``only``: those matching these
    globs; ``sample_of``: that many drawn by ``seed`` from every hit, see *Chaos*; ``limit``: the first n; ``action``:
    what happens there, see *Not only kills*), and return the table. A reference that breaks an invariant itself
    returns at once with no rows."""
    began = time.monotonic()
    work = Path(work)
    reference = run_session(work, "record", armings=recording_armings(recorded_points(points, action)),
                            config=config)
    if reference.violations:
        return SessionEnumeration([], [], reference, time.monotonic() - began)
    recorded = sites_of(reference.firings, hits="all" if sample_of else hits, action=action)
    chosen = select(recorded, only)
    chosen = (sample(chosen, sample_of, seed) if sample_of else chosen)[:limit]
    rows = []
    for index, site in enumerate(chosen, start=1):
        row = crash_at(work, site, index, reference, config)
        if on_row is not None:
            on_row(row)
        rows.append(row)
    return SessionEnumeration(chosen, rows, reference, time.monotonic() - began, recorded)


__all__ = ["ACTIONS", "DEFAULT_POINTS", "HITS", "STORAGE_ACTIONS", "STORAGE_SITES", "SessionCrashRow",
           "SessionEnumeration", "SessionSite", "check_action", "crash_at", "enumerate_session_crashes",
           "recorded_points", "recording_armings", "sample", "select", "sites_of"]
