"""Sequential asks inside an actor: a job is a generator that yields :class:`Ask` and is resumed with the answer.

**Why.** A thespian actor must not block in a handler, yet the coordinator's work is a sequence of
asks (start a runtime, acquire the lease, open, drain, ack …) with durable writes in between. Written
as callbacks it would be a tangle of half-states; written as a generator it reads as the protocol
does, and the actor stays responsive: while a job waits, other messages are queued as jobs of their
own (one job at a time, so two jobs never interleave their reads and writes of the session record).

An answer is matched by its sender (the address asked); an ask that is not answered within its
timeout resumes the job with :class:`TimedOut`. A job that raises crashes the worker — let it crash:
the supervisor restarts the coordinator and recovery reads the durable record back.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

log = logging.getLogger("ouroactors.coordinator")

ASK_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Ask:
    address: Any
    message: Any
    timeout_s: float = ASK_TIMEOUT_S


@dataclass(frozen=True)
class TimedOut:
    """Nothing answered ``message`` within its timeout."""

    message: Any


@dataclass(frozen=True)
class OffThread:
    """A blocking call (a synced commit) run beside the actor: the job resumes with its value, or its exception is
    raised in the job. Without a thread to run it on (the in-process base) it runs inline."""

    call: Callable[[], Any]


@dataclass(frozen=True)
class _AskTimer:
    token: int


Job = Generator[Ask | OffThread, Any, None]


class Jobs:
    """One running job and a queue of those waiting; the owning actor feeds it answers and timers."""

    def __init__(self, send: Callable[[Any, Any], None], wakeup: Callable[[timedelta, Any], None],
                 offload: Callable[[Callable[[], Any]], None] | None = None) -> None:
        self._send = send
        self._wakeup = wakeup
        self._offload = offload  # runs an OffThread's call elsewhere; its result comes back through finished()
        self._away = False  # an OffThread call of the running job is in flight
        self._queue: deque[Callable[[], Job]] = deque()
        self._job: Job | None = None
        self._asked: Ask | None = None
        self._token = 0

    @property
    def busy(self) -> bool:
        return self._job is not None

    def submit(self, make: Callable[[], Job]) -> None:
        """Run ``make()`` now if idle, else after the jobs queued before it."""
        self._queue.append(make)
        if self._job is None:
            self._next()

    def offer(self, message: Any, sender: Any) -> bool:
        """An answer (or an ask timer): resume the job waiting for it; False if nothing waits for it."""
        if isinstance(message, _AskTimer):
            if self._asked is None or message.token != self._token:
                return True  # a timer of an ask answered long ago
            self._resume(TimedOut(self._asked.message))
            return True
        if self._asked is None or sender != self._asked.address:
            return False
        self._resume(message)
        return True

    def timer_payload(self, payload: Any) -> bool:
        return isinstance(payload, _AskTimer)

    def _next(self) -> None:
        while self._job is None and self._queue:
            self._job = self._queue.popleft()()
            self._resume(None)

    def finished(self, value: Any, error: BaseException | None) -> None:
        """The running job's OffThread call returned ``value`` (or raised ``error``): resume the job with it."""
        if not self._away:
            return  # no call in flight (a stray wake-up)
        self._away = False
        self._resume(value, error)

    def _resume(self, value: Any, error: BaseException | None = None) -> None:
        assert self._job is not None
        while True:
            self._asked = None
            try:
                ask = self._job.throw(error) if error is not None else self._job.send(value)
            except StopIteration:
                self._job = None
                self._next()
                return
            except BaseException:
                self._job = None
                raise
            if not isinstance(ask, OffThread):
                break
            if self._offload is not None:
                self._away = True
                self._offload(ask.call)
                return
            try:
                value, error = ask.call(), None
            except Exception as exc:
                value, error = None, exc
        self._token += 1
        self._asked = ask
        self._send(ask.address, ask.message)
        self._wakeup(timedelta(seconds=ask.timeout_s), _AskTimer(self._token))


__all__ = ["ASK_TIMEOUT_S", "Ask", "Job", "Jobs", "OffThread", "TimedOut"]
