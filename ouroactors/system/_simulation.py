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

**Process death without processes.** Every actor shares this one process, so a ``kill`` fault rule
must not SIGKILL it. The simulation installs a killer (:func:`ouroactors.core.faults.set_killer`)
that ends one *actor* the way a SIGKILL ends its process on multiproc:

* the actor running the fault point is unwound by :class:`SimulatedDeath`, a ``BaseException``:
  it passes every ``except Exception`` (the worker shell sends no crash report, nothing after the
  point runs), and is caught where the base delivers the message. Whatever the unwinding itself
  would send or schedule (an ``except BaseException`` that answers before re-raising) is dropped:
  a dead process says nothing; what it sent before the point stays sent. A kill aimed at another
  actor (a rule's ``target``) ends that one at once, between its messages, as another process
  would be;
* its instance is dropped and its parent gets ``ChildActorExited`` with no report before it, so
  its supervisor sees ``killed``, exactly as on multiproc, and restarts it per its strategy;
* the message it was handling is not retried, messages queued to it are discarded by the base
  (dead-lettered once the address is gone), its timers fire into nothing, and everything it held in
  memory (pending requests, caches, counters) is gone with the instance;
* which actor dies, and when, is a fault rule's draw (the seeded plan), reached in the
  simulation's deterministic delivery order, so a seed with kills replays byte for byte too.

Durable state and LMDB. On multiproc a dead writer's process takes its environment handle with it;
LMDB aborts its write transaction (robust mutex) and ``reader_check`` frees its read slots. Here
every actor uses the *one* environment handle of this process (one environment per path per
process: ``storage/env.py``), and the killed actor is not alone on it. Closing and reopening it
would invalidate the handles of every other actor (as if they had all died) and could pull pages
from under their open read transactions, so the handle stays open and nothing about it changes.
What must not survive the actor is its transactions: the unwinding aborts them (``storage.commit.
write`` aborts on any ``BaseException``; ``with env.begin()`` does on exit), and the death is
caught without keeping the traceback, so any transaction object still referenced only from the
dead frames is freed at once (py-lmdb aborts on dealloc; one kept on the instance goes with the
dropped instance, at the latest at the next garbage collection). What a restarted process would see is
then exactly what it sees here: every committed transaction, nothing uncommitted. Its restart runs
its recovery as after a real death: a new storage instance publishes a new generation (fencing
writers bound to the old one, and rest_for_one restarts them), a new ledger turns what is still
``started`` into ``ambiguous``.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from datetime import timedelta
from typing import Any

from thespian.actors import ChildActorExited, WakeupMessage
from thespian.system import isInternalActorSystemMessage
from thespian.system.simpleSystemBase import ActorSystemBase, PendingSend

from ..core import clock, faults
from ..core.errors import ActorSystemError, NoSuchActor

log = logging.getLogger("ouroactors.simulation")


class SimulatedDeath(BaseException):
    """The simulated SIGKILL of the actor running a fault point (see the module docstring).

    A ``BaseException`` on purpose: ``except Exception`` must not catch it (a dead process reports
    nothing), while ``finally`` blocks and context managers still release what the actor held.
    """

    def __init__(self, path: str) -> None:
        super().__init__(f"{path}: killed (simulated)")
        self.path = path


_MAX_NS = 100 * 365 * 86400 * 10**9  # a century of virtual time: any longer wait is "until nothing is left to run"


def _as_ns(period: Any) -> int:
    """``period`` (seconds or a timedelta) in ns, within [0, a century]: a huge timeout (1e300 s, inf) must not
    overflow the conversion to int; nan is 0."""
    seconds = period.total_seconds() if isinstance(period, timedelta) else float(period)
    if not seconds > 0:
        return 0
    return _MAX_NS if seconds * 1e9 >= _MAX_NS else round(seconds * 1e9)


def _as_timedelta(period: Any) -> timedelta:
    return period if isinstance(period, timedelta) else timedelta(seconds=float(period))


class _VirtualTimeBase(ActorSystemBase):
    """The simple base with its timers and waits on a virtual clock (set by :func:`simulate`)."""

    _vclock: clock.VirtualClock
    _vtimers: list[tuple[int, int, Any, timedelta, Any]]
    _vorder: itertools.count[int]

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

    # -- simulated process death --------------------------------------------------------------------

    _vcurrent: Any = None  # the actor (thespian's ActorRef) handling a message right now
    _vdying: Any = None  # the address of an actor being unwound by SimulatedDeath: it sends nothing more
    _vserials: itertools.count[int]
    _vdeaths: list[tuple[str, int]]

    def _callActorWithMessage(self, tgt: Any, ps: Any, msg: Any, sndr: Any) -> None:
        previous, self._vcurrent = self._vcurrent, tgt
        try:
            super()._callActorWithMessage(tgt, ps, msg, sndr)
        except SimulatedDeath:
            self._vdie(tgt)  # the traceback (and the dead frames' objects) go with this block
        finally:
            self._vcurrent = previous
            self._vdying = None

    def actor_send(self, fromActor: Any, toActor: Any, msg: Any) -> None:
        # A dead process sends nothing: cleanup code the unwinding runs (an ``except BaseException``
        # that answers before re-raising) must not reach anyone. What it sent before the point did.
        if self._vdying is not None and fromActor == self._vdying:
            return
        super().actor_send(fromActor, toActor, msg)

    def _add_wakeup(self, from_actor: Any, time_period: Any, payload: Any) -> None:
        if self._vdying is not None and from_actor == self._vdying:
            return
        due = self._vclock.monotonic_ns() + _as_ns(time_period)
        heapq.heappush(self._vtimers, (due, next(self._vorder), from_actor, _as_timedelta(time_period), payload))

    def _vdie(self, ref: Any) -> None:
        """End the actor of ``ref`` as its process would end: no report, its parent told it exited."""
        instance = ref.instance
        if instance is None:
            return  # already gone
        self._vdeaths.append((str(getattr(instance, "path", "") or ref.address), self._vclock.monotonic_ns()))
        ref.instance = None
        for name, address in list(self._globalNames.items()):
            if address == ref.address:
                del self._globalNames[name]
        notified: list[Any] = self._sourceNotifications  # type: ignore[has-type]  # thespian's, untyped
        self._sourceNotifications = [a for a in notified if a != ref.address]
        system = self.actorRegistry[self.system.systemAddress.actorAddressString].address
        self.actor_send(system, ref.parent, ChildActorExited(ref.address))

    def _vlive(self, path: str) -> list[Any]:
        """The live actors (thespian refs) whose tree path is ``path``, oldest first."""
        return [ref for ref in self.actorRegistry.values()
                if ref is not None and ref.instance is not None and getattr(ref.instance, "path", None) == path]

    def _vserial(self, ref: Any) -> int:
        """The incarnation number of ``ref``'s actor (what a pid and start time are on multiproc)."""
        serial = getattr(ref, "_vserial", None)
        if serial is None:
            serial = next(self._vserials)
            ref._vserial = serial
        return int(serial)


class Simulation:
    """The virtual time of one simulated system.

    :func:`begin` installs the clock (before the system reads any time), :meth:`attach` puts the
    started thespian system on it, :meth:`stop` gives the process its previous clock back.
    """

    def __init__(self, virtual: clock.VirtualClock, previous: clock.Clock) -> None:
        self.clock = virtual
        self._previous = previous
        self._stopped = False
        self._base: _VirtualTimeBase | None = None
        self._previous_killer: Any = None

    def attach(self, thespian_system: Any) -> None:
        base = getattr(thespian_system, "_systemBase", None)
        if not isinstance(base, ActorSystemBase):
            raise ActorSystemError("a simulation needs the simple base (simpleSystemBase)")
        if base._wakeUps:
            raise ActorSystemError("a simulation must own time from the start: the system already set timers")
        base.__class__ = _VirtualTimeBase
        assert isinstance(base, _VirtualTimeBase)
        base._vclock = self.clock
        base._vtimers = []
        base._vorder = itertools.count()
        base._vserials = itertools.count(1)
        base._vdeaths = []
        self._base = base
        self._previous_killer = faults.set_killer(self._kill_rule)

    def stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            if self._base is not None:
                faults.set_killer(self._previous_killer)
            clock.install(self._previous)

    # -- process death ----------------------------------------------------------------------------

    @property
    def deaths(self) -> list[tuple[str, int]]:
        """(path, virtual monotonic ns) of every simulated death so far, in order."""
        return list(self._attached()._vdeaths)

    def incarnation_of(self, path: str) -> int:
        """The running incarnation of the actor at ``path``, to pin a kill rule to (its ``target_pid``)."""
        refs = self._attached()._vlive(path)
        if not refs:
            raise NoSuchActor(f"{path} is not running")
        return self._attached()._vserial(refs[-1])

    def kill(self, path: str) -> int:
        """End the actor at ``path`` now, as a SIGKILL of its process would; returns its incarnation.

        For a caller outside the actors (a test, the system handle): no actor is running then.
        """
        base = self._attached()
        refs = base._vlive(path)
        if not refs:
            raise NoSuchActor(f"{path} is not running")
        serial = base._vserial(refs[-1])
        base._vdie(refs[-1])
        return serial

    def _attached(self) -> _VirtualTimeBase:
        if self._base is None:
            raise ActorSystemError("the simulation has no system attached")
        return self._base

    def _kill_rule(self, rule: faults.FaultRule) -> None:
        """A ``kill`` rule fired: end its target (or the actor running the point)."""
        base = self._attached()
        if rule.target is None:
            victim = base._vcurrent
            if victim is None:
                log.warning("kill rule at %r fired outside any actor: nothing to kill", rule.point)
                return
        else:
            refs = base._vlive(rule.target)
            # A pid pinned by a real process's start time means nothing here: aim by path then.
            if rule.target_pid is not None and rule.target_start is None:
                refs = [r for r in refs if base._vserial(r) == rule.target_pid]
            if not refs:
                log.warning("kill rule at %r: target %s is no longer that incarnation; not killing",
                            rule.point, rule.target)
                return
            victim = refs[-1]
        if victim is base._vcurrent:
            base._vdying = victim.address
            raise SimulatedDeath(str(getattr(victim.instance, "path", victim.address)))
        base._vdie(victim)


def begin(virtual: clock.VirtualClock | None = None) -> Simulation:
    """Install a virtual clock as this process's clock; refuses if a simulation already runs."""
    if clock.simulated():
        raise ActorSystemError("a simulated system already runs in this process: shut it down first")
    virtual = virtual or clock.VirtualClock()
    return Simulation(virtual, clock.install(virtual))
