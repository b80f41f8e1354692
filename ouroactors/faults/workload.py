"""A synthetic workload that drives the authorities the way sessions will.

N sessions, each: **lease** a workspace root once → for every effect: check the lease's fencing
token → **grant** → ``record_started`` → the **effect** (a call to the world service with the
idempotency key) → ``record_settled(ok | failed, evidence)`` → finally release the lease.

* **The grant** comes from the tree's grants authority when it has one (a ``Grants`` worker, found
  by class): the driver asks it ``Decide`` (a ``network`` request of tool ``http_request`` for the
  world's host), stamped with its generation like every request. The authority records its own
  decision in the ledger before answering; the driver then records, in the same batch as the
  effect's start, the ``permission`` entry the start names as its grant (what it ran under). A
  tree without a grants authority gets the pluggable :data:`Grant` callable instead (default
  :func:`allow_all`). ``deny_every`` makes every n-th effect *forbidden*: with the authority it
  asks for a host that a node rule denies (:data:`DENIED_HOST`, see :func:`grant_rules`), so the
  denial is the authority's; without it the callable denies it.
* **The lease** is acquired with an idempotency key (``request_id``, :meth:`Driver.request_id`):
  a retry whose first answer was lost gets the grant its request made, not a conflict with its
  own lease.

The driver runs in the calling process (the test or the CLI), not in the actor system, so a kill
inside the system never kills the driver: it plays the part of the session runtime and keeps an
honest record (:class:`DriverRecord`) of every answer it got, which the checkers compare with the
durable state afterwards.

**Honesty and transport rules**: the driver acts on every answer by the runtime's own table, and
deals with what a driver outside the tree meets besides (lost answers, re-stamping); both are
spelled out where they are applied, in :mod:`._driver_effects`.

:mod:`.runtime_driver` drives real sessions of the real runtime instead (``WorkloadConfig(driver=
"runtime")``): there the runtime applies the table itself and this module's driver is not used.

**Interleaving.** Sessions are generators stepped round-robin by one thread: each step is one
request. The interleaving is therefore the same on every run of the same workload, so a fault
plan keyed on hit counts (``nth``) reproduces. When every session is waiting for the tree to come
back, the driver polls with a short bounded pause. On a simulated system (virtual time) its
deadlines and pauses are on the system's clock, and a pause lets the system run that long: what a
run does then depends on the seed alone, never on how fast the machine is.

**Layout.** :class:`Driver` (here) plays the sessions; its lease steps are :mod:`._driver_leases`,
its effect steps :mod:`._driver_effects`, its state and requests :mod:`._driver_base` (its base
classes). What a run is (:class:`WorkloadConfig`, :class:`EffectSpec`, the grant seam,
:class:`Targets`) is :mod:`.workload_config`; the driver's record :mod:`.workload_record`. Every
name is importable from here, as before.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from typing import Any

from ..core import clock
from ..runtime.execution.honesty import REDECIDE_TRIES
from ..supervision.worker import Worker

# ``name as name``: re-exported, so that they stay importable from here as before.
from ._driver_base import _STEP as _STEP
from ._driver_base import _WAIT
from ._driver_base import TRANSIENT as TRANSIENT
from ._driver_base import DriverBase as DriverBase
from ._driver_base import _describe as _describe
from ._driver_base import _Result as _Result
from ._driver_effects import EffectSteps
from ._driver_leases import LeaseSteps
from .workload_config import (
    DENIED_HOST,
    DRIVERS,
    EFFECT_KIND,
    PERMISSION_KIND,
    EffectSpec,
    Grant,
    GrantDecision,
    Targets,
    WorkloadConfig,
    allow_all,
    deny_every,
    grant_rules,
    is_permission,
    session_id,
)
from .workload_config import PRINCIPAL as PRINCIPAL
from .workload_record import DriverRecord, EffectRecord, LeaseRecord


class SessionOwner(Worker):
    """The actor that owns a session's workspace lease (the workspace pings it; the base answers)."""

    def on_message(self, message: Any, sender: Any) -> Any:
        return message


class Driver(LeaseSteps, EffectSteps):
    """Plays ``config.sessions`` sessions against ``targets`` and the world; see the module doc.

    Constructed as ``Driver(system, targets, world, config, *, grant=None, workspace_root=None,
    heal=None)`` (:class:`~._driver_base.DriverBase`).
    """

    # -- running --------------------------------------------------------------------------------------------

    def run(self, run_id: str) -> DriverRecord:
        """Run every session to its end (each effect settled, left for recovery, or abandoned)."""
        if "/" in run_id or not run_id:
            raise ValueError(f"run id must be a non-empty string without '/', got {run_id!r}")
        self.record = DriverRecord(run_id, started_ns=time.time_ns())
        leases = self.config.leases and self.targets.workspace is not None
        if leases and not self.workspace_root:
            raise ValueError("leases need a workspace_root (a directory under the workspace's allowed roots)")
        self._finished = set()
        sessions = {session_id(run_id, i): self._session(run_id, i, leases) for i in range(self.config.sessions)}
        next_heal = 0.0
        while sessions:
            progressed = False
            for sid, session in list(sessions.items()):
                try:
                    if next(session) != _WAIT:
                        progressed = True
                except StopIteration:
                    del sessions[sid]
                    self._finished.add(sid)
                    progressed = True
            if sessions and not progressed:
                if self.heal is not None and clock.monotonic() >= next_heal:
                    self.heal()
                    next_heal = clock.monotonic() + 0.1
                self.system.run_for(0.01)  # every session waits for the tree: let it run (sleeps on multiproc)
        self.record.ended_ns = time.time_ns()
        return self.record

    # -- one session ----------------------------------------------------------------------------------------

    def _session(self, run_id: str, index: int, leases: bool) -> Generator[str, None, None]:
        specs = self.config.effect_specs(run_id, index)
        for spec in specs:
            self.record.effects[spec.effect_id] = EffectRecord(
                spec.effect_id, spec.key, spec.session_id, self._expected(spec))
        sid = session_id(run_id, index)
        lease: LeaseRecord | None = None
        holder: dict[str, Any] = {}
        if leases:
            assert self.workspace_root is not None
            lease = self.record.leases[sid] = LeaseRecord(sid, self.config.root_of(self.workspace_root, index),
                                                          "exclusive")
            holder["request_id"] = self.request_id(sid, attempt=0)  # one lease per session here
            got = yield from self._acquire(lease, index, holder)
            if not got:
                for spec in specs:
                    self.record.effects[spec.effect_id].outcome = f"abandoned: no lease ({lease.outcome})"
                return
        for position, spec in enumerate(specs):
            if lease is not None:
                fenced = yield from self._fence(lease, index, holder)
                if not fenced:
                    for rest in specs[position:]:
                        self.record.effects[rest.effect_id].outcome = f"abandoned: lease lost ({lease.outcome})"
                    break
            yield from self._effect(spec)
        if lease is not None and holder:
            yield from self._release(lease, index, holder)

    def _expected(self, spec: EffectSpec) -> str:
        allowed = not spec.forbidden if self.targets.grants is not None else self.grant(spec).allow
        if not allowed:
            return "denied"
        return "failed" if spec.refuse else "ok"



__all__ = [
    "DENIED_HOST", "DRIVERS", "EFFECT_KIND", "PERMISSION_KIND", "REDECIDE_TRIES", "Driver", "DriverRecord",
    "EffectRecord", "EffectSpec", "Grant", "GrantDecision", "LeaseRecord", "SessionOwner", "Targets",
    "WorkloadConfig", "allow_all", "deny_every", "grant_rules", "is_permission", "session_id",
]
