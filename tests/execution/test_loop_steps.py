"""The loop's pure decisions (``steps``), exhaustively and by property."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from ouroactors.core.codec import digest_of
from ouroactors.runtime.execution import steps
from ouroactors.runtime.execution.config import Limits
from ouroactors.runtime.execution.model import Message, ToolCall, ToolSpec

LIMITS = Limits(max_model_calls=3, max_tokens=100, turn_deadline_s=10)


def test_before_model_call_exhaustive():
    """Every combination below, at and above each bound: the order is deadline > calls > tokens."""
    for calls, tokens, now in itertools.product((0, 2, 3, 4), (0, 99, 100, 150), (0, 9, 10, 11)):
        stop = steps.before_model_call(LIMITS, calls_made=calls, tokens_used=tokens, now_ns=now, deadline_ns=10)
        if now >= 10:
            assert stop is not None and stop.status == "deadline"
        elif calls >= 3:
            assert stop is not None and stop.status == "limit" and "max_model_calls" in stop.reason
        elif tokens >= 100:
            assert stop is not None and stop.status == "limit" and "max_tokens" in stop.reason
        else:
            assert stop is None


def test_after_model_and_errors_and_tools():
    assert steps.after_model(2, "tool_calls") is None
    assert steps.after_model(1, "stop") is None  # a tool call is run whatever the finish says
    for finish in ("stop", "length", "content_filter"):
        stop = steps.after_model(0, finish)
        assert stop is not None and stop.status == "completed"
    assert steps.on_model_error("cancelled", steps.INTERRUPTED).status == "interrupted"
    assert steps.on_model_error("cancelled", steps.DEADLINE).status == "deadline"
    for kind in ("http_status", "connect", "disconnected", "no_finish", "malformed", "script", "stall_timeout"):
        assert steps.on_model_error(kind, "x").status == "failed"
    assert steps.after_tools([("ok", None), ("failed", "boom"), ("denied", "no")]) is None
    assert steps.after_tools([("ok", None), ("cancelled", steps.INTERRUPTED)]).status == "interrupted"  # type: ignore[union-attr]
    assert steps.after_tools([("cancelled", steps.DEADLINE)]).status == "deadline"  # type: ignore[union-attr]
    # an unknown outcome ends the turn too (the model is not asked to guess or retry); an interrupt still wins
    assert steps.after_tools([("ok", None), ("unknown", "timeout")]).status == "ambiguous"  # type: ignore[union-attr]
    assert steps.after_tools([("unknown", "t"), ("cancelled", steps.INTERRUPTED)]).status == "interrupted"  # type: ignore[union-attr]


@given(st.text(max_size=300), st.integers(min_value=1, max_value=400))
def test_cap_output_never_exceeds_and_says_so(text, cap):
    shown, cut = steps.cap_output(text, cap)
    assert len(shown.encode("utf-8", errors="surrogatepass")) <= cap
    assert cut == (len(text.encode("utf-8", errors="surrogatepass")) > cap)
    if not cut:
        assert shown == text


def test_tool_text_says_truncation_and_errors():
    assert steps.tool_text("ok", "x" * 10, False, 4, None, None) == "xxxx\n[output truncated at 4 bytes]"
    assert steps.tool_text("failed", "", False, 10, "boom", "exit_status") == "error (exit_status): boom"
    assert steps.tool_text("ok", "", False, 10, None, None) == "(ok, no output)"


_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20)
_ints = st.integers(-(2**63), 2**64 - 1)  # the canonical codec's range; beyond it the loop refuses the stream
_calls = st.lists(st.builds(ToolCall, id=_text, name=_text,
                            arguments=st.dictionaries(_text, _ints | _text, max_size=3)), max_size=2)
_messages = st.lists(st.one_of(
    st.builds(Message, role=st.just("user"), content=_text),
    st.builds(Message, role=st.just("assistant"), content=_text, tool_calls=_calls.map(tuple)),
    st.builds(Message, role=st.just("tool"), content=_text, tool_call_id=_text, name=_text),
), max_size=20)


@settings(max_examples=40, deadline=None)
@given(_messages, st.none() | st.integers(min_value=1, max_value=10**6), st.booleans())
def test_incremental_digests_equal_the_canonical_ones(conversation, max_tokens, with_system):
    digests = steps.Digests()
    system = Message(role="system", content="sys") if with_system else None
    tools = (ToolSpec(name="read", description="d", parameters={"type": "object"}),)
    half = conversation[:len(conversation) // 2]
    # grown (reuses the encoded run), then shorter and reordered (not an extension of it: the run is rebuilt)
    for messages in (half, conversation, half, conversation[::-1], conversation):
        request = steps.build_request("m", system, messages, tools, max_tokens)
        assert digests.request(request) == digest_of(request) == steps.request_digest(request)
        assert digests.conversation(messages) == digest_of(list(messages))


def test_a_turns_digests_encode_only_its_new_messages(monkeypatch):
    """A session's turns alternate requests (system message first) and its settled conversation (no system): each
    keeps its own run, so a long session's turn encodes its new messages once and calls nothing per old message."""
    digests = steps.Digests()
    system = Message(role="system", content="sys")
    conversation = [Message(role="user", content=f"m{i}") for i in range(300)]
    for size in (100, 200, 300):  # three turns, each a request then its settled conversation
        digests.request(steps.build_request("m", system, conversation[:size], (), None))
        digests.conversation(conversation[:size])
    packed: list[object] = []
    real = digests.packed
    monkeypatch.setattr(digests, "packed", lambda value: packed.append(value) or real(value))
    more = [*conversation, Message(role="assistant", content="next")]
    request = steps.build_request("m", system, more, (), None)
    assert digests.request(request) == digest_of(request)
    assert digests.conversation(more) == digest_of(more)
    assert packed.count(more[-1]) == 2 and not any(m in packed for m in conversation)  # the new one, once a run


def test_forget_prunes_only_once_the_cache_doubled_and_keeps_digests_exact():
    digests = steps.Digests()
    turns = [[Message(role="user", content=f"t{t}-{i}") for i in range(40)] for t in range(6)]
    for messages in turns:  # each turn a new conversation: the old messages are no longer kept
        assert digests.conversation(messages) == digest_of(messages)
        digests.forget(messages)
        assert len(digests._cache) <= 2 * len(messages) + 64 + len(messages)
    assert digests.conversation(turns[0]) == digest_of(turns[0])  # forgotten ones are encoded again, the same
