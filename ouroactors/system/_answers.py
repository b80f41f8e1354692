"""How the handle gets answers: asks through an endpoint that never takes a late answer.

Mixed into :class:`~.handle.ActorSystem` (and the views of :func:`ouroactors.faults._asking.isolated`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import math
import os
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

from thespian.actors import ActorSystem as ThespianSystem
from thespian.actors import PoisonMessage

from ..core.errors import ActorCrashed, AskTimeout, StartFailed, UnsendableAnswer
from ..supervision.calls import (
    Addressed,
    AdminAnswer,
    AdminCall,
    Ok,
    Stamped,
    Tagged,
    TaggedAnswer,
    Unanswered,
    Undecodable,
)
from . import _stopped
from ._threads import ThreadEndpoints, close_endpoint

log = logging.getLogger("ouroactors.system")
# What an ask answers when the worker it went to stopped without answering it (see ._stopped).
STOPPED = object()
MULTIPROC = "multiprocTCPBase"
_REFS = itertools.count(1)
# Refs differ between processes too: an endpoint may get the port of another process's dead endpoint, and with it
# the late answers to that one's asks (a fork draws a new prefix).
_PREFIX = secrets.token_hex(4)


def _new_prefix() -> None:
    global _PREFIX
    _PREFIX = secrets.token_hex(4)


os.register_at_fork(after_in_child=_new_prefix)


def tagged_for(request_id: str) -> Callable[[Any], bool]:
    """Which messages answer a request carrying ``request_id`` ("" for none).

    An answer whose type sets ``ANSWERS_BY_REQUEST_ID`` (a session's events, which may come twice or as a stream)
    answers only the request with the same id; a message whose type sets ``NEVER_AN_ANSWER`` answers nothing: a
    heartbeat ``Ping`` sent to this endpoint because it holds a lease, and the requests and pushes actors send each
    other (``Addressed``, ``Stamped``, ``Tagged``, ``AdminCall``, ``StartChild``, ``StopRequest``, ``OutputReady``,
    ``Committed``), which reach this endpoint when it got the port of an actor that died while they were still sent
    to it. Any other message answers whatever was asked. So neither a stream's late answer, nor a heartbeat, nor
    another actor's mail passes for the answer to an ask on this endpoint. Nor do the pushes a child sends its
    supervisor (``ChildStarted``, ``ChildStartRefused``, ``ChildExiting``, ``AnnounceGeneration``,
    ``GenerationAdopted``), a ``Pong`` when the ask was no ``Ping`` (:func:`_answering`), and on the multiproc base
    an answer tagged with a ref the ask did not send (another actor's ask of an actor that died:
    :func:`_own_ref_only`)."""
    def accept(message: Any) -> bool:
        if getattr(type(message), "NEVER_AN_ANSWER", False):
            return False
        if not getattr(type(message), "ANSWERS_BY_REQUEST_ID", False):
            return True
        return getattr(message, "request_id", None) == request_id
    return accept


def has_traceback(exc: BaseException) -> bool:
    """Whether the actor behind ``exc`` raised (its traceback is logged), rather than exited or was killed without
    raising (``os._exit``, a signal, a placement nobody could make): then pointing at a traceback sends the reader to a
    file that has none."""
    return not isinstance(exc, StartFailed) or "crash(" in str(exc)


class Answers:
    """Asks, endpoints and answer decoding of :class:`~.handle.ActorSystem`."""

    _thespian: Any
    _asker: Any
    base: str
    admin_port: int | None
    _threads: ThreadEndpoints | None = None  # the other threads' endpoints (multiproc; see ._threads)
    _turns: threading.RLock | None = None  # the in-process base: one call at a time (see ._threads)
    _teller_lock = threading.Lock()  # (one per handle, set by the client; this one serves views made without)

    # -- answers --------------------------------------------------------------------------------------

    def _call(self, address: Any, message: Any, timeout: float, what: str) -> Any:
        return self._answer(self._ask_raw(address, message, timeout), what, timeout)

    def _answer(self, answer: Any, what: str, timeout: float) -> Any:
        """:meth:`_unwrap`, and a crash or failed start raised from here names the file with its traceback."""
        try:
            return self._unwrap(answer, what, timeout)
        except (StartFailed, ActorCrashed) as exc:
            note = self._log_note() if has_traceback(exc) else None
            if note and note not in getattr(exc, "__notes__", ()):
                exc.add_note(note)  # pytest shows it under the error; the CLI prints it on a line of its own
            raise

    def _log_note(self) -> str | None:
        """Where a crashed actor's whole traceback is: the admin's output, which every actor inherits.

        The in-process base logs through the caller's own logging (pytest shows it with the failure).
        """
        data_dir = getattr(self, "data_dir", None)
        if self.base != "multiproc" or data_dir is None:
            return None
        return f"the actor's full traceback is in {os.path.join(data_dir, 'admin.out')}"

    @property
    def _endpoint(self) -> Any:
        threads = self._threads
        if threads is None or threads.is_owner():
            return self._asker if self._asker is not None else self._thespian
        return threads.mine()  # another thread of this handle: an endpoint of its own (see ._threads)

    def _taking_turns(self) -> contextlib.AbstractContextManager[Any]:
        return self._turns if self._turns is not None else contextlib.nullcontext()

    def _ask_raw(self, address: Any, message: Any, timeout: float, *, worker: bool = False,
                 gone: Callable[[], bool] | None = None) -> Any:
        """One thespian ask; once an ask has timed out, later asks go through a fresh endpoint.

        thespian's external ask returns the next message that reaches the endpoint, so the answer
        to an ask that timed out would be taken by the *next* ask as its own. After a timeout the
        endpoint is therefore abandoned: its late answers go nowhere. A fresh endpoint costs one
        connection to the admin (~2 ms), paid only after a timeout. The in-process base has one
        endpoint and no other: an actor there that holds a request past its ask's timeout and answers
        later would hand that answer to the next ask (thespian's simple base does), and every later ask would
        take the answer of the one before, for good. And on either base, an actor that answers one request twice (a
        crash report after the answer; the session directory's "outcome unknown" for a command whose coordinator
        answered and died before it could say so) hands the second answer to the next ask. So every ask carries a
        ref of its own: a supervisor's :class:`~ouroactors.supervision.calls.AdminCall` in its ``ref``, a request to
        a worker (``worker``: the caller resolved the path to one) inside
        :class:`~ouroactors.supervision.calls.Tagged`, which every worker answers
        :class:`~ouroactors.supervision.calls.TaggedAnswer` with that ref, whenever it answers (and a session
        directory passes on to the coordinator that answers a command: :class:`~ouroactors.runtime.coordinator.messages
        .ForSession`'s ``tag``). An ask takes only the answer with its own ref (unwrapped), and no ask takes one with
        another's. A worker that answers with a raw ``send`` of its own is not covered (its answer carries no ref).

        ``gone`` (multiproc): whether the worker asked has stopped since its path was resolved; an ask that waits
        looks now and then (:meth:`_watched`), and answers :data:`STOPPED` instead of waiting out its timeout.
        """
        with self._taking_turns():
            return self._ask_once(address, message, timeout, worker=worker, gone=gone)

    def _ask_once(self, address: Any, message: Any, timeout: float, *, worker: bool,
                  gone: Callable[[], bool] | None) -> Any:
        _check_timeout(timeout)
        started = time.monotonic()
        if self._is_own(address):
            return None  # the actor at that port is dead and the port is ours now: a dead letter (see _is_own)
        # a message that is not this ask's answer (a late or streamed answer to an earlier request, told apart by its
        # request id: see tagged_for) is dropped, and the endpoint listens on for the rest of the timeout
        accept = _answering(tagged_for(getattr(getattr(message, "payload", message), "request_id", "")), message)
        # each ask carries a ref its answer comes back with (see the docstring); an answer with another ref is late,
        # a second one, or was sent to a dead actor whose port this endpoint got
        message, ref = _with_ref(message, worker)
        accept = _own_ref_only(accept, ref or _sent_ref(message))
        told: list[Unanswered] = []  # the worker's word that its handler returned None (kept to name the timeout)
        if ref is not None:
            accept = _noting_unanswered(accept, ref, told)
        if gone is not None and self.base == "multiproc":
            answer = self._watched(address, message, timeout, accept, gone, started)
        else:
            answer = self._endpoint.ask(address, message, timeout)
            while answer is not None and not accept(answer):
                left = timeout - (time.monotonic() - started)
                answer = self._endpoint.listen(left) if left > 0 else None
        if ref is not None and isinstance(answer, TaggedAnswer | AdminAnswer):
            answer = answer.value
        if answer is STOPPED or (answer is None and self.base == "multiproc"
                                 and time.monotonic() - started >= timeout * 0.9):
            self._renew_endpoint()  # a late answer to this ask then goes nowhere
        if answer is None and told:
            return AskTimeout(
                f"no answer from {told[0].path} within {timeout}s: it handled the request and its handler returned "
                "None, which sends no answer (return a value that is not None; to answer later, keep "
                "self.asker_of(sender) and call self.answer_asker(asker, value))")
        return answer

    def _watched(self, address: Any, message: Any, timeout: float, accept: Callable[[Any], bool],
                 gone: Callable[[], bool], started: float) -> Any:
        """The ask of :meth:`_ask_raw`, looking every :data:`~._stopped.SLICE_S` without an answer whether the
        worker it went to has stopped (``gone``): then :data:`STOPPED`, after a short grace for an answer it sent
        before it stopped (see :mod:`._stopped`). An empty answer at once is a dead letter, as before: None."""
        first = min(timeout, _stopped.SLICE_S)
        answer = self._endpoint.ask(address, message, first)
        if answer is None and time.monotonic() - started < first / 2:
            return None
        while answer is None or not accept(answer):
            left = timeout - (time.monotonic() - started)
            if left <= 0:
                return None
            if answer is None and gone():
                if isinstance(gone, _stopped.AskWatch) and gone.unhandled():
                    return STOPPED  # down before this ask was sent: no answer to it can be on its way
                grace_ends = time.monotonic() + min(left, _stopped.GRACE_S)
                while (rest := grace_ends - time.monotonic()) > 0:
                    answer = self._endpoint.listen(rest)
                    if answer is None or accept(answer):
                        break
                return answer if answer is not None and accept(answer) else STOPPED
            answer = self._endpoint.listen(min(left, _stopped.SLICE_S))
        return answer

    def listen_tagged(self, request_id: str, timeout: float) -> Any:
        """The next message answering request ``request_id`` (a stream's next answer), or None after ``timeout``
        seconds; other tagged answers that arrive meanwhile (of earlier requests) are dropped."""
        started = time.monotonic()
        accept = tagged_for(request_id)
        with self._taking_turns():
            while (left := timeout - (time.monotonic() - started)) > 0:
                message = self._endpoint.listen(left)
                if message is None or accept(message):
                    return message
        return None

    _teller: Any = None  # the endpoint tells go out through (multiproc), made at the first tell

    def _is_own(self, address: Any) -> bool:
        """Is ``address`` the port of one of this handle's own endpoints?

        An actor's address is a TCP port and nothing more: once the actor is dead, the next socket the kernel
        binds may get that port, and what is sent to the dead actor's address reaches that socket's owner. When
        the owner is an endpoint of this handle (a fresh one after a timeout, the teller, a private one of
        :func:`ouroactors.faults._asking.isolated`), thespian hands the message back to the handle: an ask got its
        own request as the answer (found by a chaos campaign: ``RuntimeStatusRequest`` answered with itself), and
        a tell left a stray message where the next ask took it as its answer. Such an address is a dead actor's.
        """
        if self.base != "multiproc":
            return False
        others = self._threads.endpoints() if self._threads is not None else []
        for endpoint in (self._thespian, self._asker, self._teller, *others):
            transport = getattr(getattr(endpoint, "_systemBase", None), "transport", None)
            if transport is not None and getattr(transport, "myAddress", None) == address:
                return True
        return False

    def _tell(self, address: Any, message: Any) -> None:
        """Send ``message`` to ``address``, expecting nothing back.

        Whatever the receiver sends back to a tell's sender — an actor that answers every message, a crash report,
        "not running" — must never reach the endpoint asks listen on: an ask takes the next message that arrives
        there, so one answer to a tell shifted every later ask by one answer, for good. So on the multiproc base
        tells go out through an endpoint of their own, whose incoming messages nobody reads. The in-process base
        has one endpoint and only runs while called: a tell is handled at once, and what it sent back to the
        caller is dropped here.
        """
        if self._is_own(address):
            log.debug("a tell to %s dropped: that port is this handle's own now (its actor is gone)", address)
            return
        if self.base != "multiproc" or self.admin_port is None:
            with self._taking_turns():
                self._endpoint.tell(address, message)
                while self._endpoint.listen(0) is not None:
                    pass  # the told actor's answer (or crash report) to the caller: not an answer to any ask
            return
        with self._teller_lock:  # one teller for every thread: its sends take turns (a tell is quick)
            if self._teller is None:
                self._teller = self._fresh_endpoint()
            self._teller.tell(address, message)

    def _fresh_endpoint(self) -> Any:
        """A new thespian endpoint to this system's admin (one connection, ~2 ms)."""
        return ThespianSystem(MULTIPROC, {"Admin Port": self.admin_port}, transientUnique=True)

    def _renew_endpoint(self) -> None:
        if self.admin_port is None:
            return
        if self._threads is not None and not self._threads.is_owner():
            self._threads.renew()  # that thread's own: the next ask opens a fresh one
            return
        try:
            fresh = self._fresh_endpoint()
        except Exception as exc:  # the admin is gone: the next ask reports that
            log.debug("no fresh endpoint after a timeout: %s", exc)
            return
        self._close_asker()  # the previous fresh one, if any; never the one the handle was made with
        self._asker = fresh

    def _close_asker(self) -> None:
        asker, self._asker = self._asker, None
        _close(asker)

    def _close_endpoints(self) -> None:
        """Close the endpoints this handle opened after a timeout and for tells (not the one it was made with)."""
        self._close_asker()
        teller, self._teller = self._teller, None
        _close(teller)
        if self._threads is not None:
            self._threads.close()

    @staticmethod
    def _unwrap(answer: Any, what: str, timeout: float) -> Any:
        if answer is None:
            raise AskTimeout(f"no answer from {what} within {timeout}s")
        if isinstance(answer, BaseException):
            raise answer
        if isinstance(answer, Undecodable):  # (see ._decoding)
            raise UnsendableAnswer(what, answer.missing[0].split(" ", 1)[0], (
                f"this process cannot import what it names: {answer.describe()} (ask from where the actors' modules "
                "import, e.g. the project's directory)"))
        if isinstance(answer, PoisonMessage):
            raise ActorCrashed(what, answer.details)
        if isinstance(answer, Ok):
            return answer.value
        return answer


def _check_timeout(timeout: Any) -> None:
    """An ask's ``timeout`` is a finite number of seconds, 0 or more (thespian would fail on NaN, infinity or a str
    somewhere inside, and take a negative one for 0)."""
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 <= timeout < math.inf:
        raise ValueError(f"timeout must be a finite number of seconds >= 0, not {timeout!r}")


def _with_ref(message: Any, worker: bool) -> tuple[Any, str | None]:
    """``message`` as it is sent, with a fresh ref its answer will carry (None: it carries none — a message to the
    tree host, or one the caller tagged itself)."""
    if type(message) is AdminCall and message.ref is None:
        ref = f"ask-{_PREFIX}-{next(_REFS)}"
        return dataclasses.replace(message, ref=ref), ref
    if worker and not isinstance(message, Tagged | AdminCall):
        ref = f"ask-{_PREFIX}-{next(_REFS)}"
        return Tagged(ref, message, notice=True), ref
    return message, None


def _answering(accept: Callable[[Any], bool], request: Any) -> Callable[[Any], bool]:
    """``accept``, and an answer whose type names the requests it answers (``ANSWERS_ONLY``: a ``Pong`` answers a
    ``Ping``) only when ``request`` (inside its envelopes) is one of them."""
    while isinstance(request, Addressed | Stamped | Tagged):
        request = request.request if isinstance(request, Tagged) else request.payload

    def accept_answer(message: Any) -> bool:
        only = getattr(type(message), "ANSWERS_ONLY", None)
        return accept(message) and (only is None or isinstance(request, only))
    return accept_answer


def _sent_ref(message: Any) -> str | None:
    """The ref an outgoing request carries (a caller that tagged it itself), None for none."""
    ref = message.ref if isinstance(message, Tagged | AdminCall) else None
    return ref if isinstance(ref, str) else None


def _own_ref_only(accept: Callable[[Any], bool], sent: str | None) -> Callable[[Any], bool]:
    """``accept``, and of the answers that carry a ref only the one with ``sent`` (None: none of them). On the
    multiproc base the handle's asks tag nothing of their own, and actors tag their asks of each other (a
    coordinator's, a supervisor's admin calls): such an answer reaching a handle endpoint was meant for an actor that
    died, whose port the endpoint got. On the in-process base every ask to an actor carries a ref: an answer with
    another's is late (its ask timed out) or a second one (its ask was answered already), and an ask that carries
    none (to the tree host, which tags nothing) takes no tagged answer at all."""
    def accept_own(message: Any) -> bool:
        if not accept(message):
            return False
        carried = _ref_of(message)
        if isinstance(message, TaggedAnswer | AdminAnswer):  # a tagged answer (one with no str ref is malformed)
            return sent is not None and carried == sent
        return carried is None or carried == sent
    return accept_own


def _noting_unanswered(accept: Callable[[Any], bool], ref: str,
                       told: list[Unanswered]) -> Callable[[Any], bool]:
    """``accept``, keeping in ``told`` the :class:`~ouroactors.supervision.calls.Unanswered` notice of this ask (an
    ask with another ref: dropped, as every message that is no answer)."""
    def accept_noting(message: Any) -> bool:
        if type(message) is Unanswered and message.ref == ref and not told:
            told.append(message)
        return accept(message)
    return accept_noting


def _ref_of(message: Any) -> str | None:
    """The ref an answer carries: a tagged answer's, or that of the request a crash report returns."""
    if isinstance(message, TaggedAnswer | AdminAnswer):
        return message.ref
    if isinstance(message, PoisonMessage) and isinstance(message.poisonMessage, Tagged | AdminCall):
        ref = message.poisonMessage.ref
        return ref if isinstance(ref, str) else None
    return None


_close = close_endpoint  # an endpoint this handle opened (None: there is none)
