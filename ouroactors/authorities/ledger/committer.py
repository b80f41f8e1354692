"""The ledger's commit thread: each batch's whole write transaction, begin to commit, on one thread.

LMDB binds a write transaction to the OS thread that began it, so every job is one whole call of
``apply`` on this thread. A finished job is queued and announced by a byte on a pipe the actor
thread watches (``ThespianWatch``); the actor thread alone talks to thespian and sends answers,
only after the job's commit returned. One job at a time is in flight.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable

from ..storage.commit import Outcome
from .store import Op, OpResult

_Done = tuple[Outcome[list[OpResult]] | None, BaseException | None]


class CommitThread:
    """The ledger's writer thread: runs each batch's write transaction, start to commit, on itself.

    LMDB binds a write transaction to the OS thread that began it, so every job is one whole call
    of ``apply`` here. A finished job is queued and announced by a byte on a pipe the actor thread
    watches; the actor thread alone talks to thespian. One job at a time is in flight.
    """

    def __init__(self, apply: Callable[[list[Op]], Outcome[list[OpResult]]]) -> None:
        self._apply = apply
        self._jobs: queue.SimpleQueue[list[Op] | None] = queue.SimpleQueue()
        self._done: queue.SimpleQueue[_Done] = queue.SimpleQueue()
        self.fd, self._signal_fd = os.pipe()
        os.set_blocking(self.fd, False)
        self._thread = threading.Thread(target=self._run, name="ledger-commit", daemon=True)
        self._thread.start()

    def submit(self, ops: list[Op]) -> None:
        self._drain_pipe()  # a late signal of the previous job, already answered: not a new wake-up
        self._jobs.put(ops)

    def _run(self) -> None:
        while (ops := self._jobs.get()) is not None:
            done: _Done
            try:
                done = (self._apply(ops), None)
            except BaseException as exc:  # handed to the actor thread, which answers and crashes
                done = (None, exc)
            self._done.put(done)
            try:
                os.write(self._signal_fd, b"\1")
            except OSError:  # closed: the actor is stopping and waits for this job itself
                pass

    def poll(self) -> _Done | None:
        """The finished job, if there is one (called when the pipe is readable)."""
        self._drain_pipe()
        try:
            return self._done.get_nowait()
        except queue.Empty:
            return None

    def poll_done(self) -> _Done | None:
        """The finished job, if there is one, without a system call when there is none."""
        if self._done.empty():
            return None
        return self.poll()

    def wait(self) -> _Done:
        """Block until the job in flight has finished."""
        done = self._done.get()
        self._drain_pipe()
        return done

    def _drain_pipe(self) -> None:
        try:
            os.read(self.fd, 4096)
        except (BlockingIOError, OSError):
            pass

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join(timeout=30)
        for fd in (self.fd, self._signal_fd):
            try:
                os.close(fd)
            except OSError:
                pass
