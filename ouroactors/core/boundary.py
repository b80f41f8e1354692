"""Validation of request messages at an authority's door, driven by their type hints.

Authority messages are frozen dataclasses; a message arrives unpickled from another process, so
neither its ``__init__`` nor its ``__post_init__`` ran: any field may hold anything. Before a
worker dispatches a message type listed in its ``protocol``, :func:`check_message` checks every
field against its annotation and **rebuilds** the message through its constructor (so its own
``__post_init__`` checks run too), or raises :class:`~.errors.BadRequest` naming the field.

Why one generic checker rather than ``if`` statements in handlers: a handler that forgets one
check crashes the authority (and an authority crash restarts every consumer after it), and the
fuzz test can only prove the promise for every message type if the promise is made in one place.

What a plain annotation means (tighten it with ``Annotated[..., Size(...)]`` or ``Range(...)``):

* ``str`` — a str of at most :data:`DEFAULT_STR_BYTES` bytes of valid UTF-8 without NUL (a str that
  becomes an LMDB key, 511 bytes at most, is declared :data:`Name`: 1 to 200 bytes; one a store parses
  as part of a key adds a :class:`Pattern` it must match whole); ``bytes`` at most 1 KiB;
* ``int`` — an int (not a bool) in the signed 64-bit range; ``float`` — a finite int or float;
* ``bool`` — exactly True or False; an ``Enum`` — a member or one of its values; ``Literal`` — one
  of the listed values;
* ``tuple[X, ...]`` / ``dict[str, X]`` — at most :data:`DEFAULT_ITEMS` items, each checked;
  ``Annotated[dict[str, Any], Data(n)]`` bounds the whole dict's encoding (n bytes) instead of each value's;
* a nested dataclass is checked and rebuilt the same way (its ``check`` too, see below); a pydantic model is
  re-validated strictly;
* ``Any`` — a value the canonical codec can encode, at most :data:`DEFAULT_DATA_BYTES` bytes;
  :data:`Address` — an actor address (or None): checked for type only.

A message class may add cross-field checks in a ``check(self) -> None`` method that raises
:class:`~.errors.BadRequest`. It runs wherever the class is met, nested too (an item of a batch is held to the
checks it would meet alone); a nested refusal names its place (``items[0].by``).

The markers (:class:`Size`, :class:`Range`, :class:`Pattern`, :class:`Data`, :data:`Address`), the shapes
built from them and the taking apart of an annotation are in :mod:`.boundary_shapes`, re-exported here.
"""

from __future__ import annotations

import dataclasses
import math
from enum import Enum
from typing import Annotated, Any, get_args, get_type_hints

import pydantic

from .boundary_shapes import (
    DEFAULT_BYTES,
    DEFAULT_DATA_BYTES,
    DEFAULT_ITEMS,
    DEFAULT_STR_BYTES,
    INT64,
    SESSION_ID_PATTERN,
    Address,
    Data,
    Name,
    Pattern,
    Range,
    Seconds,
    SessionId,
    Size,
    Text,
    Version,
    _Shape,
    _shape,
)
from .errors import BadRequest

__all__ = [
    "DEFAULT_BYTES", "DEFAULT_DATA_BYTES", "DEFAULT_ITEMS", "DEFAULT_STR_BYTES", "INT64", "SESSION_ID_PATTERN",
    "Address", "Data", "Name", "Pattern", "Range", "Seconds", "SessionId", "Size", "Text", "Version", "check_field",
    "check_message", "prepare",
]


class _Bad(Exception):
    def __init__(self, path: str, problem: str, value: Any) -> None:
        super().__init__(problem)
        self.path, self.problem, self.value = path, problem, value


def _short(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # a hostile __repr__ must not crash the refusal
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 80 else text[:77] + "..."


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = get_type_hints(cls, include_extras=True)
    return hints


def check_message(message: Any) -> Any:
    """The message, checked and rebuilt; raises :class:`BadRequest` on the first bad field."""
    name = type(message).__name__
    try:
        rebuilt = _dataclass(message, type(message), "")
        check = getattr(rebuilt, "check", None)
        if callable(check):
            check()
    except _Bad as bad:
        raise BadRequest(name, bad.path.lstrip("."), bad.problem, _short(bad.value)) from None
    return rebuilt


def prepare(*classes: type) -> None:
    """Resolve the annotations of these message classes, and of every message class their fields may hold, now.

    :func:`check_message` resolves a class's type hints (``get_type_hints``: every annotation evaluated) and takes
    each annotation apart on the first message of that class, caching both for the process — 1-2 ms for a
    session's ``OpenSession``. A supervisor whose children are forked from it calls this for their protocol
    (:meth:`~ouroactors.supervision.supervisor.Supervisor._preload`), so each child inherits the caches instead of
    paying them on its first message. A class whose hints do not resolve is left for its first message to report.
    """
    todo = list(classes)
    seen: set[type] = set()
    while todo:
        cls = todo.pop()
        if cls in seen or not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            continue
        seen.add(cls)
        try:
            fields = _init_fields(cls)
        except Exception:  # an annotation that does not evaluate: check_message reports it on the first message
            continue
        for _, ann in fields:
            todo.extend(_classes_in(ann))


def _classes_in(ann: Any) -> list[type]:
    """Take ``ann`` apart as the door would (caching its shapes) and answer the dataclasses it names."""
    try:
        shape = _shape(ann)
    except Exception:  # a bug in the protocol: reported by the first message, as before
        return []
    found = [shape.ann] if shape.kind == "dataclass" else []
    for arg in get_args(ann):
        found += _classes_in(arg)
    return found


def check_field(cls: type, name: str, value: Any) -> Any:
    """``value`` checked as the field ``name`` of the message class ``cls`` would be at the door (a caller that
    builds the message from outside input — the CLI's arguments — refuses it where it was typed, by the same
    rules); raises :class:`BadRequest` naming the field."""
    try:
        return _check(value, _hints(cls)[name], name)
    except _Bad as bad:
        raise BadRequest(cls.__name__, bad.path.lstrip("."), bad.problem, _short(bad.value)) from None


_FIELDS: dict[type, list[tuple[str, Any]]] = {}


def _init_fields(cls: type) -> list[tuple[str, Any]]:
    fields = _FIELDS.get(cls)
    if fields is None:
        hints = _hints(cls)
        fields = _FIELDS[cls] = [(f.name, hints[f.name]) for f in dataclasses.fields(cls) if f.init]
    return fields


def _dataclass(value: Any, cls: type, path: str) -> Any:
    if type(value) is not cls:
        raise _Bad(path, f"must be a {cls.__name__}, not {type(value).__name__}", value)
    fields: dict[str, Any] = {}
    for name, ann in _init_fields(cls):
        try:
            raw = object.__getattribute__(value, name)
        except AttributeError:
            raise _Bad(f"{path}.{name}", "is missing", None) from None
        fields[name] = _check(raw, ann, f"{path}.{name}")
    try:
        rebuilt = cls(**fields)
    except _Bad:
        raise
    except Exception as exc:  # the class's own __post_init__ refused it
        raise _Bad(path, f"{type(exc).__name__}: {exc}"[:300], None) from None
    check = getattr(rebuilt, "check", None)
    if path and callable(check):  # nested: the top-level message's own check runs in check_message
        try:
            check()
        except BadRequest as bad:
            raise _Bad(f"{path}.{bad.field}" if bad.field else path, bad.problem, _Shown(bad.value)) from None
    return rebuilt


class _Shown(str):
    """A value already shown (a nested refusal's short repr): not quoted again."""

    def __repr__(self) -> str:
        return str(self)


def _check(value: Any, ann: Any, path: str) -> Any:
    shape = _shape(ann)
    kind = shape.kind
    if kind == "str":
        text = _str(value, shape.size or Size(), path)
        if shape.pattern is not None and shape.pattern[0].fullmatch(text) is None:
            raise _Bad(path, f"must be {shape.pattern[1]}", value)
        return text
    if kind in ("int", "float"):
        return _number(value, shape.ann, shape.bounds, path)
    if kind == "union":
        return _union(value, shape.args, shape.meta, path)
    if kind == "address":
        return _address(value, path)
    if kind == "any":
        return _data(value, shape.data, path)
    if kind == "literal":
        if not any(type(value) is type(a) and value == a for a in shape.args):
            raise _Bad(path, f"must be one of {', '.join(map(repr, shape.args))}", value)
        return value
    if kind == "tuple":
        return _tuple(value, shape.args, shape.size, path)
    if kind == "dict":
        return _dict(value, shape, path)
    if kind == "bool":
        if type(value) is not bool:
            raise _Bad(path, f"must be True or False, not {type(value).__name__}", value)
        return value
    if kind == "bytes":
        if type(value) is not bytes:
            raise _Bad(path, f"must be bytes, not {type(value).__name__}", value)
        _length(len(value), shape.size or Size(0, DEFAULT_BYTES), "bytes", path, value)
        return value
    if kind == "enum":
        return _enum(value, shape.ann, path)
    if kind == "dataclass":
        return _dataclass(value, shape.ann, path)
    if kind == "model":
        return _model(value, shape.ann, path)
    raise _Bad(path, f"has an annotation the boundary cannot check ({ann!r})", None)  # a bug in the protocol


def _union(value: Any, args: tuple[Any, ...], meta: tuple[Any, ...], path: str) -> Any:
    if value is None and type(None) in args:
        return None
    rest = [a for a in args if a is not type(None)]
    if len(rest) == 1:
        return _check(value, Annotated[(rest[0], *meta)] if meta else rest[0], path)
    for alternative in rest:  # a union of classes: the one the value is an instance of
        if isinstance(alternative, type) and type(value) is alternative:
            return _check(value, alternative, path)
    names = ", ".join(getattr(a, "__name__", repr(a)) for a in rest)
    raise _Bad(path, f"must be one of: {names}{' or None' if type(None) in args else ''}", value)


def _length(n: int, size: Size, unit: str, path: str, value: Any) -> None:
    if not size.lo <= n <= size.hi:
        raise _Bad(path, f"must be {size.lo} to {size.hi} {unit}, not {n}", value)


def _str(value: Any, size: Size, path: str) -> str:
    if type(value) is not str:
        raise _Bad(path, f"must be a str, not {type(value).__name__}", value)
    if len(value) > size.hi:  # before encoding: a huge str is refused without copying it
        raise _Bad(path, f"must be {size.lo} to {size.hi} bytes of UTF-8, not {len(value)} characters", value)
    try:
        encoded = value.encode("utf-8")
    except UnicodeEncodeError:
        raise _Bad(path, "is not valid UTF-8 (a lone surrogate)", value) from None
    if "\x00" in value:
        raise _Bad(path, "must not contain NUL", value)
    _length(len(encoded), size, "bytes of UTF-8", path, value)
    return value


def _number(value: Any, ann: type, bounds: Range | None, path: str) -> int | float:
    if ann is int and type(value) is not int:
        raise _Bad(path, f"must be an int, not {type(value).__name__}", value)
    if ann is float:
        if type(value) not in (int, float):
            raise _Bad(path, f"must be a number, not {type(value).__name__}", value)
        if type(value) is float and not math.isfinite(value):
            raise _Bad(path, "must be finite", value)
    lo, hi = (bounds.lo, bounds.hi) if bounds else ((INT64[0], INT64[1]) if ann is int else (-1e15, 1e15))
    if not lo <= value <= hi:
        shown = (f"{int(lo)}, {int(hi)}" if ann is int else f"{lo:g}, {hi:g}")  # an int's bounds exactly
        raise _Bad(path, f"must be in [{shown}]", value)
    return value


def _enum(value: Any, cls: type[Enum], path: str) -> Enum:
    if isinstance(value, cls):
        return value
    if type(value) in (str, int):
        try:
            return cls(value)
        except ValueError:
            pass
    raise _Bad(path, f"must be one of {', '.join(str(m.value) for m in cls)}", value)


def _tuple(value: Any, args: tuple[Any, ...], size: Size | None, path: str) -> tuple[Any, ...]:
    if type(value) not in (tuple, list):
        raise _Bad(path, f"must be a tuple, not {type(value).__name__}", value)
    if len(args) == 2 and args[1] is Ellipsis:
        _length(len(value), size or Size(0, DEFAULT_ITEMS), "items", path, None)
        return tuple(_check(item, args[0], f"{path}[{i}]") for i, item in enumerate(value))
    if len(value) != len(args):
        raise _Bad(path, f"must have {len(args)} items, not {len(value)}", None)
    return tuple(_check(item, a, f"{path}[{i}]") for i, (item, a) in enumerate(zip(value, args, strict=True)))


def _dict(value: Any, shape: _Shape, path: str) -> dict[Any, Any]:
    if type(value) is not dict:
        raise _Bad(path, f"must be a dict, not {type(value).__name__}", value)
    _length(len(value), shape.size or Size(0, DEFAULT_ITEMS), "items", path, None)
    key_ann, value_ann = shape.args if len(shape.args) == 2 else (str, Any)
    if value_ann is Any and shape.data_given:  # free-form values, bounded together
        for k in value:
            _check(k, key_ann, f"{path}<key>")
        _data(value, shape.data, path)
        return value
    return {_check(k, key_ann, f"{path}<key>"): _check(v, value_ann, f"{path}[{_short(k)}]")
            for k, v in value.items()}


def _data(value: Any, bound: Data, path: str) -> Any:
    from .codec import CodecError, _pack  # the canonical codec decides what is encodable

    try:
        packed = _pack(value, path.lstrip(".") or "value")
    except CodecError as exc:
        raise _Bad(path, f"is not encodable: {exc}"[:300], None) from None
    except RecursionError:
        raise _Bad(path, "is nested too deeply", None) from None
    if len(packed) > bound.max_bytes:
        raise _Bad(path, f"is {len(packed)} bytes encoded, over the limit of {bound.max_bytes}", None)
    return value


def _model(value: Any, cls: type[pydantic.BaseModel], path: str) -> Any:
    if type(value) is not cls:
        raise _Bad(path, f"must be a {cls.__name__}, not {type(value).__name__}", value)
    try:
        data = {name: object.__getattribute__(value, name) for name in cls.model_fields}
        return cls.model_validate(data, strict=True)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise _Bad(f"{path}.{where}" if where else path, str(first.get("msg", exc))[:200], first.get("input")) from None
    except AttributeError as exc:
        raise _Bad(path, f"is incomplete: {exc}", None) from None


def _address(value: Any, path: str) -> Any:
    # Duck-typed (thespian's ActorAddress carries ``addressDetails``): core imports no actor library.
    if value is not None and (type(value).__name__ != "ActorAddress" or not hasattr(value, "addressDetails")):
        raise _Bad(path, f"must be an actor address, not {type(value).__name__}", value)
    return value
