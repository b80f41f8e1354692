"""Thespian describes every message it sends and receives, even when nobody reads the description.

``TransmitIntent.identify()`` and ``ReceiveEnvelope.identify()`` render the whole message (``str(message)``: a
dataclass ``repr`` of every field) and are called for three DEBUG ``thesplog`` lines on every send and every
receive. ``thesplog`` drops those lines below its threshold (WARNING in our systems), but only after the arguments
were built. Profiling a session runtime's actor thread put the two methods at ~10 % of its CPU, competing for the
GIL with the turn loop beside it, and more for large messages (a push carrying a batch of output events).

The fix keeps thespian's text, only later: ``identify()`` answers a :class:`LazyDescription` that renders the
original text the first time it is formatted (``%s``, ``str``, ``repr``, ``format``), which ``thesplog`` does only
when it writes the line. ``__str__`` (which thespian defines as ``identify()``, and which must return a ``str``)
renders at once, as before. Installed by :func:`ouroactors.system._patches.install`, inherited across fork.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_installed = False


class LazyDescription:
    """The text ``describe()`` returns, computed on first use and kept."""

    __slots__ = ("_describe", "_text")

    def __init__(self, describe: Callable[[], str]) -> None:
        self._describe: Callable[[], str] | None = describe
        self._text = ""

    def __str__(self) -> str:
        if self._describe is not None:
            describe, self._describe = self._describe, None
            self._text = str(describe())
        return self._text

    __repr__ = __str__

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __eq__(self, other: object) -> bool:
        return str(self) == (str(other) if isinstance(other, LazyDescription) else other)

    def __hash__(self) -> int:
        return hash(str(self))


def install() -> None:
    """Make thespian's ``identify()`` lazy in this process (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    from thespian.system import transport

    for cls in (transport.TransmitIntent, transport.ReceiveEnvelope):
        eager = cls.identify

        def identify(self: Any, _eager: Callable[[Any], str] = eager) -> LazyDescription:
            return LazyDescription(lambda: _eager(self))

        def as_text(self: Any, _eager: Callable[[Any], str] = eager) -> str:
            return _eager(self)

        cls.identify = identify
        if cls is transport.ReceiveEnvelope:
            cls.__str__ = as_text
