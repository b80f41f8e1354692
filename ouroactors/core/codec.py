"""Canonical encoding of durable records: the bytes that get stored, hashed and chained (``notes/lmdb.md`` §3).

* **msgpack** (``use_bin_type=True``): native ``bytes``, deterministic smallest-int encoding, floats as float64.
* **A record is an array** ``[SCHEMA, VERSION, v1, v2, ...]``, values in *field declaration order*: the class is
  the schema, so no runtime key sort of model fields (≈3× cheaper). Reordering fields changes the wire format;
  renaming one does not. Only free-form ``dict`` values are key-sorted (``str`` keys only; code-point order =
  UTF-8 byte order), so insertion order never changes the bytes. Enums → their value; tuples → arrays.
* **Refuse rather than guess**: sets, datetimes, other objects, ints outside 64 bits and NaN raise
  :class:`CodecError` naming the path (``Entry.args.items[2]: type set is not encodable``); use int timestamps.
  ``-0.0`` is written as ``0.0``; strings as given (no Unicode normalisation, so decoding gives the same value);
  ``1``, ``1.0`` and ``True`` stay distinct.
* **Versions**: a stored VERSION newer than the class → :class:`SchemaTooNew`; older → the class's
  ``upgrade(version, values)`` migrates the raw value list, else :class:`CodecError`. Any change of the field
  list (even appending an optional field) needs a VERSION bump and an ``upgrade``.
* **Decoding never leaks msgpack/pydantic exceptions**: bad bytes → :class:`CodecError` (the caller
  quarantines); a misdefined class (no SCHEMA, bad VERSION) raises ``TypeError``: a bug, not bad data.
* **Decoding limit**: nested models are rebuilt when the field annotation is the class itself, ``Optional[M]``,
  ``list[M]``, ``tuple[M, ...]``, a fixed ``tuple[...]`` or ``dict[str, M]`` (recursively). A model under ``Any``
  or in a union of several models comes back as a plain list (or fails validation). Plain ``BaseModel`` values
  are written without SCHEMA/VERSION and must validate by field name.
"""

from __future__ import annotations

import hashlib
import threading
import types
from enum import Enum
from typing import Annotated, Any, ClassVar, TypeVar, Union, get_args, get_origin

import msgpack
import pydantic
from pydantic import BaseModel, ConfigDict

from .errors import OuroactorsError

MAX_INLINE_BYTES = 2000
MAX_KEY_BYTES = 500  # LMDB's default key limit is 511 bytes
MAX_DEPTH = 64  # nesting depth of containers; deeper is almost surely a cycle
_INT_MIN, _INT_LIMIT = -(2**63), 2**64


class CodecError(OuroactorsError, ValueError):
    """A value cannot be encoded, or stored bytes cannot be decoded into the requested record class."""


class SchemaTooNew(CodecError):
    """The record was written by a newer VERSION of its schema than this code supports."""
    def __init__(self, schema: str, found: int, supported: int) -> None:
        self.schema, self.found, self.supported = schema, found, supported
        super().__init__(f"record {schema!r} was written by version {found}; this code supports up to {supported}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.__class__, (self.schema, self.found, self.supported))


class RecordTooLarge(CodecError):
    """Encoded bytes exceed the inline limit; store the payload as a blob and keep a reference."""
    def __init__(self, what: str, size: int, limit: int) -> None:
        self.what, self.size, self.limit = what, size, limit
        super().__init__(f"{what} is {size} bytes encoded, over the inline limit of {limit} bytes (use a blob)")

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.__class__, (self.what, self.size, self.limit))


class Record(BaseModel):
    """Base of every durable record: set ``SCHEMA`` (e.g. ``"ledger.entry"``) and ``VERSION`` (≥ 1, default 1);
    override :meth:`upgrade` when bumping VERSION. Field declaration order is the wire order."""
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    SCHEMA: ClassVar[str]
    VERSION: ClassVar[int] = 1

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        """Plan the record's encoding as its class is made (see :func:`_plan`), not at its first encode: a process
        forked after the import — every actor of a multiproc system, a session runtime on each resume — inherits
        the plan instead of computing it during its first turn."""
        super().__pydantic_init_subclass__(**kwargs)
        if cls.__pydantic_complete__:
            _plan(cls)

    @classmethod
    def upgrade(cls, version: int, values: list[Any]) -> list[Any]:
        """Migrate the raw field values of a record stored at an older ``version`` to ``cls.VERSION``."""
        raise CodecError(f"{cls.SCHEMA!r}: stored version {version} < {cls.VERSION} and {cls.__name__} has no upgrade")


R = TypeVar("R", bound=Record)


def _schema_of(cls: type[Record]) -> tuple[str, int]:
    schema, version = getattr(cls, "SCHEMA", None), getattr(cls, "VERSION", None)
    if not (isinstance(schema, str) and schema and type(version) is int and version >= 1):
        raise TypeError(f"{cls.__qualname__} needs SCHEMA (a non-empty str) and VERSION (an int >= 1)")
    return schema, version


class _Unencodable(Exception):  # raised at the bad value; each enclosing container prepends its path segment
    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.parts: list[str] = []


def _check_str(s: str) -> str:
    if not s.isascii():
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            raise _Unencodable("str is not valid UTF-8 (lone surrogate)")
    return s


_MISSING = object()


def _model_values(model: BaseModel, depth: int) -> list[Any]:
    cls = type(model)
    names, extras = _FIELDS.get(cls) or _fields_plan(cls)
    if extras and model.model_extra:
        raise _Unencodable(f"{cls.__name__} has extra fields {sorted(model.model_extra)}")
    values = model.__dict__  # a pydantic model's field values (getattr for anything not kept there)
    out: list[Any] = []
    append = out.append
    for name in names:
        v = values.get(name, _MISSING)
        if v is _MISSING:
            v = getattr(model, name)
        t = type(v)
        # the common scalars inline (what _canon returns for them, without the call): ASCII str, None, bool, int
        if (t is str and v.isascii()) or v is None or t is bool or (t is int and _INT_MIN <= v < _INT_LIMIT):
            append(v)
            continue
        try:
            append(_canon(v, depth + 1))
        except _Unencodable as e:
            e.parts.append(f".{name}")
            raise
    return out


def _canon(v: Any, depth: int) -> Any:  # → plain msgpack-able data (dict keys sorted), or raise _Unencodable
    t = type(v)  # exact-type tests first: the hot path
    if t is str:
        return _check_str(v)
    if t is int:
        if _INT_MIN <= v < _INT_LIMIT:
            return v
        raise _Unencodable(f"int of {v.bit_length()} bits is outside the 64-bit range [-2**63, 2**64)")
    if v is None or t is bytes or t is bool:
        return v
    if t is float:
        if v != v:
            raise _Unencodable("NaN is not encodable (it is not equal to itself)")
        return v + 0.0  # -0.0 → 0.0
    if depth > MAX_DEPTH:
        raise _Unencodable(f"nested deeper than {MAX_DEPTH} levels (a cycle?)")
    if t is list or t is tuple:
        out: list[Any] = []
        for i, x in enumerate(v):
            tx = type(x)
            if (tx is str and x.isascii()) or x is None or tx is bool or (tx is int and _INT_MIN <= x < _INT_LIMIT):
                out.append(x)  # as in _model_values: the common scalars without the call
                continue
            try:
                out.append(_canon(x, depth + 1))
            except _Unencodable as e:
                e.parts.append(f"[{i}]")
                raise
        return out
    if t is dict:
        for k in v:
            if type(k) is not str:
                if not isinstance(k, str):
                    raise _Unencodable(f"dict key {k!r} has type {type(k).__name__}; keys must be str")
                return _canon({str.__str__(k): x for k, x in v.items()}, depth)
            if not k.isascii():
                _check_str(k)
        res: dict[str, Any] = {}
        for k in sorted(v):
            x = v[k]
            tx = type(x)
            if (tx is str and x.isascii()) or x is None or tx is bool or (tx is int and _INT_MIN <= x < _INT_LIMIT):
                res[k] = x  # as in _model_values: the common scalars without the call
                continue
            try:
                res[k] = _canon(x, depth + 1)
            except _Unencodable as e:
                e.parts.append(f".{k}" if k.isidentifier() else f"[{k!r}]")
                raise
        return res
    if isinstance(v, Enum):
        return _canon(v.value, depth + 1)
    if isinstance(v, Record):
        return [*(_HEADS.get(t) or _head(t)), *_model_values(v, depth)]
    if isinstance(v, BaseModel):
        return _model_values(v, depth)
    for base, convert in ((str, str.__str__), (int, int.__int__), (float, float.__float__), (dict, dict),
                          (bytes | bytearray | memoryview, bytes), (list | tuple, list)):
        if issubclass(t, base):  # a subclass of a plain type (Enums aside): convert to the exact type
            return _canon(convert(v), depth)
    raise _Unencodable(f"type {t.__name__} is not encodable")


def _pack(value: Any, root: str) -> bytes:
    try:
        data = _canon(value, 0)
    except _Unencodable as e:
        raise CodecError(f"{root}{''.join(reversed(e.parts))}: {e.reason}") from None
    return _packer().pack(data)


_local = threading.local()


def _packer() -> msgpack.Packer:
    """This thread's packer (``msgpack.packb`` builds a new one, and its buffer, on every call)."""
    packer: msgpack.Packer | None = getattr(_local, "packer", None)
    if packer is None:
        packer = _local.packer = msgpack.Packer(use_bin_type=True)
    return packer


def encode(record: Record) -> bytes:
    """Canonical bytes of ``record``: msgpack of ``[SCHEMA, VERSION, *field values in declaration order]``."""
    if not isinstance(record, Record):
        raise TypeError(f"encode() takes a Record, not {type(record).__name__}")
    cls = type(record)
    try:  # what _canon does with a record, without its tests of the plain types first
        data = [*(_HEADS.get(cls) or _head(cls)), *_model_values(record, 0)]
    except _Unencodable as e:
        raise CodecError(f"{cls.__name__}{''.join(reversed(e.parts))}: {e.reason}") from None
    return _packer().pack(data)


def digest(record: Record) -> str:
    """SHA-256 hex of :func:`encode` ``(record)``."""
    return hashlib.sha256(encode(record)).hexdigest()


def digest_of(value: Any) -> str:
    """SHA-256 hex of the canonical encoding of any encodable value (e.g. tool arguments)."""
    return hashlib.sha256(_pack(value, "value")).hexdigest()


def _fields_of(cls: type[Record], arr: Any, where: str) -> dict[str, Any]:
    schema, version = _schema_of(cls)
    if not (isinstance(arr, list) and len(arr) >= 2 and isinstance(arr[0], str) and type(arr[1]) is int
            and arr[1] >= 1):
        raise CodecError(f"{where}: not a record array [SCHEMA, VERSION >= 1, ...]")
    found_schema, found, values = arr[0], arr[1], arr[2:]
    if found_schema != schema:
        raise CodecError(f"{where}: expected schema {schema!r}, found {found_schema!r}")
    if found > version:
        raise SchemaTooNew(schema, found, version)
    if found < version:
        values = cls.upgrade(found, values)
    return _zip_fields(cls, values, where)


def _has_model(ann: Any) -> bool:
    return (isinstance(ann, type) and issubclass(ann, BaseModel)) or any(_has_model(a) for a in get_args(ann))


_PLANS: dict[type, list[tuple[str, Any]]] = {}  # class → [(field name, annotation if it may hold a model)]
_FIELDS: dict[type, tuple[tuple[str, ...], bool]] = {}  # class → (field names, whether it may hold extra fields)
_HEADS: dict[type, tuple[str, int]] = {}  # record class → (SCHEMA, VERSION), checked once


def _fields_plan(cls: type[BaseModel]) -> tuple[tuple[str, ...], bool]:
    """What encoding reads of a model: its field names in declaration order, and whether its config lets it hold
    extra fields (only then is ``model_extra`` looked at)."""
    plan = (tuple(name for name, _ in _plan(cls)), cls.model_config.get("extra") == "allow")
    if cls.__pydantic_complete__:
        _FIELDS[cls] = plan
    return plan


def _head(cls: type[Record]) -> tuple[str, int]:
    head = _schema_of(cls)  # a class without SCHEMA/VERSION raises on every encode: nothing is kept
    _HEADS[cls] = head
    return head


def _plan(cls: type[BaseModel]) -> list[tuple[str, Any]]:
    plan = _PLANS.get(cls)
    if plan is None:
        plan = [(n, f.annotation if _has_model(f.annotation) else None) for n, f in cls.model_fields.items()]
        if cls.__pydantic_complete__:  # forward references resolved: the plan is final
            _PLANS[cls] = plan
    return plan


def prepare(*classes: type[BaseModel]) -> None:
    """Plan the encoding of ``classes`` and of every model their fields may hold, now rather than at first use.

    The plans are cached per class for the life of the process, so a process that forks workers (the execution
    supervisor) prepares the records they write once, and every child inherits them; each child would otherwise
    plan them on its first record of each type, on a message's way (~5 classes per session runtime)."""
    todo = list(classes)
    seen: set[type] = set()
    while todo:
        cls = todo.pop()
        if cls in seen or not (isinstance(cls, type) and issubclass(cls, BaseModel)):
            continue
        seen.add(cls)
        if issubclass(cls, Record) and cls not in _HEADS:
            _head(cls)
        if cls not in _FIELDS:
            _fields_plan(cls)
        for _, ann in _plan(cls):
            if ann is not None:
                todo.extend(_models_in(ann))


def _models_in(ann: Any) -> list[type]:
    """The model classes an annotation names, at any depth of unions, containers and ``Annotated``."""
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return [ann]
    return [cls for arg in get_args(ann) for cls in _models_in(arg)]


def _zip_fields(cls: type[BaseModel], values: Any, where: str) -> dict[str, Any]:
    plan = _plan(cls)
    if not isinstance(values, list | tuple) or len(values) != len(plan):
        raise CodecError(f"{where}: {cls.__name__} has {len(plan)} fields, stored values: {len(values)}")
    return {name: v if ann is None else _revive(ann, v, f"{where}.{name}")
            for (name, ann), v in zip(plan, values, strict=True)}


def _revive(ann: Any, v: Any, where: str) -> Any:
    """Rebuild nested models inside ``v`` as far as the annotation ``ann`` tells their class."""
    if not isinstance(v, list | dict):  # models are stored as arrays: nothing to rebuild in a scalar
        return v
    origin, args = get_origin(ann), get_args(ann)
    if origin is Annotated:
        return _revive(args[0], v, where)
    if origin is Union or origin is types.UnionType:
        rest = [a for a in args if a is not type(None)]
        return _revive(rest[0], v, where) if len(rest) == 1 else v
    if origin in (list, tuple) and isinstance(v, list):
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            ok = len(args) == len(v)  # else validation reports the length
            return [_revive(a, x, f"{where}[{i}]") for i, (a, x) in enumerate(zip(args, v, strict=True))] if ok else v
        return [_revive(args[0] if args else Any, x, f"{where}[{i}]") for i, x in enumerate(v)]
    if origin is dict and isinstance(v, dict) and len(args) == 2:
        return {k: _revive(args[1], x, f"{where}[{k!r}]") for k, x in v.items()}
    if isinstance(ann, type) and isinstance(v, list):
        if issubclass(ann, Record):
            return ann.model_validate(_fields_of(ann, v, where))
        if issubclass(ann, BaseModel):
            return ann.model_validate(_zip_fields(ann, v, where))
    return v


def decode(data: bytes, cls: type[R]) -> R:
    """Rebuild a ``cls`` from :func:`encode` bytes; any malformed or mismatched input → :class:`CodecError`."""
    try:
        arr = msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=True)
    except Exception as e:  # msgpack raises many types (ExtraData, FormatError, StackError, ValueError…)
        raise CodecError(f"{cls.__name__}: undecodable bytes ({type(e).__name__}: {e})") from e
    try:
        return cls.model_validate(_fields_of(cls, arr, cls.__name__))
    except pydantic.ValidationError as e:
        raise CodecError(f"{cls.__name__}: stored values do not validate: {e}") from e


def seq_key(n: int) -> bytes:
    """8-byte big-endian key: bytewise order of keys = numeric order of ``n`` (0 ≤ n < 2**64)."""
    if type(n) is not int or not 0 <= n < _INT_LIMIT:
        raise CodecError(f"sequence number must be an int in [0, 2**64), not {n!r}")
    return n.to_bytes(8, "big")


def seq_of(key: bytes) -> int:
    """Inverse of :func:`seq_key`."""
    if len(key) != 8:
        raise CodecError(f"sequence key must be 8 bytes, got {len(key)}")
    return int.from_bytes(key, "big")


def str_key(s: str) -> bytes:
    """UTF-8 key; refuses non-strings, empty strings and keys over 500 bytes (LMDB's key limit is 511)."""
    if type(s) is not str:
        raise CodecError(f"key must be a str, not {type(s).__name__}")
    try:
        b = s.encode("utf-8")
    except UnicodeEncodeError:
        raise CodecError(f"key {s[:40]!r} is not valid UTF-8")
    if not 0 < len(b) <= MAX_KEY_BYTES:
        raise CodecError(f"key must be 1 to {MAX_KEY_BYTES} bytes of UTF-8, not {len(b)}: {s[:40]!r}")
    return b


def check_size(data: bytes, what: str, limit: int = MAX_INLINE_BYTES) -> None:
    """Raise :class:`RecordTooLarge` if ``data`` is longer than ``limit`` bytes."""
    if len(data) > limit:
        raise RecordTooLarge(what, len(data), limit)
