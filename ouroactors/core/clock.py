"""The clock every actor of a system reads: real time, or virtual time in a simulation.

Actors never call :mod:`time` for decisions or records; they call :func:`monotonic`,
:func:`time_ns` and :func:`sleep` here. In a normal system these are the real clocks. In a
**simulated** system (the simple base started with ``simulated=True``: one process, one thread)
they read a :class:`VirtualClock` that moves only when the simulation moves it — one tick per
delivered message, a fault's delay, or a jump to the next timer when nothing else is pending — so
the same inputs give the same times, the same timer firings, the same generations and the same
event log, byte for byte, on every run. That is the FoundationDB idea: determinism comes from
owning time, not from running fast.

Whatever sits outside the simulation (the test driving it, an HTTP service in another process)
keeps real time. :meth:`VirtualClock.at_real` maps a real wall-clock instant to the virtual time
that was current then, so a checker can still order an outside observation against the system's
records.
"""

from __future__ import annotations

import bisect
import threading
import time
from array import array

# A simulation's wall clock starts here (2026-01-01T00:00:00Z), so its times still read as dates.
VIRTUAL_WALL_ORIGIN_NS = 1_767_225_600 * 1_000_000_000
# Virtual time one delivered message takes: small, but never zero, so a reply comes strictly after
# the handler that sent it and busy periods still let timers come due.
DEFAULT_TICK_NS = 50_000


class Clock:
    """Real time (the default)."""

    simulated = False

    def monotonic(self) -> float:
        return time.monotonic()

    def monotonic_ns(self) -> int:
        return time.monotonic_ns()

    def time_ns(self) -> int:
        return time.time_ns()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class VirtualClock(Clock):
    """Time that moves only when :meth:`advance` is called (by the simulation's scheduler)."""

    simulated = True

    def __init__(self, tick_ns: int = DEFAULT_TICK_NS) -> None:
        if type(tick_ns) is not int or tick_ns < 0:
            raise ValueError(f"tick_ns: must be an int >= 0, got {tick_ns!r}")
        self.tick_ns = tick_ns
        self._now_ns = 0
        self._lock = threading.Lock()
        # (real wall ns, virtual ns) at every move, for at_real(); both columns only grow.
        self._real = array("q")
        self._virtual = array("q")

    def monotonic(self) -> float:
        return self._now_ns / 1e9

    def monotonic_ns(self) -> int:
        return self._now_ns

    def time_ns(self) -> int:
        return VIRTUAL_WALL_ORIGIN_NS + self._now_ns

    def sleep(self, seconds: float) -> None:
        """A delay inside the simulation: time passes, nothing waits."""
        self.advance(max(0, round(seconds * 1e9)))

    def tick(self) -> None:
        self.advance(self.tick_ns)

    def advance(self, ns: int) -> None:
        if ns <= 0:
            return
        with self._lock:
            self._now_ns += ns
            self._real.append(time.time_ns())
            self._virtual.append(self._now_ns)

    def advance_to(self, monotonic_ns: int) -> None:
        """Move to ``monotonic_ns`` (never backwards)."""
        self.advance(monotonic_ns - self._now_ns)

    def at_real(self, real_wall_ns: int) -> int:
        """The virtual wall time (as :meth:`time_ns` read it) at the real wall instant ``real_wall_ns``."""
        with self._lock:
            index = bisect.bisect_right(self._real, real_wall_ns)
            virtual = self._virtual[index - 1] if index else 0
        return VIRTUAL_WALL_ORIGIN_NS + virtual

    def forget_before(self, real_wall_ns: int) -> None:
        """Drop the mapping older than ``real_wall_ns`` except the last move before it (bounds memory)."""
        with self._lock:
            index = max(0, bisect.bisect_right(self._real, real_wall_ns) - 1)
            if index:
                del self._real[:index]
                del self._virtual[:index]


REAL = Clock()
_current: Clock = REAL


def current() -> Clock:
    return _current


def install(clock: Clock) -> Clock:
    """Make ``clock`` this process's clock; returns the previous one (to restore it)."""
    global _current
    if not isinstance(clock, Clock):
        raise TypeError(f"clock: expected a Clock, got {type(clock).__name__}")
    previous, _current = _current, clock
    return previous


def monotonic() -> float:
    return _current.monotonic()


def monotonic_ns() -> int:
    return _current.monotonic_ns()


def time_ns() -> int:
    return _current.time_ns()


def sleep(seconds: float) -> None:
    _current.sleep(seconds)


def simulated() -> bool:
    return _current.simulated
