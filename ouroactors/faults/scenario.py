"""Crash enumeration of your own scenario on your own tree: record the points it reaches, then crash at each.

:func:`~.enumerate.enumerate_crashes` drives the built-in workload (leases, grants, effects on the world service)
and checks the effect invariants. A tree of your own has its own requests and its own invariants, so here both are
yours: ``drive(system)`` sends the scenario's requests to a freshly started system running the tree, and
``check(system)`` says, once the tree has recovered, what must still hold: a string it returns is one violation,
each string of an iterable it returns or yields is one, and so is a failed ``assert`` (its message); None (or an
empty iterable, or '') passes. Anything else — a bool: ``True`` is no verdict here — is refused, as a violation
naming what it returned::

    def drive(system):
        for i in range(3):
            system.ask("app/store", Put(f"k{i}", i), timeout=2)

    def check(system):
        if system.ask("app/store", Get("k0"), timeout=2) not in (None, 0):
            yield "k0 holds a value nobody wrote"

    report = enumerate_scenario("trees/app.toml", drive, check, points=["message.*", "myapp.*"])

1. **Record**: one run with every point recorded (a zero delay, fired in every worker — ``message.<path>`` before
   each message a worker handles, and every ``faults.point`` its code reaches); numbering the hits per (actor,
   point) gives the crash sites, in the order reached.
2. **Crash**: for each site, a fresh system (its data dir of its own), the kill armed in that actor's process only
   — a real SIGKILL the n-th time it reaches the point (a dynamic child ``sup/w#k`` through its supervisor, for its
   k-th fork) — then ``drive``, then the tree is let **settle** (every child running again, or the tree ended),
   then ``check``. What ``drive`` raised in a crash run is kept on the row (``drive_error``) but is no violation: a
   request to a killed actor may fail, and a scenario that must not fail says so in ``check``. A tree that ends
   (its restart intensity exceeded) is a violation, as is one that does not settle within ``settle_timeout``, and
   a ``drive`` that does not return within ``drive_timeout`` (a loop waiting for a state the crash made
   unreachable, a request whose answer will not come): ``drive`` runs in a thread of its own, and past its deadline
   the system is shut down under it (its next request, or ``run_for``, raises) and the run goes on to the next.
3. **Report**: site → ``ok``, ``VIOLATION``, ``not reached`` (the run never reached the site: the scenario is not
   deterministic there) or ``error`` (the harness failed).

``base="simple"`` runs each site on a simulated system (one process on virtual time, messages pickled as between
processes): a crash is the actor's simulated death, hit counts are shared by every actor of the process
(:attr:`~.enumerate.CrashSite.shared`), and a run replays the recording exactly up to its crash.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.faults import FaultPlan
from ..supervision.specs import ChildSpec
from ..system.handle import ActorSystem
from .enumerate import BASES, RECORD_PLAN, CrashSite, select_sites, sites_from
from .workload_config import MAX_TIMEOUT_S

Drive = Callable[[ActorSystem], Any]
Check = Callable[[ActorSystem], "Iterable[str] | None"]
SETTLE_POLL_S = 0.05
DRIVE_TIMEOUT_S = 120.0  # wall time a run's drive may take (a simulated one's virtual time passes faster)


@dataclass
class ScenarioRow:
    """One run of the scenario: the recording (``index`` 0, no site) or a crash at ``site``."""

    index: int
    site: CrashSite | None
    outcome: str  # ok | VIOLATION | not reached | error
    fired: bool = False
    violations: list[str] = field(default_factory=list)
    drive_error: str | None = None  # what drive raised (a crash run's failed request is no violation)
    error: str | None = None  # the harness failed
    exits: list[tuple[str, str]] = field(default_factory=list)  # (path, reason kind) of every exit seen
    duration_s: float = 0.0
    data_dir: Path | None = None


@dataclass
class ScenarioReport:
    """The recording run, the sites it found (after ``points`` and ``limit``) and one row per site."""

    tree: str
    base: str
    baseline: ScenarioRow
    sites: list[CrashSite]
    rows: list[ScenarioRow]
    duration_s: float = 0.0
    recorded: list[CrashSite] = field(default_factory=list)  # every site the recording reached (before points)

    @property
    def violations(self) -> list[tuple[CrashSite | None, str]]:
        found = [(None, v) for v in self.baseline.violations]
        return found + [(row.site, v) for row in self.rows for v in row.violations]

    def summary(self) -> dict[str, int]:
        """How many sites ended in each outcome (in the order first met)."""
        return dict(Counter(row.outcome for row in self.rows))

    def __str__(self) -> str:
        """site → outcome, one line per site, each violation below its site (``print(report)``)."""
        lines = [f"{len(self.rows)} site(s) of tree {self.tree!r} on {self.base} in {self.duration_s:.1f}s: "
                 f"{self.summary() or self.baseline.outcome}"]
        lines += [f"  the crash-free run: {v}" for v in self.baseline.violations]
        width = max((len(str(row.site)) for row in self.rows), default=0)
        for row in self.rows:
            lines.append(f"{row.index:>3}  {row.site!s:<{width}}  {row.outcome:<11} {row.duration_s:.2f}s")
            lines += [f"       {v}" for v in row.violations]
            if row.error:
                lines.append(f"       the harness failed: {row.error}")
        return "\n".join(lines)

    def table(self) -> list[dict[str, Any]]:
        """Plain rows (for printing or JSON): site → outcome."""
        return [{"#": row.index, "actor": row.site.path if row.site else "", "point": row.site.point if row.site
                 else "", "hit": row.site.nth if row.site else 0, "fired": row.fired, "outcome": row.outcome,
                 "violations": row.violations, "drive_error": row.drive_error, "error": row.error,
                 "exits": [f"{p} ({k})" for p, k in row.exits], "seconds": round(row.duration_s, 3)}
                for row in self.rows]


def enumerate_scenario(tree: ChildSpec | str | os.PathLike[str], drive: Drive, check: Check | None = None, *,
                       points: Sequence[str] | None = None, base: str | None = None,
                       data_dir: str | os.PathLike[str] | None = None, limit: int | None = None,
                       settle_timeout: float = 20.0, drive_timeout: float = DRIVE_TIMEOUT_S,
                       on_row: Callable[[ScenarioRow], None] | None = None,
                       warn: Callable[[str], None] | None = None) -> ScenarioReport:
    """Record ``drive``'s crash sites on ``tree`` (a spec or a tree file), crash at each, ``check`` after each.

    ``base``: ``"multiproc"`` or ``"simple"`` (default: a tree file's ``[system] base``, else multiproc).
    ``points`` keeps the sites whose point matches one of these globs (``"message.app/store"``, ``"myapp.*"``);
    ``limit`` caps how many are crashed at. ``data_dir`` keeps every run's data dir below it (``record``,
    ``site1``, …: ``events.jsonl``, ``admin.out``, LMDB); by default a temp dir, removed after. A recording run
    that raises or violates is reported with no site crashed at (``report.baseline``). ``settle_timeout`` and
    ``drive_timeout`` are seconds (see the module's docstring).
    """
    if not callable(drive) or (check is not None and not callable(check)):
        raise TypeError("drive and check must be callables taking the ActorSystem")
    check_timeouts(settle_timeout=settle_timeout, drive_timeout=drive_timeout)
    if limit is not None and (type(limit) is not int or limit < 1):
        raise ValueError(f"limit: must be an int >= 1 or None, got {limit!r}")
    spec, base = scenario_tree(tree, base)
    began = time.monotonic()
    with work_dir(data_dir, "ouroactors-scenario-") as root:
        run = ScenarioRunner(spec, drive, check, base, root, settle_timeout, drive_timeout)
        baseline, firings = run.record()
        sites = sites_from(firings, shared=base == "simple")
        if baseline.outcome != "ok":
            return ScenarioReport(spec.id, base, baseline, [], [], time.monotonic() - began, sites)
        chosen = select_sites(sites, points, warn)[:limit]
        rows = []
        for index, site in enumerate(chosen, start=1):
            row = run.crash(site, index)
            rows.append(row)
            if on_row is not None:
                on_row(row)
        return ScenarioReport(spec.id, base, baseline, chosen, rows, time.monotonic() - began, sites)


def check_timeouts(**timeouts: object) -> None:
    """Each of ``timeouts`` is a number of seconds in (0, :data:`MAX_TIMEOUT_S`] (no nan, no inf), or a ValueError
    names it and what was given."""
    for name, value in timeouts.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
            raise ValueError(f"{name}: must be a number of seconds > 0, got {value!r}")
        if value > MAX_TIMEOUT_S:
            raise ValueError(f"{name}: must be at most {MAX_TIMEOUT_S} seconds (a day), got {value!r}")


@contextlib.contextmanager
def work_dir(data_dir: str | os.PathLike[str] | None, prefix: str) -> Iterator[Path]:
    """Where the runs' data dirs go: ``data_dir`` as given (kept), or a temp dir removed after."""
    if data_dir is not None:
        yield Path(data_dir)
        return
    root = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def scenario_tree(tree: ChildSpec | str | os.PathLike[str], base: str | None = None) -> tuple[ChildSpec, str]:
    """The root spec to run and the base to run it on: a spec as given, a tree file loaded; ``base`` as given, else
    the file's ``[system] base``, else multiproc. A root that is not a supervisor, or an unknown base, is refused."""
    if isinstance(tree, ChildSpec):
        spec = tree
    elif isinstance(tree, str | os.PathLike):
        from ..system.config import load_tree

        loaded = load_tree(Path(tree))
        spec, base = loaded.tree, base or loaded.system.base
    else:
        raise TypeError(f"tree: a ChildSpec or a tree file's path, got {type(tree).__name__}")
    if not spec.is_supervisor:
        raise ValueError(f"tree: the root {spec.id!r} must be a supervisor")
    base = base or "multiproc"
    if base not in BASES:
        raise ValueError(f"base: must be one of {', '.join(BASES)}, got {base!r}")
    return spec, base


def aimed_plan(site: CrashSite) -> tuple[str | None, FaultPlan]:
    """Where to arm ``site``'s kill, and the plan: the actor itself; for a dynamic child ``sup/w#k`` (no process
    before the scenario starts it), its supervisor, for its k-th fork only; on a simulated system (one process,
    shared counts) every worker (None)."""
    plan = site.plan()
    if site.shared:
        return None, plan
    parent, _, name = site.path.rpartition("/")
    _, hashed, number = name.rpartition("#")
    if hashed and number.isdigit():
        return parent, dataclasses.replace(plan, forks=1, skip_forks=int(number) - 1)
    return site.path, plan


class ScenarioRunner:
    """One fresh system per run: start the tree, arm, drive, settle, check."""

    def __init__(self, spec: ChildSpec, drive: Drive, check: Check | None, base: str, root: Path,
                 settle_timeout: float, drive_timeout: float = DRIVE_TIMEOUT_S) -> None:
        self.spec, self.drive, self.check, self.base = spec, drive, check, base
        self.root, self.settle_timeout, self.drive_timeout = root, settle_timeout, drive_timeout

    def record(self) -> tuple[ScenarioRow, list[dict[str, Any]]]:
        row, firings = self._run("record", 0, None, lambda system: self._arm_everywhere(system, RECORD_PLAN))
        if row.drive_error is not None and row.outcome == "ok":  # the crash-free run must run the scenario
            row.outcome = "VIOLATION"
            row.violations.insert(0, f"the crash-free run's drive raised {row.drive_error}")
        return row, firings

    def crash(self, site: CrashSite, index: int) -> ScenarioRow:
        at, plan = aimed_plan(site)

        def arm(system: ActorSystem) -> None:
            if at is None:
                self._arm_everywhere(system, plan)
            else:
                system.arm_faults(at, plan)

        row, firings = self._run(f"site{index}", index, site, arm)
        row.fired = any(f["point"] == site.point and (site.shared or f["path"] == site.path) for f in firings)
        if row.outcome == "ok" and not row.fired:
            row.outcome = "not reached"
        return row

    def run_plan(self, name: str, index: int, plan: FaultPlan) -> tuple[ScenarioRow, list[dict[str, Any]]]:
        """One run with ``plan`` armed in every running worker (a chaos seed's: :mod:`.scenario_chaos`)."""
        return self._run(name, index, None, lambda system: self._arm_workers(system, plan))

    def _arm_workers(self, system: ActorSystem, plan: FaultPlan) -> None:
        """Every running worker (one process on the simulated base: one arming), and every child a supervisor
        starts during the scenario — a pool's ``start_child`` — at its first start (``children=True``). Supervisors
        themselves stay unarmed, so a restarted worker runs free (a plan its supervisor passed on to restarts would
        kill it again and again)."""
        if self.base == "simple":
            system.arm_faults(self.spec.id, plan)
            return
        system.arm_faults(self.spec.id, plan, children=True)
        for path, info in system.walk(self.spec.id):
            if info.status == "running":
                system.arm_faults(path, plan, children=info.type == "supervisor")

    def _arm_everywhere(self, system: ActorSystem, plan: FaultPlan) -> None:
        """Every worker, and every supervisor (the children it forks later inherit the plan: dynamic ones)."""
        if self.base == "simple":  # one process: one plan
            system.arm_faults(self.spec.id, plan)
            return
        system.arm_faults(self.spec.id, plan)
        for path, info in system.walk(self.spec.id):
            if info.status == "running":
                system.arm_faults(path, plan)

    def _run(self, name: str, index: int, site: CrashSite | None, arm: Callable[[ActorSystem], None]
             ) -> tuple[ScenarioRow, list[dict[str, Any]]]:
        began = time.monotonic()
        data = self.root / name
        row = ScenarioRow(index, site, "ok", data_dir=data)
        simple = self.base == "simple"
        firings: list[dict[str, Any]] = []
        system = ActorSystem.start(self.base, data, simulated=simple, pickle_messages=simple)
        try:
            system.start_tree(self.spec)
            mark = system.mark()
            arm(system)
            row.drive_error, stuck = self._drive(system)
            if stuck is not None:  # nothing to settle or check: the system is shut down under the drive
                row.violations.append(stuck)
                system.shutdown()
            else:
                row.violations += self._settle(system)
            if not row.violations and self.check is not None:
                row.violations += _checked(self.check, system)
            system.events.poll()
            for event in system.events.all()[mark:]:
                if event.kind == "fault_fired":
                    firings.append({"path": event.fields.get("actor") or event.path, "point": event.fields["point"],
                                    "action": event.fields.get("action")})
                elif event.kind == "exited":
                    row.exits.append((event.path or "?", str((event.reason or {}).get("kind", "?"))))
        except Exception as exc:  # the harness itself (start, arm, walk): never reported as ok
            row.outcome, row.error = "error", f"{type(exc).__name__}: {exc}"[:500]
        finally:
            system.shutdown()
        if row.outcome == "ok" and row.violations:
            row.outcome = "VIOLATION"
        row.duration_s = time.monotonic() - began
        return row, firings

    def _drive(self, system: ActorSystem) -> tuple[str | None, str | None]:
        """Run ``drive`` in a thread of its own for at most ``drive_timeout`` seconds: what it raised (a request to
        a killed actor may fail: kept, judged by check), and the violation if it did not return in time."""
        ended: list[BaseException | None] = []

        def run() -> None:
            try:
                self.drive(system)
            except BaseException as exc:  # handed to the caller's thread (below), whatever it is
                ended.append(exc)
            else:
                ended.append(None)

        thread = threading.Thread(target=run, name="scenario-drive", daemon=True)
        thread.start()
        thread.join(self.drive_timeout)
        if thread.is_alive():
            return None, (f"drive did not return within {self.drive_timeout:g}s (drive_timeout): a request whose "
                          "answer will not come, or a loop waiting for a state the crash made unreachable; the "
                          "system was shut down under it")
        raised = ended[0]
        if raised is None:
            return None, None
        if not isinstance(raised, Exception):  # KeyboardInterrupt, SystemExit: the user's, not the scenario's
            raise raised
        return f"{type(raised).__name__}: {raised}"[:500], None

    def _settle(self, system: ActorSystem) -> list[str]:
        """Wait until the tree has recovered: it runs, and so does every child in it (polled, with a deadline)."""
        _disarm(system, self.spec.id)  # the plan must not outlive the scenario: check's requests run unarmed
        deadline = time.monotonic() + self.settle_timeout
        waiting: list[str] = []
        while True:
            tree = next((t for t in system.trees() if t.name == self.spec.id), None)
            if tree is None or tree.status == "ended":
                return [f"the tree ended after the crash ({getattr(tree, 'exit_reason', None) or 'escalated'}): "
                        "its supervisors gave up restarting"]
            if tree.status == "running":
                waiting = [f"{path} ({info.status})" for path, info in system.walk(self.spec.id)
                           if info.status != "running"]
                if not waiting:
                    return []
            if time.monotonic() > deadline:
                return [f"the tree did not settle within {self.settle_timeout:g}s: "
                        f"{', '.join(waiting) or f'tree {tree.status}'}"]
            system.run_for(SETTLE_POLL_S)  # polling a condition with a deadline (virtual time on simple)


def _disarm(system: ActorSystem, tree: str) -> None:
    """Every actor of ``tree`` that runs, one by one: one restarting meanwhile was forked unarmed (its supervisor's
    plan, if any, was for one fork) and needs nothing."""
    from ..core.errors import OuroactorsError

    try:
        running = [(tree, True), *((p, info.type == "supervisor") for p, info in system.walk(tree)
                                   if info.status == "running")]
    except OuroactorsError:  # the tree has ended: nothing armed is left
        return
    for path, supervises in running:
        with contextlib.suppress(OuroactorsError):
            system.arm_faults(path, None)
            if supervises:  # and what it would give the children it starts next
                system.arm_faults(path, None, children=True)


def _checked(check: Check, system: ActorSystem) -> list[str]:
    """What ``check`` found: None or an empty iterable passes; a str is one violation ('' passes); an iterable gives
    one violation per item; a bool (or anything else) is refused — as a violation saying so, never read as a verdict."""
    try:
        found = check(system)
        if found is None:
            return []
        if isinstance(found, str):
            return [found] if found else []
        if isinstance(found, bool) or not isinstance(found, Iterable):
            return [f"check must return None, a str, or an iterable of str; got {type(found).__name__} "
                    f"({found!r:.80})"]
        return [str(v) for v in found]
    except AssertionError as exc:
        return [f"check failed: {exc}" if str(exc) else "check failed (an assert with no message)"]
    except Exception as exc:
        return [f"check raised {type(exc).__name__}: {exc}"]


__all__ = ["DRIVE_TIMEOUT_S", "ScenarioReport", "ScenarioRow", "ScenarioRunner", "aimed_plan", "check_timeouts",
           "enumerate_scenario", "scenario_tree", "work_dir"]
