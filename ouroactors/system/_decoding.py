"""A message that names a class this process cannot import still arrives: as :class:`Undecodable`, saying which.

A frame is unpickled where it arrives. Its message may name a class the receiving process cannot import: an answer of
the user's own type (``myapp.store.Item``) asked for by ``ouroactors ask`` run from outside the project, or a request
to an actor on another node without that module. thespian's transport then fails inside ``pickle.loads``, logs, and
drops the frame: the asker waits out its whole timeout and reads "no answer", although the worker answered at once.

So :func:`loads` first unpickles as before (the C unpickler: nothing changes on the fast path), and only when that
fails *for a class it cannot find* unpickles again with one whose ``find_class`` stands in for each missing class. The
message then arrives as :class:`Undecodable` naming the missing classes and why — inside the ``TaggedAnswer`` (or
``Tagged``) it came in, so the ask it answers takes it (and raises :class:`~ouroactors.core.errors.UnsendableAnswer`)
— and a worker answers a request it could not decode with ``BadRequest``. Frames are authenticated before they are
unpickled (:mod:`._frames`), and a stand-in runs no code of the class it replaces: this changes what a failure looks
like, not what may be unpickled.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

from ..supervision.calls import Tagged, TaggedAnswer, Undecodable

_MISSING = (ImportError, AttributeError)  # what find_class raises for a module or a name it cannot find


class _StandIn:
    """An instance of a class that could not be imported: it takes whatever the pickle builds it with, and keeps it."""

    def __new__(cls, *args: Any, **kwargs: Any) -> _StandIn:
        made = object.__new__(cls)
        made.__dict__["_args"] = args
        return made

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        self.__dict__["_state"] = state


class _Lenient(pickle.Unpickler):
    def __init__(self, data: bytes | memoryview) -> None:
        super().__init__(io.BytesIO(data))
        self.missing: list[str] = []

    def find_class(self, module: str, name: str) -> Any:
        try:
            return super().find_class(module, name)
        except _MISSING as exc:
            self.missing.append(f"{module}.{name} ({type(exc).__name__}: {exc})")
            return type(name, (_StandIn,), {"__module__": module, "__qualname__": name})


def loads(data: bytes | memoryview) -> Any:
    """``pickle.loads(data)``; a frame ``(sender, message)`` whose message names classes that cannot be imported here
    comes back with the message replaced by :class:`Undecodable` (kept inside its ``TaggedAnswer``)."""
    try:
        return pickle.loads(data)
    except _MISSING as first:
        lenient = _Lenient(data)
        try:
            decoded = lenient.load()
        except Exception:
            raise first from None
        if not lenient.missing or not isinstance(decoded, tuple) or len(decoded) != 2:
            raise first from None
        sender, message = decoded
        undecodable = Undecodable(tuple(dict.fromkeys(lenient.missing)))
        if isinstance(message, TaggedAnswer | Tagged) and isinstance(message.ref, str):  # its ref still routes it
            return sender, type(message)(message.ref, undecodable)
        return sender, undecodable


__all__ = ["loads"]
