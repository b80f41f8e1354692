"""The bench's hold on its running system: every tree up, lost workers replaced, plans armed.

:class:`BenchSystem` is the part of :class:`~.runner.Bench` that keeps the system in a state to
run a workload on, between and during runs:

* **Readiness** (:meth:`~BenchSystem.ensure_ready`): every tree runs and every child is running,
  polled with a bounded pause; a tree that ended by escalation is started again, as a node's
  service manager would (:meth:`~BenchSystem.heal` does the same while the driver waits).
* **Lost exits** (:meth:`~BenchSystem.lost_workers`): a worker its supervisor shows ``running``
  whose process has been gone for :data:`LOST_AFTER_S` is a supervision failure, not something a
  workload causes; the bench terminates and restarts it and notes the intervention (``anomalies``).
* **Arming** (:meth:`~BenchSystem.arm`): a plan goes to every running worker (never a supervisor),
  its kill targets resolved to pids (or, simulated, to the target's running incarnation).

Every ask goes through a fresh isolated handle (:func:`._asking.isolated`), so a late answer to an
earlier ask cannot land in a later one.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from typing import Any

from ..core.errors import ChildNotFound, OuroactorsError
from ..core.faults import FaultAction, FaultPlan, with_kill_target
from ..core.procs import pid_alive as _pid_alive
from ..supervision.processes import HEARTBEAT_INTERVAL, LOCAL_EXIT_GRACE
from ..supervision.protocol import ArmFaults
from ..supervision.specs import ChildSpec
from ..system.handle import ActorRef, ActorSystem
from ._asking import isolated
from .bench_trees import BenchError, static_workers

log = logging.getLogger("ouroactors.faults")

# A supervisor takes a local child whose process is gone as killed by itself, without thespian's notice, at its
# first pid check more than LOCAL_EXIT_GRACE after it saw the pid gone (checks every HEARTBEAT_INTERVAL). The bench
# steps in only after that had every chance: an intervention then means supervision failed, not that the harness
# was quicker than the supervisor's own fallback (seed 43097 of a runtime campaign was such a race at 1.0 s).
LOST_AFTER_S = LOCAL_EXIT_GRACE + 2 * HEARTBEAT_INTERVAL + 0.5


class BenchSystem:
    """Readiness, healing and arming of a :class:`~.runner.Bench`'s system (its base class)."""

    # Set by Bench.__init__; declared here for the type checker.
    tree: ChildSpec
    owners: ChildSpec
    system: ActorSystem | None
    ready_timeout: float
    anomalies: list[str]
    _escalations: int
    _gone_since: dict[tuple[str, int], float]

    @property
    def live(self) -> ActorSystem:
        if self.system is None:
            raise BenchError("the bench is not started")
        return self.system

    # -- health ---------------------------------------------------------------------------------------------

    def worker_paths(self) -> list[str]:
        """Every worker of both trees (where plans are armed), as declared (no dynamic children)."""
        return static_workers(self.tree) + static_workers(self.owners)

    def running_workers(self) -> list[str]:
        """Every running worker of both trees right now (dynamic children included)."""
        with isolated(self.live) as system:
            rows = system.walk(self.tree.id) + system.walk(self.owners.id)
        return [path for path, info in rows if info.type == "worker" and info.status == "running"]

    def ensure_ready(self, timeout: float | None = None) -> bool:
        """Wait until every tree runs and every child is running; start a tree that ended.

        Returns True when a tree had ended (an escalation) and was started again.
        """
        deadline = time.monotonic() + (timeout or self.ready_timeout)
        restarted = False
        while True:
            try:
                with isolated(self.live) as system:
                    ready, started = self._ready_once(system)
                restarted = restarted or started
                if ready:
                    return restarted
            except OuroactorsError:
                pass  # a supervisor restarting under us: look again
            if time.monotonic() > deadline:
                raise BenchError(f"the trees did not come back within {timeout or self.ready_timeout}s")
            # Polling the supervisors for the restart to finish, bounded. An in-process system moves
            # only while it runs (a simulated one in virtual time), so let it run rather than sleep.
            self.live.run_for(0.01)

    def _ready_once(self, system: ActorSystem) -> tuple[bool, bool]:
        """(every tree and child is up, a tree that had ended was started again)."""
        restarted = False
        trees = {t.name: t for t in system.trees()}
        for spec in (self.tree, self.owners):
            info = trees.get(spec.id)
            if info is None or info.status == "ended":
                system.start_tree(spec)
                restarted = True
        if not all(trees.get(s.id) is not None and trees[s.id].status == "running" for s in (self.tree, self.owners)):
            return False, restarted
        rows = system.walk(self.tree.id) + system.walk(self.owners.id)
        self._replace_lost(rows)
        ready = bool(rows) and all(info.status == "running" and (info.type != "worker" or not info.pid
                                                                 or _pid_alive(info.pid)) for _, info in rows)
        return ready, restarted

    def heal(self) -> None:
        """Start again a tree that ended (escalation), as a node's service manager would; and
        replace a worker whose death its supervisor never heard of (see :meth:`lost_workers`)."""
        try:
            with isolated(self.live) as system:
                for info in system.trees():
                    spec = next((s for s in (self.tree, self.owners) if s.id == info.name), None)
                    if spec is not None and info.status == "ended":
                        system.start_tree(spec)
                        self._escalations += 1
            self._replace_lost()
        except OuroactorsError:
            pass  # the next wait tries again

    def lost_workers(self, rows: list[tuple[str, Any]] | None = None) -> list[tuple[str, int]]:
        """Workers their supervisor shows ``running`` whose process has been gone for a while.

        That is a supervision failure, not something a workload can cause: thespian did not deliver
        the child's exit (seen when two children of one supervisor are SIGKILLed a few ms apart).
        A pid must stay gone for :data:`LOST_AFTER_S` before it counts: an exit in flight is not lost.
        """
        system = self.live
        if rows is None:
            with isolated(system) as view:
                rows = view.walk(self.tree.id) + view.walk(self.owners.id)
        now = time.monotonic()
        lost = []
        for path, info in rows:
            if info.type != "worker" or info.status != "running" or not info.pid:
                continue
            if info.node not in (None, system.context.node) or _pid_alive(info.pid):
                continue
            first = self._gone_since.setdefault((path, info.pid), now)
            if now - first >= LOST_AFTER_S:
                lost.append((path, info.pid))
        return lost

    def _replace_lost(self, rows: list[tuple[str, Any]] | None = None) -> bool:
        lost = self.lost_workers(rows)
        replaced = False
        for path, pid in lost:
            parent, _, child = path.rpartition("/")
            with isolated(self.live) as system:
                try:
                    system.terminate_child(parent, child, timeout=60.0)
                except ChildNotFound:
                    continue  # its supervisor took the exit since the walk (a dynamic child, deleted): not lost
                note = (f"supervision lost the exit of {path}: pid {pid} is gone but its supervisor shows it "
                        "running; the bench terminated and restarted it")
                log.info("%s", note)
                self.anomalies.append(note)
                replaced = True
                try:
                    system.restart_child(parent, child)
                except ChildNotFound:
                    pass  # a temporary child (a session runtime) is deleted when terminated: its driver starts another
        return replaced

    def arm(self, plan: FaultPlan | None, paths: Sequence[str] | None = None) -> list[str]:
        """Arm ``plan`` (None disarms) in every running worker process (or those at ``paths``).

        One walk of the trees gives every worker's address and pid; kill targets are resolved to
        pids from it and ``ArmFaults`` goes straight to each address. A worker that is restarting
        is retried through the system handle until the bench's ready timeout.
        """
        with isolated(self.live) as system:
            return self._arm(system, plan, paths)

    def _arm(self, system: ActorSystem, plan: FaultPlan | None, paths: Sequence[str] | None) -> list[str]:
        rows: dict[str, Any] = {}
        try:
            rows = {path: info for path, info in system.walk(self.tree.id) + system.walk(self.owners.id)
                    if info.type == "worker" and info.status == "running"}
        except OuroactorsError:
            pass  # restarting: the slow path below resolves each worker
        wanted = list(rows) if paths is None else list(paths)
        resolved = plan
        if plan is not None:
            rules = []
            simulation = self.live.simulation
            for rule in plan.rules:
                target = rule.target
                if rule.action is FaultAction.KILL and target is not None:
                    if simulation is not None:  # one process: the target's incarnation stands for its pid
                        rule = dataclasses.replace(rule, target_pid=simulation.incarnation_of(target))
                    else:
                        pid = rows[target].pid if target in rows else system.pid_of(target)
                        rule = with_kill_target(rule, pid)
                rules.append(rule)
            resolved = dataclasses.replace(plan, rules=tuple(rules))
        armed = []
        for path in wanted:
            info = rows.get(path)
            if info is not None and info.address is not None:
                try:
                    with isolated(self.live) as fresh:
                        ActorRef(fresh, path, info.address).ask(ArmFaults(resolved), timeout=5.0)
                    armed.append(path)
                    continue
                except OuroactorsError:
                    pass  # gone since the walk: the slow path below
            deadline = time.monotonic() + self.ready_timeout
            while True:
                try:
                    with isolated(self.live) as fresh:  # an ask that timed out above must not answer here
                        fresh.arm_faults(path, plan)
                    armed.append(path)
                    break
                except OuroactorsError:
                    if plan is None and self._tree_ended(path):
                        break  # ended (a plan still armed escalated it): its processes took their plans with them
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.01)  # the worker is restarting: bounded poll
        return armed

    def _tree_ended(self, path: str) -> bool:
        """Whether the tree ``path`` lies in runs no more (ended by an escalation; :meth:`ensure_ready` starts it)."""
        try:
            with isolated(self.live) as system:
                name = path.split("/", 1)[0]
                return not any(t.name == name and t.status in ("starting", "running") for t in system.trees())
        except OuroactorsError:
            return False  # the host did not answer: not known to be ended
