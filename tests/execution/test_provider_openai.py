"""The ``openai`` provider against a real OpenAI-compatible server it was not written with (llmock, see conftest).

Every fault is produced by the server on the wire — a dropped connection, a stream cut before its finish reason,
a chunk that is not JSON, a stall, a slow first token, 429 and 500 answers — and every one must come back as a
typed ModelError (never a partial turn: no ToolCall, no Finished) or, for the retryable statuses, as a success
after retries that were reported to the hook.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from typing import Any

import pytest
import trio
import trio.testing

from ouroactors.runtime.execution.model import (
    Finished,
    Message,
    ModelError,
    ModelErrorKind,
    ModelEvent,
    ModelRequest,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
)
from ouroactors.runtime.execution.providers import OpenAIConfig, OpenAIProvider, RetryNotice, make_provider
from ouroactors.system.handle import free_port

from .conftest import LLMockServer

READ = ToolSpec(name="read", description="Read a file", parameters={
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})
SHELL = ToolSpec(name="shell", description="Run a command", parameters={
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]})
REQUEST = ModelRequest(model="gpt-4o", messages=(Message(role="user", content="what is in notes.txt?"),),
                       tools=(READ, SHELL))


def provider(server: LLMockServer | str, notices: list[RetryNotice] | None = None,
             sleep: Callable[[float], Awaitable[None]] = trio.sleep, **settings: Any) -> OpenAIProvider:
    base_url = server if isinstance(server, str) else server.base_url
    config = OpenAIConfig(kind="openai", base_url=base_url, model="gpt-4o",
                          **{"backoff_base_s": 0.01, "stall_timeout_s": 5.0, "first_token_timeout_s": 5.0, **settings})
    return OpenAIProvider(config, on_retry=None if notices is None else notices.append, sleep=sleep)


def run(model: OpenAIProvider, request: ModelRequest = REQUEST) -> tuple[list[ModelEvent], ModelError | None]:
    """Stream one call; return what was yielded before the end and the error that ended it, if any."""
    events: list[ModelEvent] = []

    async def main() -> ModelError | None:
        try:
            async with aclosing(model.stream(request)) as stream:  # type: ignore[type-var]
                async for event in stream:
                    events.append(event)
        except ModelError as exc:
            return exc
        return None

    return events, trio.run(main)


def assert_no_turn(events: list[ModelEvent]) -> None:
    """A failed call hands out nothing the loop could apply: text deltas at most, never a call or a finish."""
    assert all(isinstance(event, TextDelta) for event in events), events


def test_plain_text_stream_with_usage(llmock_server: LLMockServer) -> None:
    llmock_server.script({"type": "reply", "text": "The file lists three tasks."})
    events, error = run(provider(llmock_server))
    assert error is None
    text = [e for e in events if isinstance(e, TextDelta)]
    assert len(text) > 1, "the server streams word by word"
    assert "".join(t.text for t in text) == "The file lists three tasks."
    assert isinstance(events[-2], Usage) and events[-2].input_tokens > 0 and events[-2].output_tokens > 0
    assert events[-1] == Finished(reason="stop")
    sent = llmock_server.requests()[-1]["body"]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert sent["tools"][0] == {"type": "function", "function": READ.model_dump()}


def test_model_calls_share_one_tls_context_per_process(llmock_server: LLMockServer,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each call has its own client; without a context given, httpx built and loaded a new one for each (20-140 ms)."""
    import httpx

    from ouroactors.runtime.execution import tls

    made: list[dict[str, Any]] = []
    real = httpx.create_ssl_context
    monkeypatch.setattr(tls, "_contexts", {})
    monkeypatch.setattr(httpx, "create_ssl_context", lambda *a, **k: made.append(k) or real(*a, **k))
    for _ in range(2):
        llmock_server.script({"type": "reply", "text": "ok"})
        assert run(provider(llmock_server))[1] is None
    assert made == [{"trust_env": False}]  # the config's default trust_env; verification as httpx's default


def test_parallel_tool_calls_assembled_from_argument_deltas(llmock_server: LLMockServer) -> None:
    long_path = "docs/a/rather/long/path/to/the/notes-file.txt"  # llmock sends arguments 12 characters at a time
    llmock_server.script({"type": "reply", "text": "Looking.", "tool_calls": [
        {"name": "read", "arguments": {"path": long_path}},
        {"name": "shell", "arguments": {"command": "wc -l notes.txt && echo 'done'"}},
    ]})
    events, error = run(provider(llmock_server))
    assert error is None
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert [(c.name, c.arguments) for c in calls] == [
        ("read", {"path": long_path}), ("shell", {"command": "wc -l notes.txt && echo 'done'"})]
    assert len({c.id for c in calls}) == 2 and all(c.id for c in calls)
    assert events[-1] == Finished(reason="tool_calls")
    # whole calls come after all the text, and before the usage and the finish
    kinds = [e.kind for e in events]
    assert kinds[-4:] == ["tool_call", "tool_call", "usage", "finished"]


def test_conversation_with_tool_results_round_trips(llmock_server: LLMockServer) -> None:
    call = ToolCall(id="call_1", name="read", arguments={"path": "notes.txt"})
    request = ModelRequest(model="gpt-4o", messages=(
        Message(role="system", content="You are terse."),
        Message(role="user", content="read notes.txt"),
        Message(role="assistant", tool_calls=(call,)),
        Message(role="tool", tool_call_id="call_1", content="- [ ] try the demo"),
    ), tools=(READ,), max_tokens=64)
    llmock_server.script({"type": "reply", "text": "One open task."})
    events, error = run(provider(llmock_server), request)
    assert error is None and events[-1] == Finished(reason="stop")
    body = llmock_server.requests()[-1]["body"]
    assert body["max_tokens"] == 64
    assert body["messages"][2] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": '{"path":"notes.txt"}'}}]}
    assert body["messages"][3] == {"role": "tool", "content": "- [ ] try the demo", "tool_call_id": "call_1"}


def test_429_with_retry_after_is_honoured_then_succeeds(llmock_server: LLMockServer) -> None:
    llmock_server.script({"type": "fail", "status": 429, "retry_after": 0.25, "times": 2},
                         {"type": "reply", "text": "finally"})
    notices: list[RetryNotice] = []
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        await trio.lowlevel.checkpoint()

    events, error = run(provider(llmock_server, notices, sleep=sleep, max_attempts=3))
    assert error is None and events[-1] == Finished(reason="stop")
    assert [(n.attempt, n.status, n.retry_after_s) for n in notices] == [(1, 429, 0.25), (2, 429, 0.25)]
    assert slept == [n.delay_s for n in notices]
    assert all(0.25 <= s <= 0.25 * 1.1 for s in slept), slept  # what the server asked, plus at most 10 % jitter
    assert len(llmock_server.requests()) == 3


def test_500_is_retried_then_exhausted(llmock_server: LLMockServer) -> None:
    llmock_server.script({"type": "fail", "status": 500, "times": 10})
    notices: list[RetryNotice] = []
    events, error = run(provider(llmock_server, notices, max_attempts=3))
    assert error is not None and error.kind is ModelErrorKind.HTTP_STATUS
    assert error.status == 500 and error.attempts == 3 and "after 3 attempts" in error.detail
    assert [n.attempt for n in notices] == [1, 2] and all(n.retry_after_s is None for n in notices)
    assert events == []
    assert len(llmock_server.requests()) == 3


def test_a_client_error_is_not_retried(llmock_server: LLMockServer) -> None:
    llmock_server.script({"type": "fail", "status": 400, "message": "bad tool schema"})
    notices: list[RetryNotice] = []
    _, error = run(provider(llmock_server, notices))
    assert error is not None and error.kind is ModelErrorKind.HTTP_STATUS and error.status == 400
    assert "bad tool schema" in error.detail and error.attempts == 1 and notices == []


def test_a_retry_after_beyond_the_limit_fails_at_once(llmock_server: LLMockServer) -> None:
    llmock_server.script({"type": "fail", "status": 429, "retry_after": 120})
    notices: list[RetryNotice] = []
    started = time.monotonic()
    _, error = run(provider(llmock_server, notices, max_retry_after_s=5))
    assert error is not None and error.kind is ModelErrorKind.HTTP_STATUS and "max_retry_after_s" in error.detail
    assert notices == [] and time.monotonic() - started < 2


def test_mid_stream_disconnect(llmock_server: LLMockServer) -> None:
    llmock_server.script({"type": "reply", "text": "partial answer", "tool_calls": [
        {"name": "read", "arguments": {"path": "a-long-enough-path/notes.txt"}}]},
        {"type": "stream_fault", "kind": "disconnect", "after_chunks": 5})
    events, error = run(provider(llmock_server))
    assert error is not None and error.kind is ModelErrorKind.DISCONNECTED, error
    assert "after 5 chunk(s)" in error.detail
    assert_no_turn(events)


def test_truncated_stream_without_finish_reason(llmock_server: LLMockServer) -> None:
    llmock_server.script({"type": "reply", "text": "cut short", "tool_calls": [
        {"name": "read", "arguments": {"path": "notes.txt"}}]},
        {"type": "stream_fault", "kind": "truncate", "after_chunks": 4})
    events, error = run(provider(llmock_server))
    assert error is not None and error.kind is ModelErrorKind.NO_FINISH, error
    assert_no_turn(events)  # the tool call had started streaming: it must not come out half-built


def test_stall_hits_the_stall_deadline(llmock_server: LLMockServer) -> None:
    llmock_server.script({"type": "stream_fault", "kind": "stall", "after_chunks": 2, "stall_seconds": 30})
    started = time.monotonic()
    events, error = run(provider(llmock_server, stall_timeout_s=0.3))
    elapsed = time.monotonic() - started
    assert error is not None and error.kind is ModelErrorKind.STALL_TIMEOUT, error
    assert 0.3 <= elapsed < 2.0, elapsed
    assert_no_turn(events)


def test_slow_first_token_hits_the_first_token_deadline(llmock_server: LLMockServer) -> None:
    llmock_server.script({"type": "slow_first_token", "seconds": 30})
    started = time.monotonic()
    events, error = run(provider(llmock_server, first_token_timeout_s=0.3, stall_timeout_s=10))
    elapsed = time.monotonic() - started
    assert error is not None and error.kind is ModelErrorKind.FIRST_TOKEN_TIMEOUT, error
    assert 0.3 <= elapsed < 2.0, elapsed
    assert events == []


def test_malformed_chunk(llmock_server: LLMockServer) -> None:
    llmock_server.script({"type": "stream_fault", "kind": "malformed", "after_chunks": 2})
    events, error = run(provider(llmock_server))
    assert error is not None and error.kind is ModelErrorKind.MALFORMED, error
    assert "chunk 3: not valid JSON" in error.detail
    assert_no_turn(events)


def test_tool_call_with_broken_argument_json(llmock_server: LLMockServer) -> None:
    llmock_server.script({"type": "reply", "tool_calls": [{"name": "read", "arguments": {"path": "notes.txt"}}]},
                         {"type": "tool_fault", "kind": "malformed_arguments", "match": {}})
    events, error = run(provider(llmock_server))
    assert error is not None and error.kind is ModelErrorKind.MALFORMED, error
    assert "tool call 0 (read" in error.detail and "not valid JSON" in error.detail
    assert_no_turn(events)


def test_connect_failure_is_retried_then_typed() -> None:
    port = free_port()  # nothing listens there
    notices: list[RetryNotice] = []
    events, error = run(provider(f"http://127.0.0.1:{port}/v1", notices, max_attempts=2))
    assert error is not None and error.kind is ModelErrorKind.CONNECT and error.attempts == 2
    assert [(n.attempt, n.status) for n in notices] == [(1, None)]
    assert events == []


def test_interrupt_cancels_a_stalled_stream_promptly(llmock_server: LLMockServer) -> None:
    """An interrupt is a trio cancellation from outside: it ends the call within 100 ms, as Cancelled, not an error."""
    llmock_server.script({"type": "reply", "text": "some words before the stall"},
                         {"type": "stream_fault", "kind": "stall", "after_chunks": 2, "stall_seconds": 30})
    model = provider(llmock_server, stall_timeout_s=30)
    seen: list[ModelEvent] = []

    async def main() -> float:
        got_first = trio.Event()

        async def consume() -> None:
            async with aclosing(model.stream(REQUEST)) as stream:  # type: ignore[type-var]
                async for event in stream:
                    seen.append(event)
                    got_first.set()

        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(consume)
                await got_first.wait()
                await trio.testing.wait_all_tasks_blocked(cushion=0.05)  # the consumer now waits on the stall
                cancelled_at = trio.current_time()
                scope.cancel()
        return trio.current_time() - cancelled_at

    lag = trio.run(main)
    assert lag < 0.1, f"cancellation took {lag * 1000:.0f} ms"
    assert seen and all(isinstance(e, TextDelta) for e in seen)


def test_missing_key_variable_is_a_typed_error_before_any_request(llmock_server: LLMockServer) -> None:
    config = OpenAIConfig(kind="openai", base_url=llmock_server.base_url, model="gpt-4o",
                          api_key_env="OUROACTORS_TEST_UNSET_KEY_VAR")
    _, error = run(OpenAIProvider(config, environ={}))
    assert error is not None and error.kind is ModelErrorKind.CONFIG and "OUROACTORS_TEST_UNSET_KEY_VAR" in error.detail
    assert llmock_server.requests() == []


def test_key_read_from_the_named_variable_is_sent(llmock_server: LLMockServer) -> None:
    """The key is the named variable's value, read when the request is built (the config holds only the name)."""
    config = OpenAIConfig(kind="openai", base_url=llmock_server.base_url, model="gpt-4o", api_key_env="LLM_KEY")
    model = OpenAIProvider(config, environ={"LLM_KEY": "sk-test-123"})
    assert model._headers()["authorization"] == "Bearer sk-test-123"
    llmock_server.script({"type": "reply", "text": "ok"})
    events, error = run(model)
    assert error is None and events[-1] == Finished(reason="stop")


@pytest.mark.parametrize("raw", [{"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}])
def test_make_provider_builds_the_openai_provider(raw: dict[str, Any]) -> None:
    built = make_provider(raw)
    assert isinstance(built, OpenAIProvider) and built.config.url == "http://127.0.0.1:9/v1/chat/completions"
