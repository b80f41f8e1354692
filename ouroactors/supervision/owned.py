"""Attributes the framework owns on a worker: its tree ``path``, ``generation``, ``context`` and ``authorities``.

A worker reads them as plain attributes; only the framework sets them (:func:`set_owned`). Why: they are ordinary
names a worker's own code reaches for — ``self.path = path`` for the file a store keeps, ``self.context = {...}``
for a prompt — and an assignment used to succeed silently and rename the actor in its events, log lines, fault
points (``message.<path>``) and answers, or cut it off from its authorities. Now the assignment fails at once, in
``on_start`` where it is usually made (a start failure naming the attribute), and says what to do instead.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class Owned(Generic[T]):
    """A data descriptor: read from the instance (``default`` until the framework sets it), never assigned by
    the worker's own code."""

    def __init__(self, default: T, meaning: str) -> None:
        self.default, self.meaning = default, meaning
        self.name = self.slot = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name, self.slot = name, f"_owned_{name}"

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> Owned[T]: ...

    @overload
    def __get__(self, obj: object, objtype: type | None = None) -> T: ...

    def __get__(self, obj: object | None, objtype: type | None = None) -> T | Owned[T]:
        if obj is None:
            return self
        return obj.__dict__.get(self.slot, self.default)

    def __set__(self, obj: object, value: Any) -> None:
        raise AttributeError(
            f"{type(obj).__name__}.{self.name} is {self.meaning}, set by ouroactors: a worker cannot assign it "
            f"(keep your own value under another name, such as self.{self.name}_ or self.my_{self.name})")


def set_owned(obj: object, name: str, value: Any) -> None:
    """What the framework (and a unit test building a worker by hand) uses to set an owned attribute."""
    obj.__dict__[f"_owned_{name}"] = value


__all__ = ["Owned", "set_owned"]
