"""Arming fault plans inside actor processes, with every firing written as an event.

Both shells (worker and supervisor) use this when they receive ``ArmFaults``. The firing event is
written before the action runs, so even an ``exit`` or ``kill`` leaves its record in the log.
A plan armed in a supervisor's process is inherited by children it forks later (thespian forks),
so restarted actors keep the plan of the process that created them.

**On the simple base** every actor of the system — and the test or program that started it — shares one process,
so a process-wide arming would reach actors that were never armed, and outlive the system. There a plan is armed
for the actor that received it and the actors below it only (:func:`ouroactors.core.faults.arm`'s ``actor``: a
point applies the plan of the actor running it, which the worker shell names per message), so
``system.arm_faults("app/s1", plan)`` reaches ``app/s1`` alone and arming a tree's root reaches its whole tree
(dynamic children started later included). Actors armed with an equal plan share its hit counters, as they did in
one process-wide arming (what a simulated crash enumeration counts its sites by). The arming lasts as long as the
system that made it: once the system has shut down (its data dir's marker removed, or replaced by another
system's), the plan is dropped, so it neither fires in the next test's system nor in plain code afterwards.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ..core import faults
from .events import EventWriter
from .protocol import SystemContext

_MARKER = "system.json"  # the data dir's marker: written when a system starts, removed when it shuts down


@dataclass(frozen=True)
class _SystemRuns:
    """Whether the system that armed a plan still runs: its data dir's marker is the very file it was then."""

    marker: str
    identity: tuple[int, int, int]

    def __call__(self) -> bool:
        return _identity(self.marker) == self.identity


def _identity(path: str) -> tuple[int, int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino, info.st_mtime_ns


def _system_runs(context: SystemContext) -> _SystemRuns | None:
    marker = os.path.join(context.data_dir, _MARKER)
    identity = _identity(marker)
    return None if identity is None else _SystemRuns(marker, identity)


def arm_here(plan: Any, context: SystemContext | None, path: str) -> None:
    """Arm ``plan`` (or disarm with None) in this process — for the actor at ``path`` (and below) alone where the
    process is shared (see the module's docstring); firings go to the system's event log."""
    shared = context is not None and context.base == "simple"
    if plan is None:
        faults.disarm(path if shared else None)
        return
    writer = EventWriter(context.events_path, path, context.node_epoch, context.node) if context else None

    def record(firing: faults.FaultFiring) -> None:
        if writer is not None:
            fields = {"point": firing.point, "rule": firing.rule_index, "action": firing.action.value,
                      "hit": firing.hit, "pid": firing.pid}
            if firing.actor is not None and firing.actor != path:
                fields["actor"] = firing.actor  # armed for a subtree or process-wide; this actor's message
            writer.write("fault_fired", None, fields)

    if shared:
        assert context is not None
        faults.arm(plan, on_fire=record, actor=path, alive=_system_runs(context))
    else:
        faults.arm(plan, on_fire=record)
