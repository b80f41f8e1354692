"""Terminating children, as OTP's ``shutdown/2``: politely, under a shutdown time, then by kill.

Mixed into :class:`~.machine.SupervisorCore`: the terminate sequence kept apart from start and
restart. Children of one batch stop together; at most ``STOP_WINDOW`` are being stopped at once;
each one's shutdown time runs from its own polite request, whoever outlives it is killed, and a
kill whose exit notice never comes is taken as ``killed`` after ``KILL_GRACE_S``. So no wait is
without a deadline unless a spec says ``infinity`` (OTP's default for supervisors, whose own
waits are bounded in turn).
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

# Children being stopped at once. Each costs up to four transmits in the supervisor's process
# (the request, the exit request after its report, thespian's own exit notice on SIGCHLD, a dead
# letter for a request a killed child never read), and thespian's send queue turns send-only at
# 950 (for up to 5 minutes) and drops past 1,050. The supervisor's loop also slows with every open
# child socket (about 30 ms per child stopped at N=1000 on 2 busy cores, raw thespian alike), and
# a window must be stopped well within one shutdown time or its children are killed and the next
# window's requests pile up behind theirs: with 100, a stop of 1000 under load did exactly that
# and wedged in send-only mode. 25 keeps the pipeline full and far from both limits.
STOP_WINDOW = 25
KILL_GRACE_S = 5.0  # after a kill, how long an exit notice may take before the child is taken as killed
_EARLY_S = 0.001  # a timer may fire this much before its deadline (clock granularity)

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
    ``shutdown(info)``. A timed ``shutdown = 0`` is no brutal_kill: a ``killed`` after it is the timeout's
    error, as in OTP.
    """
    brutal = child.spec.brutal_kill
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
    _now: float

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
        """Stop ``children`` together, each under its own shutdown time, then kill whoever is left.

        At most ``STOP_WINDOW`` children are being stopped at once: thespian's send queue turns
        send-only near 950 queued messages and then drops sends (its own exit notices included),
        so a thousand simultaneous requests could hang the supervisor. A child's shutdown time
        runs from when it is asked, so one asked late is not killed for the queue ahead of it.
        Every wait has a deadline unless the spec says ``infinity``: the shutdown time, then
        ``KILL_GRACE_S`` for the exit notice of a kill, after which the child is taken as killed.
        """
        queue: deque[Child] = deque()
        for child in children:
            if child.status is ChildStatus.RESTARTING:
                child.status = ChildStatus.UNDEFINED  # ends its retry loop
            if child.status is not ChildStatus.RUNNING:
                continue
            child.status = ChildStatus.TERMINATING
            queue.append(child)
        if not queue:
            return
        wait = _WaitDown({}, None, any_of=True)
        deadlines: dict[str, float | None] = {}  # key -> when to act next (None: infinity)
        killed: set[str] = set()
        armed: float | None = None  # when the timer in ``wait.token`` fires
        while True:
            self._ask_to_stop(queue, wait, reason, deadlines, killed)
            if not wait.pending:
                break
            due = min((d for d in (deadlines[k] for k in wait.pending) if d is not None), default=None)
            if due is not None and (wait.token is None or armed is None or due < armed):
                wait.token, armed = self._timer(max(due - self._now, 0.0)), due
            yield wait
            if wait.timed_out:
                wait.timed_out, wait.token, armed = False, None, None
                self._expire(wait, deadlines, killed)
        for key, why in wait.reasons.items():
            gone = self.children.get(key)
            if gone is None:
                continue
            gone.status = ChildStatus.UNDEFINED
            gone.pid = gone.address = None
            gone.last_exit = why
            self._emit("terminated", gone, reason=why.to_json(), shutdown_error=not _shutdown_ok(gone, why))

    def _ask_to_stop(self, queue: deque[Child], wait: _WaitDown, reason: ExitReason,
                     deadlines: dict[str, float | None], killed: set[str]) -> None:
        while queue and len(wait.pending) < STOP_WINDOW:
            child = queue.popleft()
            wait.pending[child.key] = child.incarnation
            ms = child.spec.shutdown_ms
            # brutal_kill alone skips the request: a timed 0 asks, then kills when its 0 ms timer fires
            # (OTP's ``exit(Pid, shutdown)`` then ``receive ... after 0``), reported as a timeout.
            if child.spec.brutal_kill:
                self._out.append(Kill(child.key, child.incarnation))
                killed.add(child.key)
                deadlines[child.key] = self._now + KILL_GRACE_S
            else:
                self._out.append(RequestStop(child.key, child.incarnation, reason))
                deadlines[child.key] = None if ms is None else self._now + ms / 1000.0

    def _expire(self, wait: _WaitDown, deadlines: dict[str, float | None], killed: set[str]) -> None:
        """The timer fired: kill who outlived its shutdown time; give up on kills never reported."""
        for key, incarnation in list(wait.pending.items()):
            due = deadlines.get(key)
            if due is None or due > self._now + _EARLY_S:
                continue
            if key in killed:
                # A kill always ends the process, but thespian can drop its exit notice under load:
                # after a grace period the child is taken as killed rather than waited for forever.
                del wait.pending[key]
                wait.reasons[key] = reasons.killed("no exit notice after kill")
            else:
                self._emit("shutdown_timeout", self.children.get(key))
                self._out.append(Kill(key, incarnation))
                killed.add(key)
                deadlines[key] = self._now + KILL_GRACE_S
