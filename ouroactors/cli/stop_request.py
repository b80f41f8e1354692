"""Ctrl-C or SIGTERM asking a foreground ``ouroactors run`` to stop, noticed without a lock.

**Why not a** :class:`threading.Event`. A Python signal handler runs in the main thread, between two
bytecodes of whatever the main thread was doing. The serving loop waits in ``Event.wait``, which holds the
event's internal lock around its checks; a handler calling ``Event.set`` at that moment waits for a lock its
own thread holds, for ever. Measured here: a loop of ``Event.wait(0.001)`` under a storm of signals whose
handler sets the event hung in 2 of 4 runs; in CI it showed as ``ouroactors stop`` waiting out its 60 s for a
``run`` that never got past its signal handler.

**So** the handler only assigns a flag (no lock), and :func:`signal.set_wakeup_fd` has the C-level handler
write a byte to a pipe the loop waits on with ``select``: a signal ends the wait at once, and the flag says
what it meant.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
from types import FrameType

__all__ = ["StopRequest"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequest:
    """Installs handlers for SIGTERM and SIGINT (main thread only); :meth:`wait` returns once one came."""

    def __init__(self) -> None:
        self.requested = False
        self._read, self._write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._previous_wakeup = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        self._previous = {number: signal.signal(number, self._on_signal) for number in STOP_SIGNALS}

    def _on_signal(self, number: int, frame: FrameType | None) -> None:
        self.requested = True  # an assignment: nothing here may wait for a lock (see the module docstring)

    def is_set(self) -> bool:
        return self.requested

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a stop signal; whether one has come (now or before)."""
        if not self.requested:
            with contextlib.suppress(InterruptedError):
                select.select([self._read], [], [], max(timeout, 0.0))
            with contextlib.suppress(BlockingIOError, OSError):
                while os.read(self._read, 512):
                    pass  # the wake-up bytes: what they meant is in the flag
        return self.requested

    def close(self) -> None:
        """Put back the handlers and wake-up descriptor there were before."""
        for number, previous in self._previous.items():
            signal.signal(number, previous)
        signal.set_wakeup_fd(self._previous_wakeup)
        for fd in (self._read, self._write):
            with contextlib.suppress(OSError):
                os.close(fd)
