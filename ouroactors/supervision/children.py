"""A supervisor's children: records in start order, and the access layer over them.

Like ``supervisor.erl``'s children access layer, strategy code never touches the raw storage:
it asks for children in start order or termination order (newest first) by name, so the
orientation of a list is never implicit.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from .child_info import ChildInfo as ChildInfo  # its own module: a reader of rows needs no specs
from .reasons import ExitReason
from .specs import ChildSpec, ChildType, RestartType


class ChildStatus(str, Enum):
    RUNNING = "running"
    STARTING = "starting"
    RESTARTING = "restarting"  # its restart failed; a retry is queued (OTP's {restarting, Pid})
    TERMINATING = "terminating"
    UNDEFINED = "undefined"  # spec kept, not running (OTP's pid = undefined)


@dataclass
class Child:
    """One child spec and the state of its current incarnation."""

    key: str
    spec: ChildSpec
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    status: ChildStatus = ChildStatus.UNDEFINED
    incarnation: int = 0
    generation: int | None = None
    pid: int | None = None
    address: Any = None
    node: str | None = None
    restarts: int = 0
    last_exit: ExitReason | None = None
    retry_tag: int = 0
    started_at: float | None = None  # monotonic time the current incarnation came up
    backoff_count: int = 0  # consecutive backed-off restarts (reset after a long enough run)
    due_at: float | None = None  # monotonic time of the next restart attempt while backing off
    waits_for: str | None = None  # stopped with the group of this sibling, whose restart is backing off (it starts it)

    @property
    def is_temporary(self) -> bool:
        return self.spec.restart is RestartType.TEMPORARY

    @property
    def alive(self) -> bool:
        return self.status in (ChildStatus.RUNNING, ChildStatus.TERMINATING)


@dataclass
class Children:
    """Child records keyed by key, with the start order kept explicitly."""

    _by_key: dict[str, Child] = field(default_factory=dict)
    _start_order: list[str] = field(default_factory=list)

    def add(self, child: Child) -> None:
        self._by_key[child.key] = child
        self._start_order.append(child.key)

    def remove(self, key: str) -> None:
        if self._by_key.pop(key, None) is not None:
            self._start_order.remove(key)

    def get(self, key: str) -> Child | None:
        return self._by_key.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self._by_key

    def __len__(self) -> int:
        return len(self._by_key)

    def keys_in_start_order(self) -> list[str]:
        return list(self._start_order)

    def in_start_order(self) -> Iterator[Child]:
        return (self._by_key[k] for k in list(self._start_order))

    def newest_first(self) -> Iterator[Child]:
        return (self._by_key[k] for k in reversed(list(self._start_order)))

    def before(self, key: str) -> Iterator[Child]:
        """Children started before ``key`` (its earlier siblings), in start order."""
        for k in self._start_order:
            if k == key:
                return
            yield self._by_key[k]

    def info(self, child: Child, now: float | None = None) -> ChildInfo:
        return ChildInfo(
            id=child.key,
            status=child.status.value,
            pid=child.pid,
            generation=child.generation,
            type=child.spec.type.value,
            actor=child.spec.actor_path,
            restarts=child.restarts,
            last_exit=str(child.last_exit) if child.last_exit else None,
            address=child.address,
            node=child.node,
            retry_in=(max(0.0, child.due_at - now) if child.due_at is not None and now is not None
                      and child.status is ChildStatus.RESTARTING else None),
            waits_for=self._waits_for(child),
        )

    def _waits_for(self, child: Child) -> str | None:
        """The sibling whose backed-off restart will start ``child`` again (a consumer stopped with its group),
        while that still holds: ``child`` is down and the sibling's restart is still queued."""
        sibling = self._by_key.get(child.waits_for) if child.waits_for is not None else None
        if sibling is None or child.status is not ChildStatus.UNDEFINED or sibling.status is not ChildStatus.RESTARTING:
            return None
        return sibling.key

    def counts(self) -> dict[str, int]:
        """OTP's ``count_children``: specs, active, supervisors, workers."""
        kids = list(self._by_key.values())
        return {
            "specs": len(kids),
            "active": sum(1 for c in kids if c.status is ChildStatus.RUNNING),
            "supervisors": sum(1 for c in kids if c.spec.type is ChildType.SUPERVISOR),
            "workers": sum(1 for c in kids if c.spec.type is ChildType.WORKER),
        }
