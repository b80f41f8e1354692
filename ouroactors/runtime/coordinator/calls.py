"""Sequential asks inside an actor: a job is a generator that yields :class:`Ask` and is resumed with the answer.

**Why.** A thespian actor must not block in a handler, yet the coordinator's work is a sequence of
asks (start a runtime, acquire the lease, open, drain, ack …) with durable writes in between. Written
as callbacks it would be a tangle of half-states; written as a generator it reads as the protocol
does, and the actor stays responsive: while a job waits, other messages are queued as jobs of their
own (one job at a time, so two jobs never interleave their reads and writes of the session record).

An answer is matched by its sender (the address asked) and the ref its ask was sent with (below); an ask that
is not answered within its timeout resumes the job with :class:`TimedOut`. A job that raises crashes the worker
— let it crash: the supervisor restarts the coordinator and recovery reads the durable record back.

**Watched asks.** Thespian tells nobody but its supervisor that an actor died, so an ask to a dead
runtime waits out its whole timeout — and, one job at a time, so does everything else, recovery
included (a runtime killed during an ``AckOutput`` cost 10 s, then 2 s of drain). An ask may carry a
:class:`Watch`: every ``every_s`` without an answer, its ``check`` (the execution supervisor's
``which_child``) is asked whether the one asked still lives; when it does not, the job is resumed
with :class:`Gone` (a :class:`TimedOut`, so code that handles a timeout handles it). The supervisor
is the truth the coordinator's heartbeat and recovery already use, so "gone" here never disagrees
with what recovery then finds. The ask is sent once (a repeated ``SendText`` would run the turn
twice); only the check repeats. While a check is out the job is not resumed — an answer of the one
asked (or its timeout) is held until the check is answered — so a check's answer is not left behind
while the job goes on.

**Correlated admin answers.** Matching by sender alone cannot tell two answers of one supervisor apart: a
check unanswered within its timeout is given up, and so is any ask that timed out, and the late answer would
be taken for the answer of the job's next ask to that supervisor (``which_child``'s info for a
``start_child``). So every :class:`~ouroactors.supervision.calls.AdminCall` the runner sends — an ask's or a
check's — carries a fresh ``ref`` (one the job set itself is kept), the supervisor answers
:class:`~ouroactors.supervision.calls.AdminAnswer` with it, and the runner takes such an answer only when its
ref is the one the pending ask (or check) was sent with; the job is resumed with the answer's ``value``, as
before. Any other ``AdminAnswer`` — late, of an ask or check given up — is dropped (logged at debug), never
delivered to another ask. A thespian ``PoisonMessage`` returning a ref'd call is matched by that ref the same
way.

**Tagged asks.** The same holds for every other ask: a runtime or an authority asked again after a timeout could
answer the first ask late. So every ask that is not an ``AdminCall`` goes
:class:`~ouroactors.supervision.calls.Tagged` with a fresh ref, the worker answers
:class:`~ouroactors.supervision.calls.TaggedAnswer` with it (what it would answer the bare request with), and
the runner takes it by that ref exactly as it takes an ``AdminAnswer``; a bare message from the one asked is never
taken for the answer of a tagged ask.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from thespian.actors import PoisonMessage

from ...supervision.calls import AdminAnswer, AdminCall, Tagged, TaggedAnswer

log = logging.getLogger("ouroactors.coordinator")

ASK_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Watch:
    """How an ask finds out that the one asked is gone (see "Watched asks" above): ``check`` is asked every
    ``every_s`` without an answer, and ``alive`` judges its answer (an unanswered check judges nothing)."""

    check: Ask
    alive: Callable[[Any], bool]
    every_s: float = 1.0


@dataclass(frozen=True)
class Ask:
    address: Any
    message: Any
    timeout_s: float = ASK_TIMEOUT_S
    watch: Watch | None = None


@dataclass(frozen=True)
class Nap:
    """Asked of the actor itself and never answered: a job's pause (the ask's timeout resumes it). The actor
    drops it when it arrives."""


@dataclass(frozen=True)
class TimedOut:
    """Nothing answered ``message`` within its timeout."""

    message: Any


@dataclass(frozen=True)
class Gone(TimedOut):
    """The one asked ``message`` is gone: its watch's check answered ``found`` (the ask will never be answered)."""

    found: Any = None


@dataclass(frozen=True)
class OffThread:
    """A blocking call (a synced commit) run beside the actor: the job resumes with its value, or its exception is
    raised in the job. Without a thread to run it on (the in-process base) it runs inline."""

    call: Callable[[], Any]


@dataclass(frozen=True)
class _AskTimer:
    token: int


@dataclass(frozen=True)
class _CheckTimer:
    """Time to ask the watched ask's check (a slice went by without an answer)."""

    token: int


@dataclass(frozen=True)
class _CheckTimeout:
    """The check asked at the ``check``-th slice of the ask ``token`` has had its whole timeout."""

    token: int
    check: int


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
        self._checks = 0  # checks asked for the running ask (a timer names the one it is for)
        self._checking = False  # a check of the running ask's watch is out, unanswered
        self._held: tuple[Any] | None = None  # the asked's answer, come while the check was out
        self._expired = False  # the ask's timeout, come while the check was out
        self._refs = f"j.{uuid.uuid4().hex[:16]}"  # this runner's AdminCall refs: f"{_refs}.{n}"
        self._serial = 0
        self._ref: str | None = None  # the ref the running ask's AdminCall was sent with
        self._check_ref: str | None = None  # the ref the check out was sent with

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
        asked = self._asked
        if isinstance(message, _AskTimer | _CheckTimer | _CheckTimeout):
            if asked is None or message.token != self._token:
                return True  # a timer of an ask answered long ago
            if isinstance(message, _CheckTimer):
                self._check(asked)
            elif isinstance(message, _CheckTimeout):
                if self._checking and message.check == self._checks:  # the check itself went unanswered
                    self._checking = False
                    self._checked(asked, None)
            elif self._checking:
                self._expired = True  # resumed once the check is answered (see "Watched asks")
            else:
                self._resume(TimedOut(asked.message))
            return True
        ref = _ref_of(message)
        if ref is not None:  # a correlated answer: taken by the ask (or check) sent with its ref, or by nothing
            answer = message.value if isinstance(message, AdminAnswer | TaggedAnswer) else message
            if asked is not None and ref == self._ref and sender == asked.address:
                if not self._checking:
                    self._resume(answer)
                elif self._held is None:
                    self._held = (answer,)
            elif (asked is not None and self._checking and ref == self._check_ref and asked.watch is not None
                  and sender == asked.watch.check.address):
                self._checking = False
                self._checked(asked, answer)
            else:
                log.debug("dropped %s (ref %s) from %s: no ask waits for it (given up, or answered)",
                          type(message).__name__, ref, sender)
            return True
        # A bare message is an answer only to a bare ask: every ask and check is sent with a ref (see _with_ref), so
        # a bare message from the one asked is not its answer — a late answer to a bare request, or one it sent of
        # its own accord — and goes to the actor's handlers like any other.
        if asked is None:
            return False
        if sender == asked.address and self._ref is None:
            if not self._checking:
                self._resume(message)
            elif self._held is None:
                self._held = (message,)
            return True
        if (self._checking and self._check_ref is None and asked.watch is not None
                and sender == asked.watch.check.address):
            self._checking = False
            self._checked(asked, message)
            return True
        return False

    def _check(self, asked: Ask) -> None:
        """Ask the watch's check whether the one asked still lives (see "Watched asks")."""
        assert asked.watch is not None
        self._checks += 1
        self._checking = True
        message, self._check_ref = self._with_ref(asked.watch.check.message)
        self._send(asked.watch.check.address, message)
        self._wakeup(timedelta(seconds=asked.watch.check.timeout_s), _CheckTimeout(self._token, self._checks))

    def _checked(self, asked: Ask, found: Any) -> None:
        """The check answered ``found`` (None: it did not answer in time): resume the job, or watch on."""
        assert asked.watch is not None
        if self._held is not None:
            self._resume(self._held[0])
        elif found is not None and not asked.watch.alive(found):
            log.info("asked %s of %s: gone (%r)", type(asked.message).__name__, asked.address, found)
            self._resume(Gone(asked.message, found))
        elif self._expired:
            self._resume(TimedOut(asked.message))
        else:
            self._wakeup(timedelta(seconds=asked.watch.every_s), _CheckTimer(self._token))

    def _with_ref(self, message: Any) -> tuple[Any, str | None]:
        """``message`` as sent, and the ref its answer must carry: an AdminCall gets a fresh ref unless it has one;
        any other request goes :class:`~ouroactors.supervision.calls.Tagged` with one."""
        if isinstance(message, AdminCall) and message.ref is not None:
            return message, message.ref
        self._serial += 1
        ref = f"{self._refs}.{self._serial}"
        if isinstance(message, AdminCall):
            return dataclasses.replace(message, ref=ref), ref
        return Tagged(ref, message), ref

    def timer_payload(self, payload: Any) -> bool:
        return isinstance(payload, _AskTimer | _CheckTimer | _CheckTimeout)

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
        self._checking, self._held, self._expired = False, None, False
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
        message, self._ref = self._with_ref(ask.message)
        self._send(ask.address, message)
        self._wakeup(timedelta(seconds=ask.timeout_s), _AskTimer(self._token))
        if ask.watch is not None:
            assert ask.watch.check.address != ask.address, "a check's answer must be told from the ask's"
            self._wakeup(timedelta(seconds=ask.watch.every_s), _CheckTimer(self._token))


def _ref_of(message: Any) -> str | None:
    """The ref a message answers by: an AdminAnswer's or TaggedAnswer's, or that of the ref'd AdminCall or the
    Tagged request a PoisonMessage returns."""
    if isinstance(message, AdminAnswer | TaggedAnswer):
        return message.ref if isinstance(message.ref, str) else ""  # a junk ref matches no ask
    returned = message.poisonMessage if isinstance(message, PoisonMessage) else None
    if (isinstance(returned, AdminCall) and returned.ref is not None) or isinstance(returned, Tagged):
        return returned.ref if isinstance(returned.ref, str) else ""
    return None


__all__ = ["ASK_TIMEOUT_S", "Ask", "Gone", "Job", "Jobs", "Nap", "OffThread", "TimedOut", "Watch"]
