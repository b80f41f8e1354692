"""A journal record's body is the canonical encoding of its JournalEntry, byte for byte — built without the model
(``chain.entry_bytes``) or through it — and what the encoding refuses is refused with the very same error; a
session's head is packed from its values as the model encodes."""

from __future__ import annotations

from enum import Enum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from ouroactors.core.codec import CodecError, encode
from ouroactors.runtime.execution.chain import HeadValues, JournalEntry, JournalHead, entry_bytes


class Colour(Enum):
    RED = "red"


def _model(at: Any, turn: Any, kind: Any, fields: Any) -> tuple[str, Any]:
    try:
        return "ok", encode(JournalEntry(at=at, turn=turn, kind=kind, fields=fields))
    except (CodecError, ValidationError) as exc:
        return type(exc).__name__, str(exc)


def _fast(at: Any, turn: Any, kind: Any, fields: Any) -> tuple[str, Any]:
    try:
        return "ok", entry_bytes(at, turn, kind, fields)
    except (CodecError, ValidationError) as exc:
        return type(exc).__name__, str(exc)


scalars = (st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=True) | st.text(max_size=8)
           | st.binary(max_size=8) | st.just(Colour.RED) | st.just("\ud800") | st.just(frozenset()))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner)
                      | st.dictionaries(st.text(max_size=4) | st.integers(0, 3), inner, max_size=3), max_leaves=12)


@settings(max_examples=400, deadline=None)
@given(at=st.integers(-(2**65), 2**65) | st.booleans() | st.floats(0, 10),
       turn=st.none() | st.integers(-5, 2**66) | st.text(max_size=2),
       kind=st.sampled_from(["tool_result", "model_call", "é"]) | st.integers(0, 3),
       fields=st.dictionaries(st.text(max_size=6) | st.integers(0, 3), values, max_size=4) | st.lists(values))
@pytest.mark.slow
def test_the_bytes_or_the_refusal_are_the_models(at: Any, turn: Any, kind: Any, fields: Any) -> None:
    assert _fast(at, turn, kind, fields) == _model(at, turn, kind, fields)


@pytest.mark.parametrize("fields", [
    {"call_id": "c1", "evidence": {"ran": True, "exit_code": 0}, "boundary": {"writable": ("/w",), "notes": ()}},
    {"text": "é\u2028", "n": 2**64 - 1, "f": -0.0, "b": b"\x00"},
    {"bad": {1: "int key"}}, {"bad": float("nan")}, {"bad": "\udcff"}, {"bad": [set()]},
])
def test_records_the_runtime_writes_and_values_it_refuses(fields: dict[str, Any]) -> None:
    assert _fast(1_700_000_000_000_000_000, 3, "tool_result", fields) == _model(1_700_000_000_000_000_000, 3,
                                                                                 "tool_result", fields)


@given(first=st.integers(0, 2**63), n=st.integers(-1, 2**63), digest=st.binary(min_size=32, max_size=32),
       size=st.integers(0, 2**64 - 1), records=st.integers(0, 2**40))
def test_a_head_packed_from_its_values_is_the_models_encoding(first: int, n: int, digest: bytes, size: int,
                                                               records: int) -> None:
    values = HeadValues(first, n, digest, size, records)
    assert values.packed() == encode(JournalHead(first_seq=first, head_seq=n, head_hash=digest, bytes=size,
                                                 records=records))
