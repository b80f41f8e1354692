"""The codec's fast paths change no byte: the encoder against the encoder as it was before them.

``encode`` takes the common scalars (ASCII ``str``, ``None``, ``bool``, 64-bit ``int``) of a record's fields, of a
list and of a dict without a call, reads field values from the model's ``__dict__`` and packs with one packer per
thread. The bytes are what is hashed and chained (journal, ledger, request digests), so they are compared here,
value by value, with a verbatim copy of the plain recursive encoder — bytes on success, the refusal's path and
reason on failure.
"""

from __future__ import annotations

import threading
from enum import Enum, IntEnum
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from ouroactors.core import codec
from ouroactors.core.codec import CodecError, Record, encode

INT64_MIN, UINT64_MAX = -(2**63), 2**64 - 1


# -- the reference: the encoder before its fast paths (verbatim, but for the names) ---------------------------

class _Ref(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.parts: list[str] = []


def _ref_check_str(s: str) -> str:
    if not s.isascii():
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            raise _Ref("str is not valid UTF-8 (lone surrogate)") from None
    return s


def _ref_model_values(model: BaseModel, depth: int) -> list[Any]:
    if model.model_extra:
        raise _Ref(f"{type(model).__name__} has extra fields {sorted(model.model_extra)}")
    out: list[Any] = []
    for name, _ in codec._plan(type(model)):
        try:
            out.append(_ref_canon(getattr(model, name), depth + 1))
        except _Ref as e:
            e.parts.append(f".{name}")
            raise
    return out


def _ref_canon(v: Any, depth: int) -> Any:
    t = type(v)
    if t is str:
        return _ref_check_str(v)
    if t is int:
        if INT64_MIN <= v < 2**64:
            return v
        raise _Ref(f"int of {v.bit_length()} bits is outside the 64-bit range [-2**63, 2**64)")
    if v is None or t is bytes or t is bool:
        return v
    if t is float:
        if v != v:
            raise _Ref("NaN is not encodable (it is not equal to itself)")
        return v + 0.0
    if depth > codec.MAX_DEPTH:
        raise _Ref(f"nested deeper than {codec.MAX_DEPTH} levels (a cycle?)")
    if t is list or t is tuple:
        out: list[Any] = []
        for i, x in enumerate(v):
            try:
                out.append(_ref_canon(x, depth + 1))
            except _Ref as e:
                e.parts.append(f"[{i}]")
                raise
        return out
    if t is dict:
        for k in v:
            if type(k) is not str:
                if not isinstance(k, str):
                    raise _Ref(f"dict key {k!r} has type {type(k).__name__}; keys must be str")
                return _ref_canon({str.__str__(k): x for k, x in v.items()}, depth)
            _ref_check_str(k)
        res: dict[str, Any] = {}
        for k in sorted(v):
            try:
                res[k] = _ref_canon(v[k], depth + 1)
            except _Ref as e:
                e.parts.append(f".{k}" if k.isidentifier() else f"[{k!r}]")
                raise
        return res
    if isinstance(v, Enum):
        return _ref_canon(v.value, depth + 1)
    if isinstance(v, Record):
        return [*codec._schema_of(t), *_ref_model_values(v, depth)]
    if isinstance(v, BaseModel):
        return _ref_model_values(v, depth)
    for base, convert in ((str, str.__str__), (int, int.__int__), (float, float.__float__), (dict, dict),
                          (bytes | bytearray | memoryview, bytes), (list | tuple, list)):
        if issubclass(t, base):
            return _ref_canon(convert(v), depth)
    raise _Ref(f"type {t.__name__} is not encodable")


def reference(record: Record) -> bytes | str:
    """The old bytes of ``record``, or the old refusal's message."""
    try:
        data = _ref_canon(record, 0)
    except _Ref as e:
        return f"{type(record).__name__}{''.join(reversed(e.parts))}: {e.reason}"
    return msgpack.packb(data, use_bin_type=True)


def current(record: Record) -> bytes | str:
    try:
        return encode(record)
    except CodecError as e:
        return str(e)


# -- values that take every branch: fast scalars, the slow ones beside them, subclasses, refusals ----------------

class Name(str):
    pass


class Count(int):
    pass


class Level(IntEnum):
    LOW = 1
    HIGH = 2


class Mood(Enum):
    CALM = "calm"


class Point(BaseModel):
    x: Any
    y: Any = None


class Leaf(Record):
    SCHEMA = "test.leaf"
    label: Any


class Holder(Record):
    SCHEMA = "test.holder"
    a: Any
    b: Any = None
    leaf: Leaf | None = None
    leaves: list[Leaf] = []


texts = st.text(max_size=6) | st.sampled_from(["é", "\u00ff", "\ud800", "a\udfffb", "ok", ""])
keys = texts | st.builds(Name, st.text(max_size=4))
scalars = (st.none() | st.booleans() | st.integers(INT64_MIN, UINT64_MAX) | st.integers(-(2**70), 2**70)
           | st.floats() | texts | st.binary(max_size=6) | st.builds(Name, st.text(max_size=4))
           | st.builds(Count, st.integers(-5, 5)) | st.sampled_from([Level.LOW, Level.HIGH, Mood.CALM])
           | st.builds(bytearray, st.binary(max_size=4)) | st.just(object()) | st.just({1, 2}))
payloads = st.recursive(
    scalars,
    lambda inner: (st.lists(inner, max_size=4) | st.lists(inner, max_size=3).map(tuple)
                   | st.dictionaries(keys, inner, max_size=4) | st.builds(Point, x=inner, y=inner)
                   | st.builds(Leaf, label=inner)),
    max_leaves=16,
)
holders = st.builds(Holder, a=payloads, b=payloads, leaf=st.none() | st.builds(Leaf, label=payloads),
                    leaves=st.lists(st.builds(Leaf, label=payloads), max_size=2))


@pytest.mark.slow
@settings(max_examples=600)
@given(holders)
def test_the_fast_paths_give_the_old_bytes_and_the_old_refusals(record):
    assert current(record) == reference(record)


def test_deep_nesting_and_extras_are_refused_as_before():
    deep: Any = "x"
    for _ in range(codec.MAX_DEPTH + 2):
        deep = [deep]
    record = Holder(a=deep)
    assert current(record) == reference(record)
    assert "nested deeper" in str(current(record))


def test_each_thread_packs_with_its_own_packer():
    """One packer per thread: records encoded at the same time in several threads keep their own bytes."""
    records = [Holder(a={"n": i, "s": "x" * i, "l": list(range(i))}) for i in range(60)]
    expected = [reference(r) for r in records]
    failures: list[int] = []

    def encode_all() -> None:
        for _ in range(30):
            for i, r in enumerate(records):
                if encode(r) != expected[i]:
                    failures.append(i)

    threads = [threading.Thread(target=encode_all) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


@pytest.mark.parametrize("value", [2**64, -(2**63) - 1, float("nan"), "\ud800", {1: "x"}, {"k": {3}}])
def test_a_refused_value_leaves_the_packer_clean(value):
    with pytest.raises(CodecError):
        encode(Holder(a=value))
    assert encode(Holder(a=[1, "two"])) == reference(Holder(a=[1, "two"]))


# -- plans are made with the class, so a forked process inherits them ------------------------------------------

def test_a_record_class_is_planned_when_it_is_made_not_at_its_first_encode() -> None:
    class Planned(Record):
        SCHEMA = "test.planned"
        a: int
        b: str = "x"

    assert codec._PLANS[Planned] == [("a", None), ("b", None)]  # before any encode


def test_a_record_with_an_unresolved_reference_is_planned_once_complete() -> None:
    class Outer(Record):
        SCHEMA = "test.outer"
        inner: Later | None = None

    class Later(BaseModel):
        n: int

    assert Outer not in codec._PLANS  # not complete: its plan would not know Later is a model
    Outer.model_rebuild(_types_namespace={"Later": Later})
    value = Outer(inner=Later(n=3))
    assert codec.decode(encode(value), Outer) == value
    assert [name for name, _ in codec._PLANS[Outer]] == ["inner"]
