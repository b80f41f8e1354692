"""How a worker answers: the request in hand, a request handled earlier, and a message it no longer serves.

A mixin of :class:`~.worker.Worker`, kept apart from the shell's dispatch because its one rule is easy to break
from anywhere: **a request is answered once**. The worker keeps the asker of the request being handled
(``_in_hand``) until it is answered; a crash answers it only while it is still in hand. A second answer would reach
an asker who asked nothing more, and a handle's endpoint would give it to its next ask.

Every answer goes back as the request came: inside :class:`~.calls.TaggedAnswer` with its ref when it came tagged
(:class:`~.calls.Tagged`), bare otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from thespian.actors import ChildActorExited, PoisonMessage, WakeupMessage

from ..core.errors import ActorCrashedBefore, ActorStopped, ActorStopping, OuroactorsError
from .calls import Asker, TaggedAnswer, Unanswered
from .protocol import ArmFaults, GenerationAssigned, StopRequest
from .sendable import sending

if TYPE_CHECKING:
    from .reasons import ExitReason


class Answering:
    """See the module docstring."""

    if TYPE_CHECKING:  # what the worker provides
        path: str
        _tag: str | None
        _in_hand: Asker | None
        _notice: bool
        _asker_kept: bool
        _crash_reason: ExitReason | None
        _supervisor: Any

        def send(self, address: Any, message: Any) -> None: ...
        def _finish(self, reason: ExitReason) -> None: ...

    def _answer_now(self, sender: Any, answer: Any) -> None:
        """Answer the request being handled: inside :class:`~.calls.TaggedAnswer` when it came tagged."""
        self.answer_asker(Asker(sender, self._tag), answer)

    def asker_of(self, sender: Any) -> Asker:
        """Who sent the request being handled, to :meth:`answer_asker` later (a worker that answers after the handler
        returned: a group commit), tagged as the request was."""
        self._asker_kept = True
        return Asker(sender, self._tag)

    def _tell_unanswered(self) -> None:
        """The handler returned None: no answer. A handle's ask that asked for notice (``Tagged.notice``) hears so
        when the handler kept no asker to answer later, so that its timeout can name the cause instead of a bare
        "no answer". It still waits: a worker may send its asker something later by a raw ``send``."""
        asker = self._in_hand
        if self._notice and asker is not None and asker.tag is not None and not self._asker_kept:
            self.send(asker.address, Unanswered(asker.tag, self.path))

    def answer_asker(self, asker: Asker, value: Any) -> None:
        """Answer a request handled earlier (:meth:`asker_of`) as a handler's return value would have been."""
        if asker == self._in_hand:
            self._in_hand = None  # answered: a crash from here on (an after_message flush) does not answer it again
        sending.path = self.path  # an answer that cannot travel reaches the asker as UnsendableAnswer (.sendable)
        try:
            self.send(asker.address, value if asker.tag is None else TaggedAnswer(asker.tag, value))
        finally:
            sending.path = None

    def _refuse(self, message: Any, sender: Any) -> None:
        """Answer a message that came when this worker no longer serves: it crashed (``ActorCrashedBefore``) or it is
        stopping or not started (``ActorStopping``, a ``NoSuchActor``). Either says the message was not handled."""
        if sender is None or isinstance(message, ChildActorExited | PoisonMessage | WakeupMessage | StopRequest
                                                    | GenerationAssigned | ArmFaults | BaseException):
            # nothing to answer: notices, timers, a supervisor's requests to a child that is done, and errors (a
            # refusal answered with a refusal: two done actors, or one and itself, would trade them until killed)
            return
        who = self.path or type(self).__name__
        refusal: OuroactorsError = (
            ActorCrashedBefore(self.path, str(self._crash_reason))
            if self._crash_reason is not None
            else ActorStopping(who))
        self._answer_now(sender, refusal)
        self.refused(message, refusal)

    def _stop_in_handler(self, reason: ExitReason) -> None:
        """End the worker from inside a handler (``stop()``, ``sys.exit()``), telling an unanswered asker."""
        self._finish(reason)
        self._answer_unanswered(reason)

    def _answer_unanswered(self, reason: ExitReason) -> None:
        """The worker stops while handling a tagged request it has not answered (``stop()`` and no return value,
        or ``sys.exit()`` in the handler): its asker hears so now, rather than waiting until the worker's end is logged
        and then being told the request may or may not have been handled. It was: it stopped the worker."""
        asker = self._in_hand
        # only a tagged request is surely a request someone waits on (a handle's ask, see .calls.Tagged): a bare
        # message may be an answer to one of this worker's own asks, or a notice, whose sender expects nothing
        if asker is not None and asker.tag is not None and asker.address != self._supervisor:
            self.answer_asker(asker, ActorStopped(f"{self.path} stopped ({reason}) while handling this request, "
                                                  "without answering it"))

    def refused(self, message: Any, refusal: OuroactorsError) -> None:
        """``message`` came when this worker no longer serves (it crashed, it is stopping) and its sender was
        answered ``refusal``; a request made on someone else's behalf (a forwarded command) tells them here."""


__all__ = ["Answering"]
