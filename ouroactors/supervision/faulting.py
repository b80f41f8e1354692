"""Arming fault plans inside actor processes, with every firing written as an event.

Both shells (worker and supervisor) use this when they receive ``ArmFaults``. The firing event is
written before the action runs, so even an ``exit`` or ``kill`` leaves its record in the log.
A plan armed in a supervisor's process is inherited by children it forks later (thespian forks),
so restarted actors keep the plan of the process that created them.
"""

from __future__ import annotations

from typing import Any

from ..core import faults
from .events import EventWriter
from .protocol import SystemContext


def arm_here(plan: Any, context: SystemContext | None, path: str) -> None:
    """Arm ``plan`` (or disarm with None) in this process; firings go to the system's event log."""
    if plan is None:
        faults.disarm()
        return
    writer = EventWriter(context.events_path, path, context.node_epoch, context.node) if context else None

    def record(firing: faults.FaultFiring) -> None:
        if writer is not None:
            fields = {"point": firing.point, "rule": firing.rule_index, "action": firing.action.value,
                      "hit": firing.hit, "pid": firing.pid}
            if firing.actor is not None and firing.actor != path:
                fields["actor"] = firing.actor  # armed process-wide; this actor's message was being handled
            writer.write("fault_fired", None, fields)

    faults.arm(plan, on_fire=record)
