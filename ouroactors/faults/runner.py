"""The harness shared by crash enumeration and chaos: a system, the world, one run, recovery, checks.

:class:`Bench` owns an actor system with two trees — the authorities tree under test (storage,
ledger, optionally grants and workspace) and a ``sessions`` tree of lease owners — plus the world
service.
:meth:`Bench.run` drives one workload run with an optional fault plan armed, then:

1. waits until the trees are back (restarting a tree that ended by escalation),
2. disarms the plan,
3. **recovers**: if any of the run's entries is still ``started`` it restarts the ledger (whose
   start turns them ``ambiguous``), then asks the ledger's reconcilers to settle what the world
   proves,
4. observes (ledger entries since the run began, the world log, the lease table, the events) and
   runs every checker.

Runs on one bench are independent: fresh session, effect and key names per run id, a workspace
root per run, and the plan is disarmed between runs. Plans are armed only in **worker** processes,
never in supervisors: a restarted worker is forked from its (unarmed) supervisor, so it comes back
clean instead of inheriting the plan and firing again on every restart.

On the simple base the bench runs a *simulated* system (:mod:`ouroactors.system._simulation`): one
process on virtual time, where a ``kill`` rule ends one actor as a SIGKILL ends its process on
multiproc (its supervisor sees ``killed``, its memory is gone, LMDB keeps what was committed). A
plan is then armed process-wide (every worker shares it, hit counts included), and a kill rule's
``target`` is pinned to the target's running incarnation instead of a pid.

The trees are built and prepared by :mod:`.bench_trees`; readiness, healing and arming are the
bench's base class, :class:`~._bench_system.BenchSystem`. Their names are importable from here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from thespian.actors import ActorSystemFailure

from ..authorities.ledger.actor import ListEntries, Reconcile
from ..authorities.ledger.domain import Status
from ..core.errors import OuroactorsError
from ..core.faults import FaultPlan
from ..supervision.events import Event
from ..supervision.specs import ChildSpec
from ..system.handle import ActorSystem
from ._asking import isolated
from ._bench_system import LOST_AFTER_S as LOST_AFTER_S  # re-exported: importable from here as before
from ._bench_system import BenchSystem
from .bench_trees import GRANTS_ACTOR as GRANTS_ACTOR
from .bench_trees import GRANTS_BY_DEFAULT as GRANTS_BY_DEFAULT
from .bench_trees import LEDGER_ACTOR as LEDGER_ACTOR
from .bench_trees import OWNER_ACTOR as OWNER_ACTOR
from .bench_trees import OWNERS_TREE as OWNERS_TREE
from .bench_trees import RECONCILER as RECONCILER
from .bench_trees import STORAGE_ACTOR as STORAGE_ACTOR
from .bench_trees import WORKSPACE_ACTOR as WORKSPACE_ACTOR
from .bench_trees import BenchError as BenchError
from .bench_trees import owners_tree, prepare_tree, tree_targets
from .bench_trees import static_workers as static_workers
from .bench_trees import workload_tree as workload_tree
from .checks import Observation, Violation, check_all
from .runtime_driver import (
    RUNTIME_ACTOR,
    Kill,
    RuntimeDriver,
    RuntimeObservation,
    check_runtime_run,
    execution_path,
    kills_for_seed,
    run_prefix,
    runtime_session_id,
)
from .session_read import read_journal_checks
from .workload import EFFECT_KIND, Driver, DriverRecord, Grant, WorkloadConfig
from .world import World, WorldClient

log = logging.getLogger("ouroactors.faults")

SHM = Path("/dev/shm")


def _scratch_dir(base: str) -> Path:
    """A temporary data dir; in memory (tmpfs) for a simulated system when the host has one.

    A simulated death is a process death, never an OS crash, and LMDB loses nothing committed to a
    process death whether or not the commit was flushed (shared/notes/lmdb.md §1.1): a flush to a
    disk tests nothing a simulation can fail. On tmpfs a synced commit costs microseconds instead
    of two device flushes, about half a simulated seed's time otherwise.
    """
    where = SHM if base == "simple" and SHM.is_dir() and os.access(SHM, os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix="ouroactors-faults-", dir=where))


# -- results --------------------------------------------------------------------------------------------------


@dataclass
class RunResult:
    """One run: what was armed, what fired, what the driver saw, what recovery did, what broke."""

    run_id: str
    plan: FaultPlan | None
    record: DriverRecord
    observation: Observation
    violations: list[Violation]
    firings: list[dict[str, Any]] = field(default_factory=list)  # fault_fired events of the run
    exits: list[tuple[str, str]] = field(default_factory=list)  # (path, reason kind) of the run
    escalated: bool = False  # a tree ended during the run (and was started again)
    recovery: list[str] = field(default_factory=list)
    anomalies: list[str] = field(default_factory=list)  # harness interventions during the run
    statuses: dict[str, int] = field(default_factory=dict)  # final status counts of the run's effects
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def killed(self) -> list[str]:
        return [path for path, kind in self.exits if kind == "killed"]


# -- the bench ------------------------------------------------------------------------------------------------


class Bench(BenchSystem):
    """A running system + world to drive workloads on. Use as a context manager."""

    def __init__(self, tree: ChildSpec, config: WorkloadConfig, *, base: str = "multiproc",
                 data_dir: str | Path | None = None, world: World | None = None, grant: Grant | None = None,
                 ready_timeout: float = 30.0) -> None:
        if not tree.is_supervisor:
            raise BenchError("the tree's root must be a supervisor spec")
        if config.driver == "runtime" and base != "multiproc":
            raise BenchError(f"the runtime workload needs the multiproc base, not {base!r}: the session runtime "
                             "runs its turns in a thread beside the actor, which the simulated base cannot host")
        if config.driver == "runtime" and execution_path(tree) is None:
            raise BenchError(f"tree {tree.id!r} has no execution supervisor of runtimes ({RUNTIME_ACTOR}): "
                             "build it with workload_tree(runtime=True)")
        self.config = config
        self.base = base
        self.grant = grant
        self.ready_timeout = ready_timeout
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir is not None else _scratch_dir(base)
        self.workspace_base = self.data_dir / "workspace"
        self._own_world = world is None
        self.world = world or World()
        self.tree = prepare_tree(tree, allowed_root=str(self.workspace_base), world_host=self.world.host)
        self.owners = owners_tree(max(config.sessions, 1))
        self.targets = tree_targets(self.tree, config.sessions)
        self.execution = execution_path(self.tree)
        if grant is not None and self.targets.grants is not None:
            raise BenchError(f"tree {tree.id!r} has a grants authority ({self.targets.grants}): the workload asks "
                             "it for every effect, so a grant callable would be ignored; pass one or the other")
        self.system: ActorSystem | None = None
        self.client: WorldClient | None = None
        self._runs: set[str] = set()
        self._escalations = 0
        self._gone_since: dict[tuple[str, int], float] = {}
        self._next_seq: int | None = None  # the first ledger seq after the last run observed
        self.anomalies: list[str] = []  # harness interventions (see lost_workers), every run's

    # -- lifecycle ----------------------------------------------------------------------------------------

    def start(self) -> Bench:
        try:
            if self._own_world:
                self.world.start()
            self.workspace_base.mkdir(parents=True, exist_ok=True)
            with self.world.environ():  # the ledger's reconciler finds the world through it
                # On the simple base the system runs on virtual time (a run is then deterministic), its messages
                # pickled on their way as between processes (system._pickling): what a run finds holds on multiproc
                simple = self.base == "simple"
                self.system = ActorSystem.start(self.base, self.data_dir / "system", simulated=simple,
                                                pickle_messages=simple)
            self.system.start_tree(self.tree)
            self.system.start_tree(self.owners)
            self.client = self.world.client(timeout=max(self.config.effect_timeout, 2.0))
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.system is not None:
            system, self.system = self.system, None
            system.shutdown()
        if self._own_world:
            self.world.stop()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> Bench:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- one run --------------------------------------------------------------------------------------------

    def new_run_id(self, stem: str) -> str:
        run_id, n = stem, 1
        while run_id in self._runs:
            n += 1
            run_id = f"{stem}.{n}"
        self._runs.add(run_id)
        return run_id

    def ledger_size(self) -> int:
        status = self._ask(self.targets.ledger, "status")
        return int(sum(status["counts"].values()))

    def _ask(self, path: str, message: Any, timeout: float = 10.0, *, stamped: bool = False) -> Any:
        """Ask ``path`` (``stamped``: with its current generation, as an authority's writes must be)."""
        deadline = time.monotonic() + self.ready_timeout
        while True:
            try:
                with isolated(self.live) as system:
                    stamp = system.child_info(path).generation if stamped else None
                    return system.ask(path, message, timeout=timeout, stamp=stamp)
            except (OuroactorsError, ActorSystemFailure) as exc:  # thespian's: a send to an address just gone
                if time.monotonic() > deadline:
                    log.warning("%s: no answer to %r within %ss: %r", path, message, self.ready_timeout, exc)
                    raise
                log.debug("%s: %r answered %r; asking again", path, message, exc)
                time.sleep(0.01)  # restarting: bounded poll

    def run(self, stem: str, plan: FaultPlan | None = None, *, at: Sequence[str] | None = None,
            kills: Sequence[Kill] | None = None) -> RunResult:
        """Drive one workload run with ``plan`` armed in every worker (or those at ``at``; the runtime workload's
        runtimes too: :meth:`_arm_runtimes`); recover; observe; check. The plan is armed right before the driver
        starts and disarmed after it ends. ``kills``: the runtime driver's own SIGKILLs (default: ``config.kills``
        of them drawn from ``stem``, so a campaign's seed names its kills as it names its plan)."""
        if kills is None:
            kills = kills_for_seed(stem, self.config, count=self.config.kills) if self.config.kills else ()
        system = self.live
        began = time.monotonic()
        escalated = self.ensure_ready()
        anomalies_before = len(self.anomalies)
        run_id = self.new_run_id(stem)
        # The ledger's size once; then where the last observation ended (a status scans every entry).
        first_seq = self._next_seq if self._next_seq is not None else self.ledger_size() + 1
        (self.workspace_base / run_id).mkdir(parents=True, exist_ok=True)
        for i in range(self.config.sessions):
            Path(self.config.root_of(str(self.workspace_base / run_id), i)).mkdir(parents=True, exist_ok=True)
        mark = system.mark()
        if system.simulation is not None:  # world stamps of earlier runs are never mapped again
            system.simulation.clock.forget_before(time.time_ns())
        if plan is not None:
            self.arm(plan, at)
            self._arm_runtimes(plan, at)
        assert self.client is not None
        self._escalations = 0
        driver = self._driver(run_id, kills)
        record = driver.run(run_id)
        escalated = self.ensure_ready() or escalated or self._escalations > 0
        if plan is not None:
            self.arm(None)
            self._arm_runtimes(None, at)
            # a plan still armed as the run ended may have ended a tree meanwhile: back up for the checks
            escalated = self.ensure_ready() or escalated
        run_events = system.events.all()[mark:]
        recovery = self.recover(run_id, first_seq)
        observation = self.observe(run_id, first_seq, record)
        self._next_seq = max((e.seq for e in observation.entries), default=first_seq - 1) + 1
        violations = check_runtime_run(observation) if self.config.driver == "runtime" else check_all(observation)
        statuses: dict[str, int] = {}
        for entry in observation.run_entries():
            if entry.kind == EFFECT_KIND:
                statuses[entry.status.value] = statuses.get(entry.status.value, 0) + 1
        return RunResult(
            run_id=run_id, plan=plan, record=record, observation=observation, violations=violations,
            # ``actor`` names who was handling a message when the plan is armed process-wide (simple base)
            firings=[{**e.fields, "path": e.fields.get("actor", e.path)}
                     for e in run_events if e.kind == "fault_fired"],
            exits=[(e.path, (e.reason or {}).get("kind", "?")) for e in run_events if e.kind == "exited"],
            escalated=escalated or any(e.kind == "tree_ended" for e in run_events),
            recovery=recovery, anomalies=self.anomalies[anomalies_before:], statuses=dict(sorted(statuses.items())),
            duration_s=time.monotonic() - began,
        )

    def _arm_runtimes(self, plan: FaultPlan | None, at: Sequence[str] | None) -> None:
        """The runtime workload's plan reaches the session runtimes too: armed in their execution supervisor, it is
        inherited by every runtime forked while it is armed (each counts its own hits from zero), so a seed's storage
        faults, delays and kills land inside the effect path as well (a journal's puts failing, a start refused,
        a runtime killed at a point of its own). Runtimes forked before (spares) or after the run carry none.
        Disarming (``plan`` None) reaches the runtimes still running too: a plan must not outlive its run."""
        if self.config.driver != "runtime" or self.execution is None or at is not None:
            return
        deadline = time.monotonic() + self.ready_timeout
        while True:
            try:
                with isolated(self.live) as system:  # an ask that timed out must not answer the next one
                    system.arm_faults(self.execution, plan)
                    if plan is None:
                        for path, info in system.walk(self.tree.id):
                            if path.startswith(self.execution + "/") and info.status == "running":
                                with contextlib.suppress(OuroactorsError):  # gone since the walk: nothing to disarm
                                    system.arm_faults(path, None)
                return
            except OuroactorsError:
                if plan is None:
                    return  # disarming a supervisor gone with its tree: its runtimes went with it, unarmed anew
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)  # restarting (the tree after an escalation): bounded poll

    def _driver(self, run_id: str, kills: Sequence[Kill]) -> Driver:
        """The synthetic driver, or real sessions of the runtime (``config.driver``); kills need the latter."""
        assert self.client is not None
        root = str(self.workspace_base / run_id)
        if self.config.driver == "runtime":
            assert self.execution is not None
            return RuntimeDriver(self.live, self.targets, self.client, self.config, execution=self.execution,
                                 workspace_root=root, script_dir=self.data_dir / "scripts" / run_id, kills=kills,
                                 heal=self.heal)
        if kills:
            raise BenchError("driver kills are a runtime-workload feature (WorkloadConfig(driver='runtime'))")
        return Driver(self.live, self.targets, self.client, self.config, grant=self.grant, workspace_root=root,
                      heal=self.heal)

    def entries_since(self, first_seq: int) -> list[Any]:
        return list(self._ask(self.targets.ledger, ListEntries(since_seq=first_seq, limit=1_000_000)))

    def recover(self, run_id: str, first_seq: int) -> list[str]:
        """Make every unsettled entry of the run ambiguous (a ledger restart) and reconcile."""
        done: list[str] = []
        prefix = self._prefix(run_id)
        entries = [e for e in self.entries_since(first_seq) if e.effect_id.startswith(prefix)]
        if any(e.status is Status.STARTED for e in entries):
            parent, _, child = self.targets.ledger.rpartition("/")
            with isolated(self.live) as system:
                system.terminate_child(parent, child)
                system.restart_child(parent, child)
            self.ensure_ready()
            done.append("ledger restarted (unsettled entries made ambiguous)")
            entries = [e for e in self.entries_since(first_seq) if e.effect_id.startswith(prefix)]
        if any(e.status is Status.AMBIGUOUS for e in entries):
            answer = self._ask(self.targets.ledger, Reconcile(), stamped=True)
            done.append(f"reconciled: {answer['settled']} settled, {answer['ambiguous']} left ambiguous")
        return done

    def observe(self, run_id: str, first_seq: int, record: DriverRecord) -> Observation:
        assert self.client is not None
        leases = self._ask(self.targets.workspace, "leases") if self.targets.workspace else []
        seen = Observation(
            run_id=run_id, entries=self.entries_since(first_seq), first_seq=first_seq,
            world_log=self.client.log(prefix=self._prefix(run_id)),
            leases=list(leases) if isinstance(leases, list) else [],
            lease_snapshots=record.lease_snapshots, events=self.events(), driver=record,
            ledger_path=self.targets.ledger, recovered=True,
            world_time=self.live.simulation.clock.at_real if self.live.simulation is not None else None,
        )
        if self.config.driver != "runtime":
            return seen
        sessions = [runtime_session_id(run_id, i) for i in range(self.config.sessions)]
        journals = read_journal_checks(str(self.live.data_dir), sessions)  # read beside the system, in a child
        return RuntimeObservation(**vars(seen), journals=journals)

    def _prefix(self, run_id: str) -> str:
        """What the run's effect ids and world keys start with (runtime sessions: ``<run>:``)."""
        return run_prefix(run_id) if self.config.driver == "runtime" else f"{run_id}/"

    def events(self) -> list[Event]:
        return self.live.events.all()


@contextlib.contextmanager
def bench(tree: ChildSpec, config: WorkloadConfig, **kwargs: Any) -> Iterator[Bench]:
    with Bench(tree, config, **kwargs) as started:
        yield started


def replace_config(config: WorkloadConfig, **changes: Any) -> WorkloadConfig:
    return dataclasses.replace(config, **changes)
