"""The door's checker on its own (pure, no actors): what each annotation admits and refuses."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ouroactors.authorities.ledger.domain import StartRequest, fingerprint
from ouroactors.core.boundary import Address, Data, Name, Range, Size, check_message
from ouroactors.core.errors import BadRequest


class Color(Enum):
    RED = "red"


@dataclass(frozen=True)
class Inner:
    label: Name

    def __post_init__(self) -> None:
        if self.label == "forbidden":
            raise ValueError("label is forbidden")


@dataclass(frozen=True)
class Sample:
    name: Name
    count: Annotated[int, Range(0, 10)] = 0
    ratio: float = 0.5
    flag: bool = False
    color: Color = Color.RED
    mode: Literal["a", "b"] = "a"
    tags: Annotated[tuple[Name, ...], Size(0, 3)] = ()
    blob: bytes = b""
    data: Annotated[Any, Data(100)] = None
    inner: Inner | None = None
    extra: dict[str, int] | None = None
    owner: Address = None
    start: StartRequest | None = None

    def check(self) -> None:
        if self.mode == "b" and not self.tags:
            raise BadRequest("Sample", "tags", "mode b needs tags")


def unchecked(**fields: Any) -> Sample:
    """As unpickling builds it: defaults, then whatever was sent, no __init__."""
    sample = Sample.__new__(Sample)
    object.__setattr__(sample, "__dict__", {**Sample("x").__dict__, **fields})
    return sample


def start(**update: Any) -> StartRequest:
    good = dict(effect_id="e1", kind="tool_call", idempotency_key="e1", fingerprint=fingerprint("tool_call", {}),
                principal="s1", session_id="s1", turn_id=None, call_id=None, authority={}, grant=None, cause=None)
    return StartRequest.model_construct(**{**good, **update})


@pytest.mark.parametrize(("fields", "where"), [
    ({"name": None}, "name"), ({"name": ""}, "name"), ({"name": "s" * 201}, "name"), ({"name": "é" * 101}, "name"),
    ({"name": "a\udcff"}, "name"), ({"name": "a\x00b"}, "name"), ({"name": b"x"}, "name"),
    ({"count": 11}, "count"), ({"count": -1}, "count"), ({"count": True}, "count"), ({"count": 1.0}, "count"),
    ({"count": 2**70}, "count"), ({"ratio": math.inf}, "ratio"), ({"ratio": math.nan}, "ratio"),
    ({"ratio": 1e16}, "ratio"), ({"ratio": "1"}, "ratio"), ({"flag": 1}, "flag"), ({"color": "blue"}, "color"),
    ({"mode": "c"}, "mode"), ({"mode": b"a"}, "mode"), ({"tags": "abc"}, "tags"), ({"tags": ("a",) * 4}, "tags"),
    ({"tags": ("a", None)}, "tags[1]"), ({"blob": "text"}, "blob"), ({"blob": b"x" * 2000}, "blob"),
    ({"data": {1, 2}}, "data"), ({"data": "x" * 200}, "data"), ({"data": math.nan}, "data"),
    ({"inner": "junk"}, "inner"), ({"inner": Inner.__new__(Inner)}, "inner.label"),
    ({"extra": {"a": "1"}}, "extra['a']"), ({"extra": {1: 1}}, "extra<key>"), ({"owner": "someone"}, "owner"),
    ({"start": start(effect_id=None)}, "start.effect_id"), ({"start": start(authority={"grants": "1"})},
                                                             "start.authority.grants"),
    ({"start": {"effect_id": "e1"}}, "start"), ({"mode": "b"}, "tags"),
])
def test_a_bad_field_is_named(fields, where):
    with pytest.raises(BadRequest) as caught:
        check_message(unchecked(**fields))
    assert caught.value.message == "Sample" and caught.value.field == where, caught.value


def test_a_refusing_post_init_is_a_bad_request_naming_the_nested_record():
    inner = Inner.__new__(Inner)
    object.__setattr__(inner, "__dict__", {"label": "forbidden"})
    with pytest.raises(BadRequest, match="label is forbidden") as caught:
        check_message(unchecked(inner=inner))
    assert caught.value.field == "inner"


def test_good_fields_are_rebuilt_and_coerced_only_where_lossless():
    rebuilt = check_message(unchecked(name="s1", count=3, ratio=2, tags=["a", "b"], color="red", mode="b",
                                      data={"k": [1, 2.5, None]}, extra={"a": 1}, start=start()))
    assert rebuilt == Sample("s1", 3, 2, False, Color.RED, "b", ("a", "b"), b"", {"k": [1, 2.5, None]}, None,
                             {"a": 1}, None, start())
    assert type(rebuilt.tags) is tuple and rebuilt.color is Color.RED


def test_a_missing_field_is_named_and_a_missing_default_is_the_default():
    sample = Sample.__new__(Sample)
    object.__setattr__(sample, "__dict__", {"count": 1})
    with pytest.raises(BadRequest, match="is missing") as caught:
        check_message(sample)
    assert caught.value.field == "name"
    object.__setattr__(sample, "__dict__", {"name": "x"})  # older senders: fields with defaults left out
    assert check_message(sample) == Sample("x")


@given(st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(), st.binary()),
                    lambda inner: st.one_of(st.lists(inner), st.dictionaries(st.text(), inner)), max_leaves=20),
       st.sampled_from(["name", "count", "ratio", "flag", "color", "mode", "tags", "blob", "data", "inner",
                        "extra", "owner", "start"]))
def test_any_value_in_any_field_is_admitted_or_refused_never_anything_else(value, field):
    try:
        rebuilt = check_message(unchecked(**{field: value}))
    except BadRequest as refused:
        assert refused.field.split(".")[0].split("[")[0].split("<")[0] in (field, "tags")
    else:
        assert type(rebuilt) is Sample
