"""A resolved actor address for repeated asks: :class:`ActorRef` (made by :meth:`.client.SystemClient.ref`).

Kept apart from the client so that each module stays one concept: the client resolves paths and retries against
the next incarnation; a ref names one incarnation and never moves.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

from ..core.errors import ActorStopped, NoSuchActor
from ..core.generation_text import format_generation
from ..supervision.calls import Addressed, Stamped, Tagged
from . import _stopped
from ._answers import STOPPED

if TYPE_CHECKING:
    from .client import SystemClient


class ActorRef:
    """A resolved actor address; asks go straight to it (no path lookup per ask).

    A ref names one incarnation. An address is a TCP port and nothing more: once the actor is gone, whoever is
    given its port next receives what the ref sends. So what a ref sends a worker goes
    :class:`~ouroactors.supervision.calls.Addressed` to the generation the worker had when the ref was made, and
    another worker at that port answers :class:`~ouroactors.core.errors.StaleGeneration` instead of acting on it.
    So does the same worker once its generation moved on: make a new ref then. This is no authority stamp: a
    request an authority fences still needs ``stamp`` (or :class:`~ouroactors.authorities.asking.StampedRef`).
    """

    def __init__(self, system: SystemClient, path: str, address: Any, worker: bool = False,
                 generation: int | None = None, resolved_at: int | None = None) -> None:
        self.system = system
        self.path = path
        self.address = address
        self.worker = worker  # a worker (not a supervisor): the in-process base tags what it is asked
        self.generation = generation if worker else None  # the incarnation its messages are for (None: any)
        # whether that incarnation is down (._stopped: the event log from where it ended when the ref was made)
        self._gone = (_stopped.watch(system.data_dir, resolved_at, path.strip("/"), self.generation)
                      if system.base == "multiproc" and self.generation is not None and resolved_at is not None
                      else None)

    def ask(self, message: Any, timeout: float = 5.0, *, stamp: int | None = None) -> Any:
        """Ask the incarnation the ref names; :class:`~ouroactors.core.errors.ActorStopped` once it is down without
        answering (as :meth:`SystemClient.ask`)."""
        sent_at = _stopped.log_end(self.system.data_dir) if self._gone is not None else None
        sent_ns = time.monotonic_ns()
        started = time.monotonic()
        gone = _stopped.AskWatch(self._gone, sent_at, sent_ns) if self._gone is not None else None
        answer = self.system._ask_raw(self.address, self._outgoing(message, stamp), timeout, worker=self.worker,
                                      gone=gone)
        if answer is STOPPED:
            assert self._gone is not None
            raise _stopped_error(self.path, self.generation, self._gone.ended_before(sent_at, sent_ns),
                                 "make a new ref")
        if answer is None and self.system.base == "multiproc" and time.monotonic() - started < timeout / 2:
            # at once: a dead letter (the in-process base answers a silence at once too)
            raise NoSuchActor(f"{self.path} (generation {format_generation(self.generation)}) is gone: the ask came "
                              "back undelivered; nothing was asked (make a new ref)")
        return self.system._answer(answer, self.path, timeout)

    def tell(self, message: Any) -> None:
        self.system._tell(self.address, self._outgoing(message, None))

    def _outgoing(self, message: Any, stamp: int | None) -> Any:
        if stamp is not None:
            message = Stamped(stamp, message)
        return _addressed(self.generation, message)


def _addressed(generation: int | None, message: Any) -> Any:
    """``message`` for the worker of ``generation`` (None, or addressed by the caller already: as it is). A request
    the caller tagged stays tagged outside: a worker unwraps the tag first, then the address at its door."""
    if generation is None or isinstance(message, Addressed):
        return message
    if isinstance(message, Tagged):
        return dataclasses.replace(message, request=_addressed(generation, message.request))
    return Addressed(generation, message)


def _stopped_error(path: str, generation: int | None, before: bool, then: str) -> NoSuchActor:
    """What an ask whose worker stopped without answering raises: :class:`NoSuchActor` when the end was logged
    before the ask was sent (never handled), else :class:`ActorStopped` (it may have been)."""
    which = f"{path} (generation {format_generation(generation)})"
    if before:
        return NoSuchActor(f"{which} had stopped before the ask was sent; nothing was asked ({then})")
    return ActorStopped(f"{which} stopped before it answered; the request may or may not have been handled")


__all__ = ["ActorRef"]
