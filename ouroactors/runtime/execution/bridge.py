"""A trio event loop living beside a thespian actor, in the same process.

**Why a thread.** A thespian actor handles one message at a time on its own thread and must not block in a
handler (TCP transport I/O stalls, ``shared/notes/thespian.md``). The session's activities — model streams, tool
runs, deadlines, cancellation — are naturally trio code. So the runtime keeps **one trio loop for its whole life**
in a daemon thread (not a fresh ``trio.run`` per turn: a turn must keep running while the actor handles ``steer``,
``interrupt`` and ``drain``), and the two sides talk in two directions:

* actor → trio: :meth:`TrioThread.call` runs a *synchronous* function inside the loop
  (``trio.from_thread.run_sync`` with the loop's token) and returns its result. Everything the turn loop
  shares with the actor (the output buffer, the steering queue, the cancel scope) is touched only inside
  the loop's thread, so there are no locks; each call is short (no awaiting), so the actor is never held up.
* trio → actor: the loop never touches thespian. What it has for the actor (a message to send, a turn that
  failed) goes into an :class:`Outbox`: a queue plus a pipe whose read end the actor's loop watches
  (thespian's ``ThespianWatch``), so the actor wakes at once and performs the sends **on its own thread**.
  Sending from the trio thread directly looked fine in small tests and lost replies under load (measured: the
  runtime's later answers to its coordinator vanished in 3 of 6 runs): thespian's TCP transport is not safe to
  drive from two threads.

No busy polling anywhere: the loop sleeps in trio until an activity, a call or a cancellation wakes it.

**The loop's pulse.** Every activity has a deadline, but trio enforces deadlines only while its loop runs: code
that blocks the loop's thread (a synchronous call that never returns, a disk that stops answering an inline
commit, a bug that spins) stalls every activity of the session at once, and nothing inside the loop can notice.
So a task of the loop records a pulse every :data:`PULSE_S`; :meth:`TrioThread.stalled_for` is how long ago the
last one was and :meth:`TrioThread.where` says where the loop's thread is. :meth:`TrioThread.watch` checks the
pulse from a thread of its own — not the actor's: an actor handler that calls into a stalled loop waits with it —
and tells its owner once (the runtime ends its process: see its module docstring).
:meth:`TrioThread.stop` cancels everything still running (activities see ``trio.Cancelled`` and kill their
subprocess groups) and joins the thread with a deadline.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
import traceback
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio

T = TypeVar("T")


def reset_trio_thread_cache() -> None:
    """Forget the worker threads trio cached in the parent: they do not exist after ``fork``.

    trio (0.22) keeps idle ``to_thread`` workers in a process-wide cache and registers no fork handler, so in a
    forked child the first ``trio.to_thread.run_sync`` hands its job to a thread that is gone and waits forever
    (measured: a runtime forked from a process that had used ``to_thread`` hung at its first ledger commit). Every
    actor process is forked; a fresh cache is what a new process would have.
    """
    from trio._core import _thread_cache

    _thread_cache.THREAD_CACHE = _thread_cache.ThreadCache()


os.register_at_fork(after_in_child=reset_trio_thread_cache)

STOP_DEADLINE_S = 5.0
PULSE_S = 0.5  # how often the loop records that it runs (see "The loop's pulse")
WATCH_S = 2.0  # how often a watch looks at the pulse


class Outbox:
    """Messages from the trio thread for the actor's thread to send; the pipe wakes the actor's loop."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Any, Any]] = queue.SimpleQueue()
        self.read_fd, self._write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        os.set_blocking(self._write_fd, False)

    def post(self, address: Any, message: Any) -> None:
        """From any thread: queue ``message`` for ``address`` and wake the actor."""
        self._queue.put((address, message))
        try:
            os.write(self._write_fd, b"!")
        except BlockingIOError:
            pass  # the pipe is full of wake-ups already: the actor is awake and will drain the queue

    def take(self) -> list[tuple[Any, Any]]:
        """On the actor's thread, when the pipe is readable: everything queued so far."""
        try:
            while os.read(self.read_fd, 4096):
                pass
        except BlockingIOError:
            pass
        taken = []
        while True:
            try:
                taken.append(self._queue.get_nowait())
            except queue.Empty:
                return taken

    def take_merged(self, merge: Callable[[Any, Any], Any | None]) -> list[tuple[Any, Any]]:
        """:meth:`take`, with each run of messages to one address folded by ``merge(earlier, later)`` (None: they
        do not fold). Each message is a thespian send: one TCP write, an acknowledgement to wait for before the
        next send to that peer, a receive and a handler run on the other side. Events the trio thread emitted while
        the actor thread was busy go in one push instead of one push each."""
        merged: list[tuple[Any, Any]] = []
        for address, message in self.take():
            if merged and merged[-1][0] == address and (both := merge(merged[-1][1], message)) is not None:
                merged[-1] = (address, both)
            else:
                merged.append((address, message))
        return merged

    def close(self) -> None:
        for fd in (self.read_fd, self._write_fd):
            try:
                os.close(fd)
            except OSError:
                pass


class TrioThread:
    """One trio loop in a daemon thread, with a nursery that tasks can be started in from the actor."""

    def __init__(self, name: str = "ouroactors-trio", *, start: bool = True) -> None:
        reset_trio_thread_cache()  # also when this module was first imported after the fork
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._ready = threading.Event()
        self._done = threading.Event()
        self._error: BaseException | None = None
        self._pulse = time.monotonic()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._begun = False
        # Never waited for here: the first use waits (:meth:`_started`) and raises if the loop failed to start.
        # ``start=False`` leaves even the thread to :meth:`begin` (or the first use). Starting the loop is ~2 ms of
        # Python in a freshly forked runtime; begun while the actor's thread still runs Python, it only takes turns
        # with it on the GIL. A runtime begins it once it has reported its start, while it waits for its first
        # request (measured: its start ~5 ms -> ~2 ms).
        if start:
            self.begin()

    def begin(self) -> None:
        """Start the loop's thread, once (from the owner's thread)."""
        if not self._begun:
            self._begun = True
            self._thread.start()

    def _started(self) -> None:
        """Wait until the loop runs (or has ended): raise if it did not start."""
        self.begin()
        if not self._ready.wait(STOP_DEADLINE_S):
            raise RuntimeError("the trio loop did not start")
        if self._token is None or self._nursery is None:
            raise RuntimeError(f"the trio loop failed to start: {self._error!r}")

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # reported through `error`; the owner decides whether that is a crash
            self._error = exc
        finally:
            self._ready.set()
            self._done.set()

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._ready.set()
            while True:  # the pulse: a plain store each time, read by the actor's thread
                self._pulse = time.monotonic()
                await trio.sleep(PULSE_S)

    def stalled_for(self) -> float:
        """Seconds since the loop last ran its pulse (about :data:`PULSE_S` at most while it runs freely)."""
        return time.monotonic() - self._pulse

    def watch(self, limit_s: float, on_stall: Callable[[float, str], None]) -> None:
        """From a daemon thread: call ``on_stall(stalled_s, where)`` once, if the loop has not pulsed for
        ``limit_s`` while alive. The check runs every ``min(WATCH_S, limit_s / 2)``; it ends with the loop."""
        every = min(WATCH_S, limit_s / 2)

        def check() -> None:
            while not self._done.wait(every):
                stalled = self.stalled_for()
                if stalled > limit_s:
                    on_stall(stalled, self.where())
                    return

        threading.Thread(target=check, name=f"{self._thread.name}:watchdog", daemon=True).start()

    def where(self, depth: int = 6) -> str:
        """The innermost frames of the loop's thread, for a report of what it is stuck in."""
        frame = sys._current_frames().get(self._thread.ident or -1)
        if frame is None:
            return "(the loop's thread has ended)"
        stack = traceback.extract_stack(frame)[-depth:]
        return " <- ".join(f"{f.name} ({os.path.basename(f.filename)}:{f.lineno})" for f in reversed(stack))

    @property
    def alive(self) -> bool:
        return not self._done.is_set()

    @property
    def error(self) -> BaseException | None:
        """What ended the loop, if a task raised (an uncaught exception ends the loop: let it crash)."""
        return self._error

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run the synchronous ``fn(*args)`` in the loop's thread and return its result (or raise its error)."""
        self._started()
        if not self.alive or self._token is None:
            raise RuntimeError(f"the trio loop has ended ({self._error!r})")
        return trio.from_thread.run_sync(fn, *args, trio_token=self._token)

    def run(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``await fn(*args)`` in the loop and wait for its result (for short, bounded work such as a replay
        at open; a turn is started with :meth:`start` instead, so the actor stays free while it runs)."""
        self._started()
        if not self.alive or self._token is None:
            raise RuntimeError(f"the trio loop has ended ({self._error!r})")
        return trio.from_thread.run(fn, *args, trio_token=self._token)

    def start(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """Start ``await fn(*args)`` as a task of the loop's nursery."""
        def spawn() -> None:
            assert self._nursery is not None
            self._nursery.start_soon(fn, *args)

        self.call(spawn)

    def stop(self, deadline_s: float = STOP_DEADLINE_S) -> bool:
        """Cancel every task and end the loop; True when the thread ended within the deadline."""
        if not self._begun:  # never started: nothing runs, and nothing will (a watchdog ends too)
            self._begun = True
            self._ready.set()
            self._done.set()
            return True
        self._ready.wait(deadline_s)  # a loop still starting is stopped once it runs
        if self.alive and self._nursery is not None:
            try:
                self.call(self._nursery.cancel_scope.cancel)
            except RuntimeError:
                pass  # it ended meanwhile
        self._thread.join(deadline_s)
        return not self._thread.is_alive()


__all__ = ["Outbox", "TrioThread"]
