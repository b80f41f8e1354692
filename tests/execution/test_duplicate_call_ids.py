"""A model that reuses a tool-call id within a turn: a typed, recorded model error, and nothing of that answer runs.

A call's id is its effect's identity in the ledger (session/turn/call id): before the loop checked, a second call
with an id already used in the turn was taken for the effect already recorded — reported ``ok`` without running,
or refused as "already recorded with another fingerprint" — and ``journal replay`` reported a divergence on an
untampered session. The check is the loop's (any provider), so it is tested here with the ``openai`` provider
against a real local HTTP server speaking the Chat Completions SSE format, which sends the duplicate ids, and the
real loop, live effect port, ledger, grants and journal on LMDB.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
import trio

from benchmarks.bench_effect_path import prepared
from ouroactors.authorities.storage.env import close_env
from ouroactors.core.serving import QuietHTTPServer
from ouroactors.runtime.execution import reading, steps
from ouroactors.runtime.execution.config import parse_session_config
from ouroactors.runtime.execution.loop import Ports, SessionLoop
from ouroactors.runtime.execution.model import ToolCall
from ouroactors.runtime.execution.ports import JournalWriter, ProviderModel, SteeringQueue, ToolsCatalog
from ouroactors.runtime.execution.providers import OpenAIConfig, OpenAIProvider
from ouroactors.runtime.execution.replay import replay
from ouroactors.testing.leaks import port_listening

from .loop_support import ListSink, StepClock

AUTHORITY = {"storage": 3, "ledger": 5, "grants": 7}
CONFIG = '[sandbox]\nmode = "none"\n[tools]\nenabled = ["write"]'


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "local",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def tool_calls(*calls: tuple[str, str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The SSE chunks of an answer calling ``(id, name, arguments)``: each call in a chunk of its own, then the
    finish reason and the usage, as Chat Completions streams them."""
    chunks = [_chunk({"role": "assistant", "content": None})]
    for index, (call_id, name, arguments) in enumerate(calls):
        chunks.append(_chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                              "function": {"name": name, "arguments": json.dumps(arguments)}}]}))
    chunks.append(_chunk({}, "tool_calls"))
    chunks.append({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [],
                   "usage": {"prompt_tokens": 10, "completion_tokens": 5}})
    return chunks


def answer(text: str) -> list[dict[str, Any]]:
    return [_chunk({"role": "assistant", "content": text}), _chunk({}, "stop")]


class _ChatCompletions(BaseHTTPRequestHandler):
    """``POST /v1/chat/completions``: the next queued answer, as server-sent events; the stream ends the reply."""

    protocol_version = "HTTP/1.0"  # the body ends when the connection closes, as an SSE stream may
    answers: list[list[dict[str, Any]]]
    bodies: list[dict[str, Any]]

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        type(self).bodies.append(body)
        if self.path != "/v1/chat/completions" or not type(self).answers:
            self.send_response(404)
            self.end_headers()
            return
        chunks = type(self).answers.pop(0)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def chat() -> Iterator[tuple[str, list[list[dict[str, Any]]], list[dict[str, Any]]]]:
    """(base_url, answers to queue, request bodies seen): a Chat Completions server on 127.0.0.1, in a thread."""
    answers: list[list[dict[str, Any]]] = []
    bodies: list[dict[str, Any]] = []
    server = QuietHTTPServer(("127.0.0.1", 0), type("Handler", (_ChatCompletions,),
                                                    {"answers": answers, "bodies": bodies}))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    port = server.server_address[1]
    try:
        yield f"http://127.0.0.1:{port}/v1", answers, bodies
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        assert not thread.is_alive() and not port_listening(port)


def _turn(tmp_path: Path, base_url: str) -> tuple[Any, Path, Any]:
    """Run one turn of a session whose model is the ``openai`` provider at ``base_url``: (ready, workspace,
    outcome). The caller closes ``ready.config``."""
    work = tmp_path / "ws"
    work.mkdir()
    ready = prepared(tmp_path / "data", work, session="s1", authority=AUTHORITY, rules=("allow:Write(**)",),
                     watch=False)
    config = parse_session_config(CONFIG)
    model = OpenAIProvider(OpenAIConfig(kind="openai", base_url=base_url, model="local", max_attempts=1,
                                        first_token_timeout_s=10, stall_timeout_s=10))
    ports = Ports(model=ProviderModel(model), effects=ready.effects, journal=JournalWriter(ready.journal),
                  clock=StepClock(), control=SteeringQueue(), sink=ListSink(),
                  catalog=ToolsCatalog(config.tools.enabled))
    loop = SessionLoop("s1", config, ports, flush_before_tools=False)
    loop.open()
    try:
        outcome = trio.run(loop.run_turn, "write the files")
    except BaseException:
        close_env(ready.config)
        raise
    return ready, work, outcome


def _model_results(ready: Any) -> list[dict[str, Any]]:
    return [r.fields for r in reading.records(ready.journal.env, "s1") if r.kind == "model_result"]


def _ledger_ids(ready: Any) -> list[str]:
    return [e.effect_id for e in ready.store.list(session="s1", kind="file_write")]


def test_two_calls_of_one_answer_with_one_id_are_a_model_error_and_neither_runs(tmp_path, chat) -> None:
    base_url, answers, _ = chat
    answers.append(tool_calls(("call_0", "write", {"path": "a.txt", "content": "a"}),
                              ("call_0", "write", {"path": "b.txt", "content": "b"})))
    ready, work, outcome = _turn(tmp_path, base_url)
    try:
        assert outcome.status == "failed"
        assert "model error (malformed)" in outcome.reason and "'call_0'" in outcome.reason, outcome.reason
        [result] = _model_results(ready)
        assert result["error"]["kind"] == "malformed"
        assert "repeats the id 'call_0' of another call of the same answer" in result["error"]["detail"]
        assert not (work / "a.txt").exists() and not (work / "b.txt").exists()  # no tool ran
        assert _ledger_ids(ready) == []  # nothing was started, nothing settled ok
        kinds = [r.kind for r in reading.records(ready.journal.env, "s1")]
        assert "tool_call" not in kinds and "tool_result" not in kinds
        report = replay(ready.journal.env, "s1")  # an untampered session replays without a divergence
        assert report.ok and report.verified_turns == 1, report
    finally:
        close_env(ready.config)


def test_an_id_an_earlier_model_call_of_the_turn_used_is_a_model_error(tmp_path, chat) -> None:
    base_url, answers, bodies = chat
    answers.append(tool_calls(("call_0", "write", {"path": "a.txt", "content": "a"})))
    answers.append(tool_calls(("call_0", "write", {"path": "b.txt", "content": "b"})))
    ready, work, outcome = _turn(tmp_path, base_url)
    try:
        assert len(bodies) == 2  # the second model call was made (after the first answer's call ran)
        assert outcome.status == "failed" and "'call_0'" in outcome.reason, outcome.reason
        first, second = _model_results(ready)
        assert "error" not in first and [c["id"] for c in first["tool_calls"]] == ["call_0"]
        assert second["error"]["kind"] == "malformed"
        assert "of a call an earlier model call of this turn made" in second["error"]["detail"]
        assert (work / "a.txt").read_text() == "a" and not (work / "b.txt").exists()
        assert _ledger_ids(ready) == ["s1/t1/call_0"]
        results = [r.fields for r in reading.records(ready.journal.env, "s1") if r.kind == "tool_result"]
        assert [(r["call_id"], r["status"]) for r in results] == [("call_0", "ok")]
        report = replay(ready.journal.env, "s1")
        assert report.ok and report.verified_turns == 1, report
    finally:
        close_env(ready.config)


def test_distinct_ids_across_the_turns_answers_run(tmp_path, chat) -> None:
    """The check refuses only a repeat: ids that differ run, one after the other, each once."""
    base_url, answers, _ = chat
    answers.append(tool_calls(("call_0", "write", {"path": "a.txt", "content": "a"}),
                              ("call_1", "write", {"path": "b.txt", "content": "b"})))
    answers.append(tool_calls(("call_2", "write", {"path": "c.txt", "content": "c"})))
    answers.append(answer("done"))
    ready, work, outcome = _turn(tmp_path, base_url)
    try:
        assert outcome.status == "completed", outcome
        assert sorted(p.name for p in work.iterdir()) == ["a.txt", "b.txt", "c.txt"]
        assert sorted(_ledger_ids(ready)) == ["s1/t1/call_0", "s1/t1/call_1", "s1/t1/call_2"]
        assert replay(ready.journal.env, "s1").ok
    finally:
        close_env(ready.config)


def test_repeated_call_id_is_pure_and_names_the_call() -> None:
    a, b = ToolCall(id="x", name="read"), ToolCall(id="y", name="write")
    assert steps.repeated_call_id([a, b], set()) is None
    assert steps.repeated_call_id([a, b, a], set()) == ("tool call 2 (read) repeats the id 'x' of another call of "
                                                        "the same answer")
    assert "earlier model call" in (steps.repeated_call_id([b], {"y"}) or "")


def test_two_long_ids_that_are_one_effect_id_once_cut_are_a_model_error() -> None:
    """The ledger keys an effect by session/turn/call id cut to 200 characters: two ids that differ only past
    the cut would be one effect, the second reported as the first and never run."""
    prefix = "s" * 150 + "/t1/"
    a = ToolCall(id="c" * 60 + "A", name="read", arguments={"path": "x"})
    b = ToolCall(id="c" * 60 + "B", name="read", arguments={"path": "y"})
    said = steps.repeated_call_id([a, b], set(), prefix) or ""
    assert "name one effect once cut to 200 characters" in said and "tool call 1 (read)" in said
    assert steps.repeated_call_id([a], {steps.effect_key(prefix, b.id)}, prefix) is not None  # an earlier answer's
    assert steps.repeated_call_id([a, b], set(), "s1/t1/") is None  # short enough: two effects
