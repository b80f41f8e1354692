"""Canonical record encoding (ouroactors.core.codec): round trips, stable bytes, versioning, refusals, keys."""

import hashlib
import math
import pickle
from collections import OrderedDict, defaultdict
from datetime import datetime
from enum import Enum, IntEnum, StrEnum
from typing import Any, NamedTuple, Optional

import msgpack
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ouroactors.core.codec import (
    MAX_INLINE_BYTES,
    CodecError,
    Record,
    RecordTooLarge,
    SchemaTooNew,
    check_size,
    decode,
    digest,
    digest_of,
    encode,
    seq_key,
    seq_of,
    str_key,
)
from ouroactors.core.errors import OuroactorsError

INT64_MIN, UINT64_MAX = -(2**63), 2**64 - 1


class Color(Enum):
    RED = "red"
    GREEN = "green"
    BLUE = "blue"


class Level(IntEnum):
    LOW = 1
    HIGH = 2


class Point(BaseModel):
    x: int
    y: int


class Child(Record):
    SCHEMA = "test.child"
    label: str
    data: bytes


class Sample(Record):
    SCHEMA = "test.sample"
    VERSION = 1
    name: str
    n: int
    blob: bytes
    ratio: float | None
    color: Color
    level: Level
    payload: Any
    tags: list[str]
    child: Child | None
    children: list[Child]
    point: Point | None
    pair: tuple[int, Child] | None = None
    by_name: dict[str, Child] = {}


# ------------------------------------------------------------------------------------------ strategies

scalars = (st.none() | st.booleans() | st.integers(INT64_MIN, UINT64_MAX) | st.floats(allow_nan=False)
           | st.text(max_size=12) | st.binary(max_size=12))
payloads = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
children = st.builds(Child, label=st.text(max_size=8), data=st.binary(max_size=8))
samples = st.builds(
    Sample,
    name=st.text(max_size=16),
    n=st.integers(INT64_MIN, UINT64_MAX),
    blob=st.binary(max_size=32),
    ratio=st.none() | st.floats(allow_nan=False),
    color=st.sampled_from(Color),
    level=st.sampled_from(Level),
    payload=payloads,
    tags=st.lists(st.text(max_size=6), max_size=4),
    child=st.none() | children,
    children=st.lists(children, max_size=3),
    point=st.none() | st.builds(Point, x=st.integers(-5, 5), y=st.integers(-5, 5)),
    pair=st.none() | st.tuples(st.integers(0, 9), children),
    by_name=st.dictionaries(st.text(max_size=4), children, max_size=3),
)


def reordered(v: Any) -> Any:
    """The same value with every dict built in reverse insertion order."""
    if isinstance(v, dict):
        return {k: reordered(v[k]) for k in reversed(list(v))}
    if isinstance(v, list):
        return [reordered(x) for x in v]
    return v


def sample(**over: Any) -> Sample:
    base: dict[str, Any] = dict(name="s", n=1, blob=b"", ratio=None, color=Color.RED, level=Level.LOW, payload=None,
                                tags=[], child=None, children=[], point=None)
    return Sample(**{**base, **over})


# ------------------------------------------------------------------------------------------ round trip, stability

@given(samples)
def test_round_trip(rec):
    data = encode(rec)
    assert decode(data, Sample) == rec
    assert encode(decode(data, Sample)) == data


@given(samples)
def test_equal_models_give_equal_bytes(rec):
    copy = Sample.model_validate(rec.model_dump())
    assert copy == rec
    assert encode(copy) == encode(rec)
    assert digest(copy) == digest(rec) == hashlib.sha256(encode(rec)).hexdigest()


@given(payloads)
def test_dict_insertion_order_does_not_change_bytes(payload):
    other = reordered(payload)
    assert other == payload
    assert encode(sample(payload=other)) == encode(sample(payload=payload))
    assert digest_of(other) == digest_of(payload)


def test_dict_keys_are_sorted_on_the_wire():
    raw = msgpack.unpackb(encode(sample(payload={"b": 1, "a": {"z": 0, "é": 1, "A": 2}})))
    assert list(raw[8]) == ["a", "b"]
    assert list(raw[8]["a"]) == ["A", "z", "é"]


@given(samples, samples)
def test_different_records_have_different_digests(a, b):
    assume(a != b)
    assert digest(a) != digest(b)


@given(payloads, payloads)
def test_different_values_have_different_digests(a, b):
    assume(a != b)
    assert digest_of(a) != digest_of(b)


def test_values_equal_in_python_but_of_other_types_differ():
    assert len({digest_of(1), digest_of(1.0), digest_of(True), digest_of("1"), digest_of(b"1")}) == 5


def test_negative_zero_is_written_as_zero():
    assert digest_of(-0.0) == digest_of(0.0)
    assert encode(sample(ratio=-0.0)) == encode(sample(ratio=0.0))


def test_wire_layout_is_schema_version_then_fields_in_declaration_order():
    rec = sample(name="x", n=7, color=Color.BLUE, level=Level.HIGH, child=Child(label="c", data=b"\x00"),
                 point=Point(x=1, y=2))
    raw = msgpack.unpackb(encode(rec))
    assert raw[:2] == ["test.sample", 1]
    assert raw[2:4] == ["x", 7]
    assert raw[6:8] == ["blue", 2]
    assert raw[10] == ["test.child", 1, "c", b"\x00"]
    assert raw[12] == [1, 2]
    assert len(raw) == 2 + len(Sample.model_fields)


def test_field_declaration_order_is_the_wire_order():
    class AB(Record):
        SCHEMA = "test.order"
        a: int
        b: int

    class BA(Record):
        SCHEMA = "test.order"
        b: int
        a: int

    assert encode(AB(a=1, b=2)) != encode(BA(a=1, b=2))
    assert decode(encode(AB(a=1, b=2)), BA) == BA(b=1, a=2)  # positional: names are not stored


def test_digest_of_a_record_is_its_digest():
    rec = sample(payload={"k": [1, 2]})
    assert digest_of(rec) == digest(rec)


def test_enums_and_tuples_encode_as_their_values():
    assert digest_of(Color.RED) == digest_of("red")
    assert digest_of(Level.HIGH) == digest_of(2)
    assert digest_of((1, "a")) == digest_of([1, "a"])
    assert digest_of(bytearray(b"ab")) == digest_of(b"ab")


def test_subclasses_of_plain_types_encode_as_the_plain_type():
    class Name(str):
        pass

    class Row(NamedTuple):
        a: int
        b: str

    class Flag(StrEnum):
        ON = "on"

    assert digest_of(Name("x")) == digest_of("x")
    assert digest_of(Row(1, "b")) == digest_of([1, "b"])
    assert digest_of(OrderedDict([("b", 1), ("a", 2)])) == digest_of({"a": 2, "b": 1})
    assert digest_of(defaultdict(list, {"k": []})) == digest_of({"k": []})
    assert digest_of({Flag.ON: 1, Name("a"): Flag.ON}) == digest_of({"on": 1, "a": "on"})
    assert digest_of(memoryview(b"ab")) == digest_of(b"ab")


def test_nested_models_in_containers_round_trip():
    class Box(Record):
        SCHEMA = "test.box"
        maybe: Optional[Child] = None  # noqa: UP045 - the typing spelling must work too
        many: tuple[Child, ...] = ()
        grid: list[list[Point]] = []
        named: dict[str, list[Child]] = {}
        free: Any = None

    c = Child(label="c", data=b"1")
    box = Box(maybe=c, many=(c, c), grid=[[Point(x=1, y=2)], []], named={"k": [c]}, free=[1, {"a": b""}])
    assert decode(encode(box), Box) == box
    assert decode(encode(Box()), Box) == Box()


def test_sixty_four_bit_extremes_round_trip():
    for n in (INT64_MIN, -1, 0, 2**63, UINT64_MAX):
        assert decode(encode(sample(n=n)), Sample).n == n


def test_infinities_round_trip():
    for x in (math.inf, -math.inf):
        assert decode(encode(sample(ratio=x)), Sample).ratio == x


def test_field_aliases_are_ignored_on_the_wire():
    class Aliased(Record):
        SCHEMA = "test.alias"
        value: int = Field(alias="Value")

    rec = Aliased.model_validate({"Value": 3})
    assert decode(encode(rec), Aliased) == rec


# ------------------------------------------------------------------------------------------ refusals on encode

@pytest.mark.parametrize(("payload", "where", "what"), [
    ({"items": [1, 2, {3}]}, "Sample.payload.items[2]", "type set is not encodable"),
    ([datetime(2026, 1, 1)], "Sample.payload[0]", "type datetime is not encodable"),
    ({"a b": object()}, "Sample.payload['a b']", "type object is not encodable"),
    ({"k": {1: "x"}}, "Sample.payload.k", "dict key 1 has type int; keys must be str"),
    ({"k": [2**64]}, "Sample.payload.k[0]", "int of 65 bits is outside the 64-bit range"),
    ([-(2**63) - 1], "Sample.payload[0]", "outside the 64-bit range"),
    ({"x": float("nan")}, "Sample.payload.x", "NaN is not encodable"),
    (["\ud800"], "Sample.payload[0]", "not valid UTF-8"),
    ({"\udfff": 1}, "Sample.payload", "not valid UTF-8"),
])
def test_unencodable_values_name_the_field_path(payload, where, what):
    with pytest.raises(CodecError) as info:
        encode(sample(payload=payload))
    assert str(info.value).startswith(f"{where}: ")
    assert what in str(info.value)


def test_path_goes_through_nested_records_and_models():
    class Holder(Record):
        SCHEMA = "test.holder"
        inner: Any

    class Loose(BaseModel):
        model_config = ConfigDict(extra="allow")
        v: Any

    with pytest.raises(CodecError, match=r"^Holder\.inner\.payload\[1\]: type frozenset"):
        encode(Holder(inner=sample(payload=[0, frozenset()])))
    with pytest.raises(CodecError, match=r"^Holder\.inner\.v\.s: type set"):
        encode(Holder(inner=Loose(v={"s": set()})))
    with pytest.raises(CodecError, match=r"^Holder\.inner: Loose has extra fields \['w'\]"):
        encode(Holder(inner=Loose(v=1, w=2)))


def test_digest_of_names_the_path_from_value():
    with pytest.raises(CodecError, match=r"^value\.args\[0\]: type complex is not encodable"):
        digest_of({"args": [1j]})


def test_cycles_are_refused_not_a_recursion_error():
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(CodecError, match="nested deeper than"):
        digest_of(loop)


def test_encode_takes_only_records():
    with pytest.raises(TypeError):
        encode({"a": 1})  # type: ignore[arg-type]


def test_a_record_class_without_schema_is_a_type_error():
    class NoSchema(Record):
        a: int

    class BadVersion(Record):
        SCHEMA = "test.bad"
        VERSION = 0
        a: int

    for cls in (NoSchema, BadVersion):
        with pytest.raises(TypeError):
            encode(cls(a=1))


def test_record_config_is_frozen_and_forbids_extra_fields():
    rec = sample()
    with pytest.raises(ValidationError):
        rec.name = "other"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        Child(label="a", data=b"", extra=1)  # type: ignore[call-arg]


# ------------------------------------------------------------------------------------------ versions

class V1(Record):
    SCHEMA = "test.versioned"
    VERSION = 1
    a: int


class V2(Record):
    SCHEMA = "test.versioned"
    VERSION = 2
    a: int
    b: str

    @classmethod
    def upgrade(cls, version: int, values: list[Any]) -> list[Any]:
        assert version == 1
        return [*values, f"from-v{version}"]


class V2NoUpgrade(Record):
    SCHEMA = "test.versioned"
    VERSION = 2
    a: int
    b: str


class V1Holder(Record):
    SCHEMA = "test.v1holder"
    item: V1


class V2Holder(Record):
    SCHEMA = "test.v1holder"
    item: V2


def test_upgrade_hook_migrates_an_older_version():
    assert decode(encode(V1(a=5)), V2) == V2(a=5, b="from-v1")


def test_upgrade_hook_applies_to_nested_records():
    assert decode(encode(V1Holder(item=V1(a=1))), V2Holder) == V2Holder(item=V2(a=1, b="from-v1"))


def test_older_version_without_upgrade_hook_is_refused():
    with pytest.raises(CodecError, match=r"stored version 1 < 2 and V2NoUpgrade has no upgrade"):
        decode(encode(V1(a=5)), V2NoUpgrade)


def test_newer_version_raises_schema_too_new_naming_both_versions():
    with pytest.raises(SchemaTooNew) as info:
        decode(encode(V2(a=1, b="x")), V1)
    err = info.value
    assert (err.schema, err.found, err.supported) == ("test.versioned", 2, 1)
    assert "version 2" in str(err)
    assert "up to 1" in str(err)
    assert isinstance(err, CodecError)


def test_newer_nested_record_raises_schema_too_new():
    with pytest.raises(SchemaTooNew):
        decode(encode(V2Holder(item=V2(a=1, b="x"))), V1Holder)


def test_other_schema_name_is_refused():
    with pytest.raises(CodecError, match=r"expected schema 'test.child', found 'test.sample'"):
        decode(encode(sample()), Child)


def test_upgrade_returning_the_wrong_number_of_values_is_refused():
    class Bad(V2):
        @classmethod
        def upgrade(cls, version: int, values: list[Any]) -> list[Any]:
            return values

    with pytest.raises(CodecError, match="has 2 fields, stored values: 1"):
        decode(encode(V1(a=5)), Bad)


# ------------------------------------------------------------------------------------------ bad bytes on decode

@pytest.mark.parametrize("data", [
    b"",
    b"\xc1",  # never-used msgpack byte
    b"\x93\xabtest.sample",  # truncated array
    msgpack.packb(5),
    msgpack.packb({"a": 1}),
    msgpack.packb({1: 2}),  # non-str map key
    msgpack.packb(["test.sample"]),
    msgpack.packb(["test.sample", "1"]),
    msgpack.packb(["test.sample", True]),
    msgpack.packb(["test.sample", 0]),
    msgpack.packb(["test.sample", 1, "too few"]),
    msgpack.packb(["test.sample", 1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]),  # values fail validation
    msgpack.packb(5) + b"trailing",
])
def test_garbage_raises_codec_error(data):
    with pytest.raises(CodecError):
        decode(data, Sample)


@given(st.binary(max_size=64))
def test_random_bytes_raise_only_codec_error(data):
    try:
        decode(data, Sample)
    except CodecError:
        pass


@given(samples, st.data())
def test_truncated_records_raise_codec_error(rec, data):
    raw = encode(rec)
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(CodecError):
        decode(raw[:cut], Sample)


@given(samples, st.data())
def test_corrupted_records_raise_only_codec_error(rec, data):
    raw = bytearray(encode(rec))
    i = data.draw(st.integers(0, len(raw) - 1))
    raw[i] ^= data.draw(st.integers(1, 255))
    try:
        assert isinstance(decode(bytes(raw), Sample), Sample)
    except CodecError:
        pass


# ------------------------------------------------------------------------------------------ keys and sizes

@given(st.integers(0, UINT64_MAX), st.integers(0, UINT64_MAX))
def test_seq_key_order_is_numeric_order(a, b):
    ka, kb = seq_key(a), seq_key(b)
    assert len(ka) == 8
    assert (a < b) == (ka < kb)
    assert (a == b) == (ka == kb)
    assert seq_of(ka) == a


@pytest.mark.parametrize("n", [-1, 2**64])
def test_seq_key_range(n):
    with pytest.raises(CodecError):
        seq_key(n)


def test_seq_key_refuses_non_ints_and_seq_of_checks_length():
    for bad in (True, 1.0, "1"):
        with pytest.raises(CodecError, match="must be an int"):
            seq_key(bad)  # type: ignore[arg-type]
    with pytest.raises(CodecError, match="8 bytes"):
        seq_of(b"\x00" * 7)
    assert seq_of(memoryview(seq_key(258))) == 258


def test_str_key_limits():
    assert str_key("a" * 500) == b"a" * 500
    assert str_key("é" * 250) == "é".encode() * 250  # 500 bytes
    for bad in ("", "a" * 501, "é" * 251, "\ud800"):
        with pytest.raises(CodecError):
            str_key(bad)


def test_check_size():
    check_size(b"x" * MAX_INLINE_BYTES, "entry")
    with pytest.raises(RecordTooLarge) as info:
        check_size(b"x" * (MAX_INLINE_BYTES + 1), "ledger entry 7")
    err = info.value
    assert (err.what, err.size, err.limit) == ("ledger entry 7", 2001, 2000)
    assert "ledger entry 7 is 2001 bytes" in str(err)
    assert "2000" in str(err)
    with pytest.raises(RecordTooLarge):
        check_size(b"xx", "tiny", limit=1)


def test_errors_are_value_errors_and_pickle():
    for err in (CodecError("boom"), SchemaTooNew("s", 3, 2), RecordTooLarge("w", 10, 5)):
        assert isinstance(err, ValueError)
        assert isinstance(err, OuroactorsError)
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err)
        assert str(back) == str(err)
