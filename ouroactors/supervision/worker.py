"""The worker base class: a thespian actor with OTP's "let it crash" semantics.

Subclass :class:`Worker` and override ``on_start``, ``on_message`` (or ``handle_<Type>``
methods) and ``on_stop``. What changes compared with a plain thespian actor:

* An unhandled exception in a handler **ends the worker**. Thespian would retry the message once
  and then answer ``PoisonMessage`` while the actor keeps serving with half-mutated state; here the
  first exception is caught, ``on_stop`` runs with a ``crash`` reason, the sender of the failing
  message gets :class:`~ouroactors.core.errors.ActorCrashed` (unless it was answered already: a request is
  answered once, also by a worker that fails in ``after_message``), the supervisor is told the reason,
  and the supervisor ends the process. Messages that arrive in between are refused, not served.
* An exception in ``on_start`` is a start failure the supervisor sees with its reason.
* ``sys.exit()`` / ``sys.exit(0)`` in a handler stops the worker normally, as ``self.stop()`` does (an asker the
  handler left unanswered gets ``ActorStopped`` at once); ``sys.exit(n)`` with another ``n`` is a crash.
* An answer that cannot travel between processes reaches its asker as ``UnsendableAnswer`` (see :mod:`.sendable`).
* A message with no handler is answered with :class:`~ouroactors.core.errors.UnhandledMessage`
  (and logged), never silently dropped.
* The worker knows its tree ``path``, its authority ``generation`` and the ``authorities`` it may
  depend on (earlier siblings and ancestors' authorities, with their generations).

A handler's return value, when not ``None``, is sent back to the sender: ``ask`` gets it.
A handler may also *refuse* a request by raising one of the exception types the class lists in
``refusals`` (bad input, a conflict — nothing changed) or :class:`~ouroactors.core.errors.BadRequest`:
the sender gets the exception as its answer and the worker carries on. Every other exception is a
crash.

**Tagged requests** (:class:`~.calls.Tagged`: an asker that must tell its answers apart) are unwrapped and meet
every check a bare one does; every answer — return value, refusal, stale stamp, crash report — goes back inside
:class:`~.calls.TaggedAnswer` with the ref, also a late one (:meth:`Worker.asker_of`, :meth:`Worker.answer_asker`).

**The door of an authority.** A message whose type is in the class's ``protocol`` is checked field by field
(:func:`ouroactors.core.boundary.check_message`) before any handler sees it; a bad one is answered
:class:`~ouroactors.core.errors.BadRequest` and does nothing: an authority's restart restarts every consumer after
it. With ``stamped_only``, a protocol request without a generation stamp is answered
:class:`~ouroactors.core.errors.StampRequired` (fencing is not opt-in); only the ``reads`` types may come unstamped.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from datetime import timedelta
from types import MappingProxyType
from typing import Any

from thespian.actors import (
    Actor,
    ActorExitRequest,
    ChildActorExited,
    PoisonMessage,
    ThespianWatch,
    WakeupMessage,
)

from ..core import faults
from ..core.errors import (
    ActorCrashed,
    BadRequest,
    StaleGeneration,
    UnhandledMessage,
)
from ..core.faults import FaultAction
from . import reasons
from .admission import REFUSED, Admission
from .answering import Answering
from .calls import Addressed, Tagged, Undecodable, tagged_problem
from .calls import Asker as Asker  # re-exported: a worker subclass names it with the rest of this API
from .dispatch import bypassed_handler, handler_for
from .faulting import arm_here
from .leftovers import end_leftovers
from .owned import Owned, set_owned
from .protocol import IGNORE as IGNORE  # re-exported: what ``on_start`` returns (OTP's ignore)
from .protocol import (
    AnnounceGeneration,
    ArmFaults,
    ChildExiting,
    ChildStarted,
    ChildStartRefused,
    GenerationAssigned,
    Ok,
    Ping,
    Pong,
    Stamped,
    StartChild,
    StopRequest,
    SystemContext,
    this_node,
)
from .protocol import requirements_met as requirements_met  # re-exported (placement)
from .reasons import ExitReason
from .signals import AuthorityEntry, GenerationAdopted

log = logging.getLogger("ouroactors.worker")

# If the supervisor never ends a finished worker (its answer was lost), the worker ends itself.
_SELF_EXIT_AFTER = timedelta(seconds=10)
_SELF_EXIT = "ouroactors:self-exit"


class Worker(Answering, Admission, Actor):
    """Base class of every supervised worker."""

    __ouroactors_child__ = True

    # set by the framework only (.owned): a worker's own `self.path = ...` fails instead of renaming the actor
    path: Owned[str] = Owned("", "the actor's tree path")
    generation: Owned[int | None] = Owned(None, "the generation the actor was started with")
    refusals: tuple[type[Exception], ...] = ()  # raised by a handler: answered, not a crash
    protocol: tuple[type, ...] = ()  # request types checked at the door before dispatch
    stamped_only = False  # protocol requests must carry the generation stamp …
    reads: tuple[type, ...] = ()  # … except these, which change nothing
    # File descriptors this worker's loop also waits on (thespian's ThespianWatch; multiproc bases): when one is
    # readable the worker gets a ``WatchMessage``. A thread beside the actor uses this to hand work to the actor's
    # own thread — sends from other threads are not reliable in thespian's TCP transport.
    watched_fds: tuple[int, ...] = ()
    authorities: Owned[Mapping[str, AuthorityEntry]] = Owned(MappingProxyType({}), "the authorities it was started "
                                                                                  "against")
    context: Owned[SystemContext | None] = Owned(None, "the system's context (data dir, node, events)")

    @staticmethod
    def actorSystemCapabilityCheck(capabilities: dict[str, Any], requirements: dict[str, Any]) -> bool:
        return requirements_met(capabilities, requirements)

    # -- hooks for subclasses -------------------------------------------------------------------

    def on_start(self, *args: Any, **kwargs: Any) -> Any:
        """Called once with the spec's args and kwargs; raising makes the start fail.

        Returning :data:`IGNORE` is OTP's ``ignore``: the child is not started and that is not a failure — its
        supervisor keeps the spec (status ``undefined``; ``restart_child`` may start it later), and a
        simple_one_for_one supervisor adds nothing.
        """

    @classmethod
    def on_preload(cls) -> None:
        """Called once in a ``simple_one_for_one`` supervisor's process, after it imported this worker's module and
        before its children are forked from it: compute here what every child would otherwise compute for itself
        (caches, probes), and each child inherits it. Never open what a forked child cannot share (an LMDB
        environment, a thread, a socket). An exception is logged and ignored: the children do the work themselves.
        """

    def on_message(self, message: Any, sender: Any) -> Any:
        """Handle one message. The default dispatches to ``handle_<TypeName>`` along the MRO."""
        handler = handler_for(self, message)
        return handler(message, sender) if handler is not None else self.unhandled(message, sender)

    def on_stop(self, reason: ExitReason) -> None:
        """Called once when the worker ends: asked to stop, stopping itself, or crashed."""

    def on_generation(self, generation: int) -> None:
        """Called when a generation change this worker announced is assigned ``generation``.

        Take the number into use here (for example write it where consumers fence on it): the
        supervisor restarts the consumers only after this returns. Raising crashes the worker.
        """

    def after_message(self) -> None:
        """Called after every message this worker handled (a place to flush batched work)."""

    def messages_waiting(self) -> bool:
        """Whether messages already received by this process are waiting to be handled.

        Thespian's TCP transport reads every ready socket in one pass and queues the envelopes;
        a batching actor (the ledger's group commit) defers its commit while this is true, so
        everything that arrived together is committed together, with no timer. Where the base
        does not expose the queue (in-process base) this answers False: commit at once.
        """
        transport = getattr(getattr(self, "_myRef", None), "transport", None)
        return bool(getattr(transport, "_incomingEnvelopes", None))

    def unhandled(self, message: Any, sender: Any) -> Any:
        """Report a message nobody handles: log it and answer the sender with an error — unless the message is an
        error itself (a refusal answering one of ours): answering it would start two actors refusing each other's
        refusals forever."""
        name = type(message).__name__
        hint = bypassed_handler(self, message, type(self).on_message is not Worker.on_message)
        log.warning("%s: no handler for %s%s", self.path, name, f"; {hint}" if hint else "")
        if isinstance(message, BaseException) or (isinstance(message, WakeupMessage) and sender == self.myAddress):
            return None  # (an own timer nobody handles: logged, not answered to itself)
        return UnhandledMessage(self.path, name, hint)

    # -- API for subclasses ---------------------------------------------------------------------

    def stop(self, reason: ExitReason | None = None) -> None:
        """End this worker after the current message (default reason ``normal``)."""
        self._stop_after = reason or reasons.normal()

    def change_generation(self, cause: str) -> None:
        """Announce a new authority generation without crashing.

        Until the supervisor assigns the new number, every stamped request is refused, so no
        consumer acts on a decision of the generation that is ending. Under rest_for_one the
        supervisor then restarts every later sibling.
        """
        self._generation_pending = True
        self.send(self._supervisor, AnnounceGeneration(self._key, self._incarnation, cause))

    def stamp(self, authority: str, payload: Any) -> Stamped:
        """Wrap ``payload`` for ``authority`` with the generation this worker was started against."""
        return Stamped(self.authorities[authority].generation, payload)

    def request(self, authority: str, payload: Any) -> None:
        """Send a stamped request to one of this worker's authorities."""
        entry = self.authorities[authority]
        self.send(entry.address, Stamped(entry.generation, payload))

    # -- the shell ------------------------------------------------------------------------------

    _state = "new"  # new -> running -> done
    _stop_after: ExitReason | None = None
    _generation_pending = False
    _crash_reason: ExitReason | None = None
    _supervisor: Any = None
    _key = ""
    _incarnation = 0
    _tag: str | None = None  # the ref of the tagged request being handled (its answers are tagged with it)
    _in_hand: Asker | None = None  # who sent the request being handled, until it is answered (a crash answers it)
    _notice: bool = False  # the request being handled is a handle's ask: a None from its handler is told (answering)
    _asker_kept: bool = False  # the handler took asker_of(): it answers later

    def receiveMessage(self, message: Any, sender: Any) -> ThespianWatch | None:
        if isinstance(message, Tagged):  # answered TaggedAnswer(ref, ...), whatever the answer (see .calls)
            refused = tagged_problem(message)
            if refused is not None:
                self.send(sender, refused)
                return ThespianWatch(list(self.watched_fds)) if self.watched_fds else None
            self._tag, self._notice = message.ref, getattr(message, "notice", False)
            try:
                return self._door(message.request, sender)  # it meets every check a bare request does
            finally:
                self._tag, self._notice = None, False
        return self._door(message, sender)

    def _door(self, message: Any, sender: Any) -> ThespianWatch | None:
        if isinstance(message, Addressed):  # for one incarnation (see .calls): then it meets every check bare
            if self._bad_generation(message, sender):
                return ThespianWatch(list(self.watched_fds)) if self.watched_fds else None
            if message.generation != self.generation:
                self._answer_now(sender, StaleGeneration(self.path, self.generation, message.generation))
                return ThespianWatch(list(self.watched_fds)) if self.watched_fds else None
            message = message.payload
        if isinstance(message, ActorExitRequest):
            return None  # our process is being ended (by the supervisor, or the system shutting down)
        if isinstance(message, Undecodable):  # it named classes this process cannot import (system._decoding)
            self._answer_now(sender, BadRequest("Undecodable", "", f"could not be decoded here: {message.describe()}"))
            return ThespianWatch(list(self.watched_fds)) if self.watched_fds else None
        if isinstance(message, WakeupMessage) and sender != self.myAddress:
            # thespian delivers an actor's timers from its own address (every base); one sent by another actor is
            # forged: it could resume a pending ask as timed out, or end this worker (_SELF_EXIT)
            self._answer_now(sender, BadRequest("WakeupMessage", "", "is a timer of the actor itself, never a message "
                                                                 "from another"))
            return ThespianWatch(list(self.watched_fds)) if self.watched_fds else None
        if isinstance(message, WakeupMessage) and message.payload == _SELF_EXIT:
            self.send(self.myAddress, ActorExitRequest())
            return None
        faults.acting_as(self.path)  # one store; tells actors apart where they share a process
        self._in_hand, self._asker_kept = Asker(sender, self._tag), False
        try:
            self._handle_message(message, sender)
        except Exception as exc:  # the first exception ends the worker: no retry, no poison
            self._crash(exc, sender)
        except SystemExit as exc:  # sys.exit() in a handler: 0 or None stops the worker normally, else a crash
            if exc.code in (None, 0) and self._state == "running":
                self._stop_in_handler(reasons.normal())
            else:
                self._crash(exc, sender)
        finally:
            self._in_hand = None
        # thespian resets the watch list after every message: name the descriptors again each time
        return ThespianWatch(list(self.watched_fds)) if self.watched_fds else None

    def _handle_message(self, message: Any, sender: Any) -> None:
        if isinstance(message, StartChild):
            self._begin(message, sender)
            return
        if self._state != "running":
            self._refuse(message, sender)
            return
        if isinstance(message, StopRequest):
            if message.names_another(self._key, self._incarnation):
                log.warning("%s: a stop request for %s#%s ignored: not this child (a dead one's reused port)",
                            self.path, message.key, message.incarnation)
                return
            self._finish(message.reason)
            return
        if isinstance(message, Ping):
            if not message.names_another(self._key, self._incarnation):
                self._answer_now(sender, Pong(message.key, message.incarnation))
            return
        if isinstance(message, GenerationAssigned):
            set_owned(self, "generation", message.generation)
            self.on_generation(message.generation)
            self._generation_pending = False
            self.send(self._supervisor, GenerationAdopted(self._key, self._incarnation, message.generation))
            return
        if isinstance(message, ArmFaults):
            if message.children is not False:  # a worker starts no children: arming itself would be a surprise
                self._answer_now(sender, BadRequest("ArmFaults", "children", "a worker starts no children (arm "
                                                    "its supervisor for them)", repr(message.children)[:40]))
                return
            arm_here(message.plan, self.context, self.path)
            self._answer_now(sender, Ok())
            return
        if isinstance(message, ChildActorExited | PoisonMessage) and not hasattr(self, "handle_ChildActorExited"):
            if isinstance(message, PoisonMessage):  # a send of ours thespian gave up on (it did not pickle, …)
                log.warning("%s: a %s it sent was not delivered: %s", self.path,
                            type(message.poisonMessage).__name__, str(message.details)[:500])
            return  # plain thespian children of this worker are its own business
        message = self._admitted(message, sender)  # stamps and the protocol's fields (.admission)
        if message is REFUSED:
            return
        verdict = faults.point(f"message.{self.path}")  # free unless a plan is armed
        if verdict is FaultAction.DROP:
            return
        refusals: tuple[type[Exception], ...] = (BadRequest, *self.refusals)
        for _ in range(2 if verdict is FaultAction.DUPLICATE else 1):
            try:
                result = self.on_message(message, sender)
            except refusals as refusal:
                result = refusal
            if result is not None:
                self._answer_now(sender, result)
        self.after_message()
        if self._stop_after is not None:
            self._stop_in_handler(self._stop_after)
        elif result is None:
            self._tell_unanswered()

    def _begin(self, start: StartChild, sender: Any) -> None:
        if self._state != "new":
            return
        self._supervisor = sender
        self._key = start.key
        self._incarnation = start.incarnation
        set_owned(self, "path", start.path)
        faults.acting_as(start.path)  # a point reached in on_start is this actor's (the door named it '' so far)
        set_owned(self, "generation", start.generation)
        set_owned(self, "context", start.context)
        set_owned(self, "authorities", {entry.name: entry for entry in start.snapshot})
        if start.fault_plan is not None:  # its supervisor's plan for the children it starts (ArmFaults.children)
            arm_here(start.fault_plan, start.context, start.path)
        try:
            started = self.on_start(*start.args, **start.kwargs)
        except (Exception, SystemExit) as exc:  # sys.exit() in on_start fails the start like any exception
            reason = reasons.crash(exc)
            log.error("%s: start failed: %s", start.path, reason, exc_info=True)
            self._start_refused(start, sender, reason)
            return
        if started is IGNORE:  # OTP's ignore: the supervisor keeps the spec and runs nothing
            self._start_refused(start, sender, reasons.ignore())
            return
        self._state = "running"
        self.send(sender, ChildStarted(start.key, start.incarnation, os.getpid(), str(self.myAddress), this_node()))

    def _start_refused(self, start: StartChild, sender: Any, reason: ExitReason) -> None:
        self._state = "done"
        end_leftovers(self.context, self.path)  # what a failed on_start started ends with it, as after a crash
        self.send(sender, ChildStartRefused(start.key, start.incarnation, reason))
        self._exit_if_forgotten()

    def _finish(self, reason: ExitReason) -> None:
        """Run ``on_stop`` once, tell the supervisor why, and wait to be ended."""
        self._state = "done"  # from here every message is refused (or, once the process ends, dropped) unhandled
        stopped_ns = time.monotonic_ns()
        try:
            self.on_stop(reason)
        except Exception as exc:
            log.error("%s: on_stop raised", self.path, exc_info=True)
            reason = reasons.crash(exc)
        end_leftovers(self.context, self.path)  # what this incarnation started ends with it (.leftovers)
        self.send(self._supervisor, ChildExiting(self._key, self._incarnation, reason, stopped_ns))
        self._exit_if_forgotten()

    def _exit_if_forgotten(self) -> None:
        """Between processes a report can be lost; then end ourselves after a while.

        Not on the in-process base: nothing is lost there, and its timers cost every send.
        """
        if self.context is not None and self.context.base != "simple":
            self.wakeupAfter(_SELF_EXIT_AFTER, payload=_SELF_EXIT)

    def _crash(self, exc: BaseException, sender: Any) -> None:
        reason = reasons.crash(exc)
        if self._state != "running":
            log.error("%s crashed: %s", self.path or type(self).__name__, reason, exc_info=True)
            if self._supervisor is None:
                self.send(self.myAddress, ActorExitRequest())
            return
        self._crash_reason = reason
        self._finish(reason)  # the supervisor hears first: its restart is the critical path
        if sender is not None and sender != self._supervisor and self._in_hand is not None:
            # not when the request was answered already (a second answer reaches an asker who asked nothing more:
            # a handle's endpoint gave it to its next ask)
            self._answer_now(sender, ActorCrashed(self.path, str(reason)))
        log.error("%s crashed: %s", self.path, reason, exc_info=(type(exc), exc, exc.__traceback__))
