"""A thread beside an actor that runs one blocking call at a time (a synced commit) and wakes the actor when done.

**Why.** A synced LMDB commit waits for the disk (about a millisecond, more under load). On the actor's own thread
that wait is a window in which thespian's transport neither reads nor acknowledges what arrives, so a peer that
sends twice in a row (a runtime pushing its output, a follower's next poll) waits for the commit too. Handed to
this thread, the commit runs while the actor keeps receiving; what arrived meanwhile is taken together afterwards.

**How.** :meth:`CallThread.submit` queues a callable; the thread runs it and queues ``(value, error)``, then writes
a byte on a pipe whose read end (:attr:`CallThread.fd`) the actor watches (``ThespianWatch``): the actor gets a
``WatchMessage`` and takes the result with :meth:`poll`. The actor thread alone talks to thespian (sends from other
threads are not reliable in its TCP transport). An LMDB write transaction is bound to the thread that began it, so
each call is a whole transaction, begin to commit.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from typing import Any

Done = tuple[Any, BaseException | None]


class CallThread:
    """See the module docstring. One call in flight at a time is the caller's rule (a job waits for its own)."""

    def __init__(self, name: str) -> None:
        self._calls: queue.SimpleQueue[Callable[[], Any] | None] = queue.SimpleQueue()
        self._done: queue.SimpleQueue[Done] = queue.SimpleQueue()
        self.fd, self._signal_fd = os.pipe()
        os.set_blocking(self.fd, False)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, call: Callable[[], Any]) -> None:
        self._calls.put(call)

    def _run(self) -> None:
        while (call := self._calls.get()) is not None:
            done: Done
            try:
                done = (call(), None)
            except BaseException as exc:  # handed to the actor thread, which raises it where the call was made
                done = (None, exc)
            self._done.put(done)
            try:
                os.write(self._signal_fd, b"\1")
            except OSError:  # closed: the actor is stopping
                pass

    def poll(self) -> Done | None:
        """The finished call's result, if there is one (when the pipe is readable; a stray wake-up finds None)."""
        try:
            os.read(self.fd, 4096)
        except (BlockingIOError, OSError):
            pass
        try:
            return self._done.get_nowait()
        except queue.Empty:
            return None

    def close(self, timeout_s: float = 30.0) -> None:
        """Let the call in flight finish (a commit is never cut in half), then end the thread."""
        self._calls.put(None)
        self._thread.join(timeout=timeout_s)
        for fd in (self.fd, self._signal_fd):
            try:
                os.close(fd)
            except OSError:
                pass


__all__ = ["CallThread", "Done"]
