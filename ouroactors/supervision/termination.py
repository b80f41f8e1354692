"""Terminating children, as OTP's ``shutdown/2``: politely, under a shutdown time, then by kill.

Mixed into :class:`~.machine.SupervisorCore`: the terminate sequence kept apart from start and
restart. Children of one batch stop together under one timer; at most ``STOP_WINDOW`` polite
requests are outstanding at once; whoever outlives the shutdown time is killed, and a kill whose
exit notice never comes is taken as ``killed`` after ``KILL_GRACE_S``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import reasons
from .children import Child, Children, ChildStatus
from .reasons import ExitKind, ExitReason
from .signals import Command, Kill, RequestStop
from .specs import RestartType

STOP_WINDOW = 200  # polite stop requests outstanding at once
KILL_GRACE_S = 5.0  # after a kill, how long an exit notice may take before the child is taken as killed



@dataclass
class _WaitDown:
    """Children (key -> incarnation) still to go down; reasons collected so far."""

    pending: dict[str, int]
    token: int | None
    reasons: dict[str, ExitReason] = field(default_factory=dict)
    timed_out: bool = False
    any_of: bool = False  # resume after each child goes down (windowed termination)


Job = Generator[Any, Any, None]


def _shutdown_ok(child: Child, why: ExitReason) -> bool:
    """OTP's ``shutdown/1`` verdict: False means a ``shutdown_error`` report.

    ``killed`` is expected only from brutal_kill (a kill after the timeout is an error), plain
    ``shutdown`` only from the polite request; a non-permanent child may also end ``normal`` or
    ``shutdown(info)``.
    """
    brutal = child.spec.shutdown_ms == 0
    if why.kind is ExitKind.KILLED:
        return brutal
    if why.kind is ExitKind.SHUTDOWN and why.info is None and not brutal:
        return True
    permanent = child.spec.restart is RestartType.PERMANENT
    return why.kind in (ExitKind.NORMAL, ExitKind.SHUTDOWN) and not permanent


class Termination:
    """The terminate jobs; the state they touch belongs to :class:`~.machine.SupervisorCore`."""

    simple: bool
    children: Children
    _out: list[Command]

    if TYPE_CHECKING:

        def _timer(self, seconds: float) -> int: ...
        def _emit(self, kind: str, child: Child | None = None, **fields: Any) -> None: ...

    def _terminate(self, children: list[Child], reason: ExitReason = reasons.SHUTDOWN) -> Job:
        """Terminate children one by one in the order given (callers pass newest first).

        A simple_one_for_one supervisor terminates all its children at once, as OTP does.
        """
        if self.simple:
            yield from self._terminate_batch(children, reason)
            return
        for child in children:
            yield from self._terminate_batch([child], reason)

    def _terminate_batch(self, children: list[Child], reason: ExitReason) -> Job:
        """Stop ``children`` together under one shutdown timer, then kill whoever is left.

        At most ``STOP_WINDOW`` polite requests are outstanding at once: thespian's send queue
        turns send-only near 950 queued messages and then drops sends (its own exit notices
        included), so a thousand simultaneous requests could hang the supervisor.
        """
        queue: deque[Child] = deque()
        longest: int | None = 0
        for child in children:
            if child.status is ChildStatus.RESTARTING:
                child.status = ChildStatus.UNDEFINED  # ends its retry loop
            if child.status is not ChildStatus.RUNNING:
                continue
            child.status = ChildStatus.TERMINATING
            queue.append(child)
            ms = child.spec.shutdown_ms
            if ms != 0:
                longest = None if ms is None or longest is None else max(longest, ms)
        if not queue:
            return
        # One timer for the whole batch: the longest shutdown time, or a grace period for kills.
        limit = KILL_GRACE_S if longest == 0 else (None if longest is None else longest / 1000.0)
        wait = _WaitDown({}, None if limit is None else self._timer(limit), any_of=True)
        self._ask_to_stop(queue, wait, reason)
        while wait.pending:
            yield wait
            if wait.timed_out:
                break
            self._ask_to_stop(queue, wait, reason)
        if wait.timed_out and longest != 0:
            for key, incarnation in list(wait.pending.items()):
                self._emit("shutdown_timeout", self.children.get(key))
                self._out.append(Kill(key, incarnation))
            for child in queue:  # never asked politely before the time ran out
                wait.pending[child.key] = child.incarnation
                self._emit("shutdown_timeout", child)
                self._out.append(Kill(child.key, child.incarnation))
            queue.clear()
            if wait.pending:
                wait.timed_out, wait.any_of, wait.token = False, False, self._timer(KILL_GRACE_S)
                yield wait
        if wait.timed_out:
            # A kill always ends the process, but thespian can drop its exit notice under load:
            # after a grace period the child is taken as killed rather than waited for forever.
            for key in list(wait.pending):
                wait.reasons[key] = reasons.killed("no exit notice after kill")
            wait.pending.clear()
        for key, why in wait.reasons.items():
            gone = self.children.get(key)
            if gone is None:
                continue
            gone.status = ChildStatus.UNDEFINED
            gone.pid = gone.address = None
            gone.last_exit = why
            self._emit("terminated", gone, reason=why.to_json(), shutdown_error=not _shutdown_ok(gone, why))

    def _ask_to_stop(self, queue: deque[Child], wait: _WaitDown, reason: ExitReason) -> None:
        while queue and len(wait.pending) < STOP_WINDOW:
            child = queue.popleft()
            wait.pending[child.key] = child.incarnation
            if child.spec.shutdown_ms == 0:
                self._out.append(Kill(child.key, child.incarnation))
            else:
                self._out.append(RequestStop(child.key, child.incarnation, reason))
