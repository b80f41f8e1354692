"""Virtual time for the simple base: a simulated system, deterministic to the byte.

thespian's simple base already runs every actor in the caller's thread, delivering messages from
one FIFO queue, so for the same inputs the order of deliveries is the same. What still differs
between two runs is time: ``wakeupAfter`` timers come due by the wall clock, an ask that finds
nothing to do sleeps until the next timer, and everything actors record (event times,
generations, restart-intensity windows, fault delays) reads the real clock.

:func:`simulate` owns time for one simple-base system. It installs a
:class:`~ouroactors.core.clock.VirtualClock` as the process clock (:mod:`ouroactors.core.clock`)
and swaps the base's timer handling for a version on that clock:

* every delivered message advances time by one tick;
* a timer is due when virtual time reaches it, and due timers are delivered in (due time, order
  of arming) order;
* when nothing is pending and a caller waits with a timeout, time jumps straight to the next
  timer within that timeout; if there is none, to the end of the timeout (the caller waited it
  out) — so waiting costs no real time.

Timers, restarts, generations and the event log then depend only on the inputs: two runs of the
same workload produce the same event log byte for byte. Only one simulated system can run in a
process at a time (the clock is per process).
"""

from __future__ import annotations

import heapq
import itertools
from datetime import timedelta
from typing import Any

from thespian.actors import WakeupMessage
from thespian.system import isInternalActorSystemMessage
from thespian.system.simpleSystemBase import ActorSystemBase, PendingSend

from ..core import clock
from ..core.errors import ActorSystemError


def _as_ns(period: Any) -> int:
    if isinstance(period, timedelta):
        return max(0, round(period.total_seconds() * 1e9))
    return max(0, round(float(period) * 1e9))


def _as_timedelta(period: Any) -> timedelta:
    return period if isinstance(period, timedelta) else timedelta(seconds=float(period))


class _VirtualTimeBase(ActorSystemBase):
    """The simple base with its timers and waits on a virtual clock (set by :func:`simulate`)."""

    _vclock: clock.VirtualClock
    _vtimers: list[tuple[int, int, Any, timedelta, Any]]
    _vorder: itertools.count[int]

    def _add_wakeup(self, from_actor: Any, time_period: Any, payload: Any) -> None:
        due = self._vclock.monotonic_ns() + _as_ns(time_period)
        heapq.heappush(self._vtimers, (due, next(self._vorder), from_actor, _as_timedelta(time_period), payload))

    def _next_wakeup(self) -> Any:
        return self._vtimers[0][0] if self._vtimers else None

    def _realizeWakeups(self) -> None:
        now = self._vclock.monotonic_ns()
        while self._vtimers and self._vtimers[0][0] <= now:
            _, _, target, period, payload = heapq.heappop(self._vtimers)
            with self._private_lock:
                self._pendingSends.append(PendingSend(target, WakeupMessage(period, payload), target))

    def add_wakeups_to_status(self, statusmsg: Any) -> Any:
        return statusmsg  # status replies are for humans; virtual due times mean nothing to them

    def _runSends(self, timeout: Any = None, stop_on_available: Any = False) -> None:
        deadline = None if timeout is None else self._vclock.monotonic_ns() + _as_ns(timeout)
        delivered = 0
        while True:
            while self._pendingSends:
                delivered += 1
                if self.procLimit and delivered > self.procLimit:
                    raise RuntimeError("Too many sends")
                self._realizeWakeups()
                with self._private_lock:
                    next_send = self._pendingSends.pop(0) if self._pendingSends else None
                if next_send is not None:
                    self._vclock.tick()
                    self._runSingleSend(next_send)
                if stop_on_available and any(not isInternalActorSystemMessage(m)
                                             for m in getattr(stop_on_available.instance, "responses", [])):
                    return
            if deadline is None:
                return  # no timeout: run what is pending, never wait
            due = self._next_wakeup()
            if due is None or due > deadline:
                self._vclock.advance_to(deadline)  # the caller waited its whole timeout
                return
            self._vclock.advance_to(due)
            self._realizeWakeups()


class Simulation:
    """The virtual time of one simulated system.

    :func:`begin` installs the clock (before the system reads any time), :meth:`attach` puts the
    started thespian system on it, :meth:`stop` gives the process its previous clock back.
    """

    def __init__(self, virtual: clock.VirtualClock, previous: clock.Clock) -> None:
        self.clock = virtual
        self._previous = previous
        self._stopped = False

    def attach(self, thespian_system: Any) -> None:
        base = getattr(thespian_system, "_systemBase", None)
        if not isinstance(base, ActorSystemBase):
            raise ActorSystemError("a simulation needs the simple base (simpleSystemBase)")
        if base._wakeUps:
            raise ActorSystemError("a simulation must own time from the start: the system already set timers")
        base.__class__ = _VirtualTimeBase
        base._vclock = self.clock
        base._vtimers = []
        base._vorder = itertools.count()

    def stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            clock.install(self._previous)


def begin(virtual: clock.VirtualClock | None = None) -> Simulation:
    """Install a virtual clock as this process's clock; refuses if a simulation already runs."""
    if clock.simulated():
        raise ActorSystemError("a simulated system already runs in this process: shut it down first")
    virtual = virtual or clock.VirtualClock()
    return Simulation(virtual, clock.install(virtual))
