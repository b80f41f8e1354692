"""The Chat Completions streaming wire format, as pure functions: the functional core of the ``openai`` provider.

Nothing here does I/O or knows about trio, so every decision — how SSE bytes split into events, how streamed
tool-call fragments become whole calls, which chunk is malformed and why, how long to wait before a retry — is
tested without a server (and with one, through the shell in :mod:`.openai`).

A turn is applied whole or not at all: :class:`ChatStreamAssembler` hands out text deltas as they arrive (the
consumer shows them, and discards them if the turn later fails) but tool calls only from :meth:`finish`, once the
stream has ended with a finish reason and every call's arguments parsed as a JSON object.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from ..model import Finished, Message, ModelError, ModelErrorKind, ModelEvent, ModelRequest, TextDelta, ToolCall, Usage

_FINISH = {"stop": "stop", "tool_calls": "tool_calls", "length": "length", "content_filter": "content_filter",
           "function_call": "tool_calls"}  # the legacy name of tool_calls, still sent by some servers
MAX_LINE_BYTES = 16 * 1024 * 1024  # one SSE line; a server that never ends a line is not streaming
RETRYABLE_STATUSES = frozenset({408, 409, 429}) | frozenset(range(500, 600))


def _clip(text: str, limit: int = 120) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


# -- request -------------------------------------------------------------------------------------------------------


def _message(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        out["content"] = message.content or None
        out["tool_calls"] = [
            {"id": call.id, "type": "function",
             "function": {"name": call.name, "arguments": json.dumps(call.arguments, separators=(",", ":"))}}
            for call in message.tool_calls
        ]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    if message.name is not None:
        out["name"] = message.name
    return out


def chat_body(request: ModelRequest, *, model: str, include_usage: bool = True,
              temperature: float | None = None) -> dict[str, Any]:
    """The JSON body of a streaming ``POST /chat/completions`` for ``request``."""
    body: dict[str, Any] = {"model": request.model or model, "messages": [_message(m) for m in request.messages],
                            "stream": True}
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    if request.tools:
        body["tools"] = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                             "parameters": t.parameters}} for t in request.tools]
    if request.max_tokens is not None:
        body["max_tokens"] = request.max_tokens
    if temperature is not None:
        body["temperature"] = temperature
    return body


# -- SSE -------------------------------------------------------------------------------------------------------------


class SSEDecoder:
    """Server-sent events from bytes: ``feed`` returns the ``data`` of every event a blank line completed.

    Comments (``:``) and the fields ``event``/``id``/``retry`` are ignored: Chat Completions puts everything in
    ``data``. Lines end in LF or CRLF.
    """

    def __init__(self) -> None:
        self._buffer = b""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[str]:
        lines = (self._buffer + chunk).split(b"\n")
        self._buffer = lines.pop()  # the unfinished last line (b"" when the chunk ended a line)
        out: list[str] = []
        for raw in lines:
            line = raw.rstrip(b"\r").decode("utf-8", errors="replace")
            if not line:
                if self._data:
                    out.append("\n".join(self._data))
                    self._data = []
            elif line.startswith("data:"):
                value = line[5:]
                self._data.append(value[1:] if value.startswith(" ") else value)
        if len(self._buffer) > MAX_LINE_BYTES:
            raise ModelError(ModelErrorKind.MALFORMED, f"an SSE line longer than {MAX_LINE_BYTES} bytes")
        return out

    def close(self) -> list[str]:
        """At end of stream: an event whose blank line never came (servers that drop the last one) still counts."""
        out = self.feed(b"\n") if self._buffer else []
        if self._data:
            out.append("\n".join(self._data))
            self._data = []
        return out


# -- chunks ----------------------------------------------------------------------------------------------------------


@dataclass
class _PartialCall:
    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ChatStreamAssembler:
    """Folds ``chat.completion.chunk`` payloads into model events; raises :class:`ModelError` on anything else."""

    def __init__(self) -> None:
        self.chunks = 0
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self._calls: dict[int, _PartialCall] = {}

    def _bad(self, where: str, detail: str) -> ModelError:
        return ModelError(ModelErrorKind.MALFORMED, f"chunk {self.chunks}{where}: {detail}")

    def feed(self, payload: str) -> list[ModelEvent]:
        """One SSE ``data`` payload (not ``[DONE]``); returns the text deltas it carries."""
        self.chunks += 1
        try:
            chunk = json.loads(payload)
        except ValueError as exc:
            raise self._bad("", f"not valid JSON ({exc.args[0]}): {_clip(payload)}") from None
        if not isinstance(chunk, dict):
            raise self._bad("", f"expected a JSON object, got {type(chunk).__name__}: {_clip(payload)}")
        if "error" in chunk:
            error = chunk["error"]
            message = error.get("message", error) if isinstance(error, dict) else error
            raise self._bad(".error", f"the server reported an error mid-stream: {_clip(str(message))}")
        usage = chunk.get("usage")
        if usage is not None:
            self._usage(usage)
        choices = chunk.get("choices", [])
        if not isinstance(choices, list):
            raise self._bad(".choices", f"expected a list, got {_clip(json.dumps(choices))}")
        out: list[ModelEvent] = []
        for position, choice in enumerate(choices):
            where = f".choices[{position}]"
            if not isinstance(choice, dict):
                raise self._bad(where, f"expected an object, got {_clip(json.dumps(choice))}")
            if choice.get("index", 0) != 0:
                continue  # we ask for one choice; a server that sends more gets the first one used
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                raise self._bad(f"{where}.delta", f"expected an object, got {_clip(json.dumps(delta))}")
            content = delta.get("content")
            if content is not None:
                if not isinstance(content, str):
                    raise self._bad(f"{where}.delta.content", f"expected a string, got {_clip(json.dumps(content))}")
                if content:
                    out.append(TextDelta(text=content))
            calls = delta.get("tool_calls")
            if calls is not None:
                self._tool_deltas(calls, f"{where}.delta.tool_calls")
            finish = choice.get("finish_reason")
            if finish is not None:
                if finish not in _FINISH:
                    raise self._bad(f"{where}.finish_reason",
                                    f"unknown value {_clip(str(finish))}; allowed: {', '.join(map(repr, _FINISH))}")
                self.finish_reason = _FINISH[finish]
        return out

    def _usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            raise self._bad(".usage", f"expected an object, got {_clip(json.dumps(usage))}")
        tokens = []
        for key in ("prompt_tokens", "completion_tokens"):
            value = usage.get(key, 0)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise self._bad(f".usage.{key}", f"expected a count >= 0, got {_clip(json.dumps(value))}")
            tokens.append(value)
        self.usage = Usage(input_tokens=tokens[0], output_tokens=tokens[1])

    def _tool_deltas(self, calls: Any, where: str) -> None:
        if not isinstance(calls, list):
            raise self._bad(where, f"expected a list, got {_clip(json.dumps(calls))}")
        for position, delta in enumerate(calls):
            here = f"{where}[{position}]"
            if not isinstance(delta, dict):
                raise self._bad(here, f"expected an object, got {_clip(json.dumps(delta))}")
            index = delta.get("index", position)
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < 1024:
                raise self._bad(f"{here}.index", f"expected an integer in 0..1023, got {_clip(json.dumps(index))}")
            partial = self._calls.setdefault(index, _PartialCall())
            call_id = delta.get("id")
            if call_id is not None:
                if not isinstance(call_id, str) or not call_id:
                    raise self._bad(f"{here}.id", f"expected a non-empty string, got {_clip(json.dumps(call_id))}")
                if partial.id is not None and partial.id != call_id:
                    raise self._bad(f"{here}.id", f"tool call {index} changed id from {partial.id!r} to {call_id!r}")
                partial.id = call_id
            function = delta.get("function") or {}
            if not isinstance(function, dict):
                raise self._bad(f"{here}.function", f"expected an object, got {_clip(json.dumps(function))}")
            name, arguments = function.get("name"), function.get("arguments")
            if name is not None:
                if not isinstance(name, str):
                    raise self._bad(f"{here}.function.name", f"expected a string, got {_clip(json.dumps(name))}")
                if name != partial.name:
                    partial.name += name
            if arguments is not None:
                if not isinstance(arguments, str):
                    raise self._bad(f"{here}.function.arguments",
                                    f"expected a string, got {_clip(json.dumps(arguments))}")
                partial.arguments.append(arguments)

    def finish(self) -> list[ModelEvent]:
        """At the end of the stream: the whole tool calls, the usage and :class:`Finished` — or a typed error."""
        if self.finish_reason is None:
            raise ModelError(ModelErrorKind.NO_FINISH,
                             f"the stream ended after {self.chunks} chunk(s) without a finish_reason")
        out: list[ModelEvent] = []
        for index in sorted(self._calls):
            partial = self._calls[index]
            where = f"tool call {index}"
            if partial.id is None:
                raise ModelError(ModelErrorKind.MALFORMED, f"{where} ({partial.name or 'no name'}) has no id")
            if not partial.name:
                raise ModelError(ModelErrorKind.MALFORMED, f"{where} (id {partial.id}) has no function name")
            text = "".join(partial.arguments)
            try:
                arguments = json.loads(text) if text.strip() else {}
            except ValueError as exc:
                raise ModelError(ModelErrorKind.MALFORMED, f"{where} ({partial.name}, id {partial.id}): arguments "
                                 f"are not valid JSON ({exc.args[0]}): {_clip(text)}") from None
            if not isinstance(arguments, dict):
                raise ModelError(ModelErrorKind.MALFORMED, f"{where} ({partial.name}, id {partial.id}): arguments "
                                 f"must be a JSON object, got {_clip(text)}")
            out.append(ToolCall(id=partial.id, name=partial.name, arguments=arguments))
        if self.usage is not None:
            out.append(self.usage)
        out.append(Finished(reason=self.finish_reason))  # type: ignore[arg-type]  # a value of _FINISH
        return out


# -- retries ---------------------------------------------------------------------------------------------------------


def parse_retry_after(headers: Any, now: datetime | None = None) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms``, else ``Retry-After`` (seconds or an HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            value = float(millis) / 1000.0
            if value >= 0:
                return value
        except ValueError:
            pass
    text = headers.get("retry-after")
    if text is None:
        return None
    try:
        seconds = float(text)
        return seconds if seconds >= 0 else None
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def retry_delay(attempt: int, retry_after: float | None, *, base: float, cap: float, rng: random.Random) -> float:
    """How long to wait after failed ``attempt`` (1-based).

    With ``Retry-After``: that long, plus up to 10 % so that clients told the same instant do not all return in
    it. Without: exponential backoff ``base·2^(attempt-1)`` capped at ``cap``, with "equal jitter" (half fixed,
    half random) so the wait never collapses to zero.
    """
    if retry_after is not None:
        return retry_after * (1.0 + 0.1 * rng.random())
    ceiling = min(cap, base * 2 ** (attempt - 1))
    return ceiling / 2 + rng.random() * ceiling / 2
