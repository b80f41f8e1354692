"""The vocabulary of the door's annotations, and how an annotation is taken apart for checking.

Message fields are declared with plain types or ``Annotated[...]`` carrying the markers below; the
shapes every authority's protocol uses (:data:`Name`, :data:`Text`, :data:`Version`, :data:`Seconds`,
:data:`Address`) are spelled here once. :func:`_shape` turns an annotation into a :class:`_Shape`
(its kind and its bounds) once per annotation, so the checks in :mod:`.boundary` — which say what each
kind means — run per message without repeating the ``typing`` calls. Everything here is importable from
:mod:`.boundary` too.
"""

from __future__ import annotations

import dataclasses
import re
import types
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pydantic

DEFAULT_STR_BYTES = 4096  # a str that becomes an LMDB key (511 bytes at most) is declared Name
DEFAULT_BYTES = 1024
DEFAULT_ITEMS = 256
DEFAULT_DATA_BYTES = 4000
INT64 = (-(2**63), 2**63 - 1)


@dataclass(frozen=True)
class Size:
    """Length bounds: UTF-8 bytes of a str, bytes of a bytes, items of a tuple or dict."""

    lo: int = 0
    hi: int = DEFAULT_STR_BYTES


@dataclass(frozen=True)
class Range:
    """Inclusive numeric bounds (floats must also be finite)."""

    lo: float
    hi: float


@dataclass(frozen=True)
class Pattern:
    """A str must match ``regex`` as a whole; ``what`` says in words what it must be (the refusal's text)."""

    regex: str
    what: str = ""


@dataclass(frozen=True)
class Data:
    """Free-form data: canonically encodable, at most ``max_bytes`` encoded."""

    max_bytes: int = DEFAULT_DATA_BYTES


class _AddressMarker:
    pass


Address = Annotated[Any, _AddressMarker()]  # an actor address (thespian's ActorAddress) or None

# The shapes every authority's protocol uses.
Name = Annotated[str, Size(1, 200)]  # ids of sessions, effects, approvals, operators…
Text = Annotated[str, Size(0, 512)]  # reasons and other free text that is stored
Version = Annotated[int, Range(0, 2**63 - 1)]
Seconds = Annotated[float, Range(0.001, 7 * 24 * 3600.0)]
# A session id names the session's journal (journal.check_session) and the coordinator's keys of its record
# (coordinator.record.ID_PATTERN): at every door it must be both, so no session is admitted that cannot be kept, and
# no authority keeps anything (a rule, a posture) for a session that cannot exist.
SESSION_ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}"
SessionId = Annotated[str, Size(1, 128), Pattern(SESSION_ID_PATTERN, "a session id: 1 to 128 of [A-Za-z0-9._:@-], "
                                                                      "starting with a letter or digit")]


@dataclass(frozen=True)
class _Shape:
    """An annotation taken apart once (the checks run per message; the typing calls need not)."""

    kind: str
    ann: Any
    args: tuple[Any, ...]
    meta: tuple[Any, ...]
    size: Size | None
    bounds: Range | None
    data: Data
    data_given: bool  # a Data(...) was annotated (on a dict: it bounds the whole dict)
    pattern: tuple[re.Pattern[str], str] | None  # a str's Pattern, compiled, and its words


_SHAPES: dict[Any, _Shape] = {}


def _shape(ann: Any) -> _Shape:
    original = ann
    try:
        cached = _SHAPES.get(ann)
    except TypeError:  # an unhashable annotation: take it apart every time
        cached = None
    if cached is not None:
        return cached
    meta: tuple[Any, ...] = ()
    if get_origin(ann) is Annotated:
        ann, *extra = get_args(ann)
        meta = tuple(extra)
    origin, args = get_origin(ann), get_args(ann)
    if any(isinstance(m, _AddressMarker) for m in meta):
        kind = "address"
    elif origin is Union or origin is types.UnionType:
        kind = "union"
    elif ann is Any:
        kind = "any"
    elif origin is Literal:
        kind = "literal"
    elif origin is tuple:
        kind = "tuple"
    elif origin is dict:
        kind = "dict"
    elif ann in (bool, int, float, str, bytes):
        kind = ann.__name__
    elif isinstance(ann, type) and issubclass(ann, Enum):
        kind = "enum"
    elif isinstance(ann, type) and dataclasses.is_dataclass(ann):
        kind = "dataclass"
    elif isinstance(ann, type) and issubclass(ann, pydantic.BaseModel):
        kind = "model"
    else:
        kind = "unknown"
    shape = _Shape(kind, ann, args, meta, next((m for m in meta if isinstance(m, Size)), None),
                   next((m for m in meta if isinstance(m, Range)), None),
                   next((m for m in meta if isinstance(m, Data)), Data()), any(isinstance(m, Data) for m in meta),
                   next(((re.compile(m.regex), m.what or f"matching {m.regex}") for m in meta
                         if isinstance(m, Pattern)), None))
    try:
        _SHAPES[original] = shape
    except TypeError:
        pass
    return shape
