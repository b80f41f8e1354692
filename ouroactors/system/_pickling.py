"""The in-process base, carrying every message as processes do: pickled on its way, unpickled on arrival.

On the multiproc base each message is pickled by the sender's transport and unpickled by the receiver's, so what
cannot travel fails there: a lambda, a generator or a lock in a request; an answer that does not pickle, does not
unpickle or is over the frame cap (the asker gets :class:`~ouroactors.core.errors.UnsendableAnswer`); and the receiver
always works on a copy, so a sender that mutates a list after sending it changes nothing the receiver sees. The
in-process base hands the very object over: a unit test on it passes where the same tree fails on multiproc.

``ActorSystem.start(base="simple", pickle_messages=True)`` (the pytest plugin's ``simple_system`` and
``simulated_system`` fixtures start so) swaps the base for one whose three entry points — an actor's send, the handle's
tell and ask — pickle and unpickle each message first, with the same rules as the transport (``system._patches``): an
answer that cannot travel becomes ``UnsendableAnswer`` for its asker, anything else that cannot travel raises where it
was sent, as on multiproc. The base's own notices (timers, a child's exit) stay as they are: they never cross a
process boundary as user data. This is Akka's ``serialize-messages`` for tests.
"""

from __future__ import annotations

import pickle
from typing import Any

from thespian.system.simpleSystemBase import ActorSystemBase

from ..core.errors import ActorSystemError
from ..supervision import sendable
from . import _frames


def carried(message: Any) -> Any:
    """``message`` as the receiving process would see it: the unpickled copy of its pickle, or what the sender's
    transport sends instead of an answer that cannot travel (``supervision.sendable``)."""
    try:
        body = pickle.dumps(message)
    except Exception as error:
        return _instead(message, error)
    refused = _frames.too_large(body)
    if refused is not None:
        return _instead(message, refused)
    instead = sendable.checked(message, body)  # an exception answer that would not unpickle
    return instead if instead is not None else pickle.loads(body)


def _instead(message: Any, error: BaseException) -> Any:
    instead = sendable.replacement(message, error)
    if instead is None:
        raise error
    return pickle.loads(pickle.dumps(instead))


class _PicklingSends:
    """The entry points of thespian's simple base, each message :func:`carried` first."""

    def actor_send(self, fromActor: Any, toActor: Any, msg: Any) -> Any:
        return super().actor_send(fromActor, toActor, carried(msg))  # type: ignore[misc]

    def tell(self, anActor: Any, msg: Any) -> Any:
        return super().tell(anActor, carried(msg))  # type: ignore[misc]

    def ask(self, anActor: Any, msg: Any, timeout: Any) -> Any:
        return super().ask(anActor, carried(msg), timeout)  # type: ignore[misc]


def active(thespian_system: Any) -> bool:
    """Whether ``thespian_system``'s base carries messages pickled (:func:`attach`)."""
    return isinstance(getattr(thespian_system, "_systemBase", None), _PicklingSends)


def attach(thespian_system: Any) -> None:
    """Make ``thespian_system``'s simple base carry messages pickled (keeping any other behaviour it was given, such
    as a simulation's virtual time: attach after it)."""
    base = getattr(thespian_system, "_systemBase", None)
    if not isinstance(base, ActorSystemBase):
        raise ActorSystemError("pickle_messages needs the simple base (simpleSystemBase)")
    current = type(base)
    if not issubclass(current, _PicklingSends):
        base.__class__ = type(f"Pickling{current.__name__}", (_PicklingSends, current), {})


__all__ = ["active", "attach", "carried"]
