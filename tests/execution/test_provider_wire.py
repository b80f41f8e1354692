"""The pure core of the ``openai`` provider: SSE framing, chunk assembly, malformed shapes, retry waits.

What no real server sends on purpose (a chunk that is valid JSON of the wrong shape, tool-call deltas of two
calls interleaved, an unknown finish reason) is covered here, byte for byte, with no network.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ouroactors.runtime.execution.model import Finished, ModelError, ModelErrorKind, TextDelta, ToolCall, Usage
from ouroactors.runtime.execution.providers._wire import (
    ChatStreamAssembler,
    SSEDecoder,
    parse_retry_after,
    retry_delay,
)


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> str:
    choices = [] if delta is None and finish is None else [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    return json.dumps({"id": "c1", "object": "chat.completion.chunk", "choices": choices, **extra})


def call_delta(index: int, *, id: str | None = None, name: str | None = None, args: str | None = None) -> dict:
    function = {k: v for k, v in (("name", name), ("arguments", args)) if v is not None}
    out: dict[str, Any] = {"index": index, "function": function}
    if id is not None:
        out["id"] = id
    return {"tool_calls": [out]}


# -- SSE -------------------------------------------------------------------------------------------------------------

EVENTS = [chunk({"role": "assistant", "content": ""}), chunk({"content": "héllo\nworld"}), "[DONE]"]
WIRE = "".join(f"data: {e}\n\n" for e in EVENTS).encode()


@given(st.lists(st.integers(min_value=1, max_value=len(WIRE) - 1), unique=True).map(sorted))
def test_sse_events_survive_any_split_of_the_bytes(cuts: list[int]) -> None:
    decoder = SSEDecoder()
    out: list[str] = []
    for start, end in zip([0, *cuts], [*cuts, len(WIRE)], strict=True):
        out += decoder.feed(WIRE[start:end])
    assert out + decoder.close() == EVENTS


def test_sse_crlf_comments_other_fields_and_multiline_data() -> None:
    decoder = SSEDecoder()
    wire = b": keep-alive\r\n\r\nevent: chunk\r\nid: 7\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\ndata:[DONE]\r\n\r\n"
    assert decoder.feed(wire) == ['{"a":\n1}', "[DONE]"]


def test_sse_last_event_without_its_blank_line_still_counts() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: [DONE]") == []
    assert decoder.close() == ["[DONE]"]


# -- assembly --------------------------------------------------------------------------------------------------------


def test_interleaved_parallel_tool_calls_come_out_whole_in_index_order() -> None:
    assembler = ChatStreamAssembler()
    out = []
    for payload in (
        chunk({"role": "assistant", "content": None}),
        chunk(call_delta(1, id="b", name="shell", args="")),
        chunk(call_delta(0, id="a", name="read", args='{"pa')),
        chunk(call_delta(1, args='{"command": "ls"')),
        chunk(call_delta(0, args='th": "x.txt"}')),
        chunk(call_delta(1, args="}")),
        chunk(None, finish="tool_calls"),
        chunk(None, usage={"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}),
    ):
        out += assembler.feed(payload)
    assert out == []  # no part of a tool call leaves before the end
    assert assembler.finish() == [
        ToolCall(id="a", name="read", arguments={"path": "x.txt"}),
        ToolCall(id="b", name="shell", arguments={"command": "ls"}),
        Usage(input_tokens=9, output_tokens=4),
        Finished(reason="tool_calls"),
    ]


def test_text_deltas_pass_through_and_empty_arguments_mean_no_arguments() -> None:
    assembler = ChatStreamAssembler()
    assert assembler.feed(chunk({"content": "hi"})) == [TextDelta(text="hi")]
    assert assembler.feed(chunk({"content": ""})) == []
    assembler.feed(chunk(call_delta(0, id="x", name="list")))
    assembler.feed(chunk(None, finish="function_call"))  # the legacy name
    assert assembler.finish() == [ToolCall(id="x", name="list", arguments={}), Finished(reason="tool_calls")]


@pytest.mark.parametrize(("payloads", "kind", "where"), [
    (["not json"], ModelErrorKind.MALFORMED, "chunk 1: not valid JSON"),
    (["[1, 2]"], ModelErrorKind.MALFORMED, "chunk 1: expected a JSON object, got list"),
    ([json.dumps({"choices": {"0": {}}})], ModelErrorKind.MALFORMED, "chunk 1.choices: expected a list"),
    ([json.dumps({"choices": ["x"]})], ModelErrorKind.MALFORMED, "chunk 1.choices[0]: expected an object"),
    ([chunk({"content": 5})], ModelErrorKind.MALFORMED, "chunk 1.choices[0].delta.content: expected a string"),
    ([chunk({"tool_calls": {"index": 0}})], ModelErrorKind.MALFORMED, "chunk 1.choices[0].delta.tool_calls: expected"),
    ([chunk({"tool_calls": [{"index": "0"}]})], ModelErrorKind.MALFORMED, "tool_calls[0].index: expected an integer"),
    ([chunk(call_delta(0, id="a")), chunk(call_delta(0, id="b"))], ModelErrorKind.MALFORMED, "changed id"),
    ([chunk({"tool_calls": [{"index": 0, "function": {"arguments": {"a": 1}}}]})], ModelErrorKind.MALFORMED,
     "function.arguments: expected a string"),
    ([chunk(None, finish="eos")], ModelErrorKind.MALFORMED, "finish_reason: unknown value 'eos'; allowed:"),
    ([chunk(None, usage={"prompt_tokens": -1})], ModelErrorKind.MALFORMED, "usage.prompt_tokens: expected a count"),
    ([json.dumps({"error": {"message": "overloaded"}})], ModelErrorKind.MALFORMED, "error mid-stream: 'overloaded'"),
])
def test_wrong_shapes_are_malformed_and_say_where(payloads: list[str], kind: ModelErrorKind, where: str) -> None:
    assembler = ChatStreamAssembler()
    with pytest.raises(ModelError) as caught:
        for payload in payloads:
            assembler.feed(payload)
    assert caught.value.kind is kind and where in caught.value.detail, caught.value.detail


@pytest.mark.parametrize(("deltas", "message"), [
    ([call_delta(0, id="a", name="read", args='{"path": ')], "arguments are not valid JSON"),
    ([call_delta(0, id="a", name="read", args="[1]")], "arguments must be a JSON object"),
    ([call_delta(0, name="read", args="{}")], "has no id"),
    ([call_delta(0, id="a", args="{}")], "has no function name"),
])
def test_incomplete_tool_calls_fail_the_whole_turn(deltas: list[dict], message: str) -> None:
    assembler = ChatStreamAssembler()
    for delta in deltas:
        assembler.feed(chunk(delta))
    assembler.feed(chunk(None, finish="tool_calls"))
    with pytest.raises(ModelError) as caught:
        assembler.finish()
    assert caught.value.kind is ModelErrorKind.MALFORMED and message in caught.value.detail


def test_a_stream_without_finish_reason_is_no_finish() -> None:
    assembler = ChatStreamAssembler()
    assembler.feed(chunk({"content": "half an answ"}))
    with pytest.raises(ModelError) as caught:
        assembler.finish()
    assert caught.value.kind is ModelErrorKind.NO_FINISH and "after 1 chunk(s)" in caught.value.detail


# -- retries ---------------------------------------------------------------------------------------------------------


@given(st.integers(min_value=1, max_value=30), st.floats(min_value=0.001, max_value=10),
       st.floats(min_value=0.001, max_value=100), st.integers())
def test_backoff_without_retry_after_is_jittered_exponential_and_capped(
    attempt: int, base: float, cap: float, seed: int
) -> None:
    ceiling = min(cap, base * 2 ** (attempt - 1))
    delay = retry_delay(attempt, None, base=base, cap=cap, rng=random.Random(seed))
    assert ceiling / 2 <= delay <= ceiling


@given(st.floats(min_value=0, max_value=3600), st.integers())
def test_retry_after_is_honoured_with_at_most_ten_percent_more(retry_after: float, seed: int) -> None:
    delay = retry_delay(3, retry_after, base=0.5, cap=20, rng=random.Random(seed))
    assert retry_after <= delay <= retry_after * 1.1 + 1e-9


def test_retry_after_forms() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "1"}) == 0.25
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after": format_datetime(now + timedelta(seconds=7), usegmt=True)}, now) == 7.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({"retry-after": "-4"}) is None
    assert parse_retry_after({}) is None


def test_a_line_that_never_ends_is_malformed_not_unbounded_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    from ouroactors.runtime.execution.providers import _wire

    monkeypatch.setattr(_wire, "MAX_LINE_BYTES", 1024)
    decoder = SSEDecoder()
    decoder.feed(b"data: " + b"x" * 1000)
    with pytest.raises(ModelError, match="SSE line longer than 1024 bytes"):
        decoder.feed(b"x" * 100)


def test_model_errors_survive_pickling() -> None:
    """A runtime actor may answer with a ModelError across processes."""
    import pickle

    error = ModelError(ModelErrorKind.HTTP_STATUS, "429 from x", status=429, attempts=3)
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.kind, copy.detail, copy.status, copy.attempts, str(copy)) == (
        error.kind, error.detail, 429, 3, str(error))
