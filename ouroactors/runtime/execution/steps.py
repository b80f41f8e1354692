"""The turn loop's decisions, pure: what to ask the model, when to stop, what the model is told.

Nothing here awaits, reads a clock or touches a port, so the same inputs give the same decision in a live turn and
in its replay — which is what lets replay compare digests at all. :mod:`.loop` is the shell that feeds these
functions from its ports.

Turn statuses (``turn_settled.status``): ``completed`` (the model answered without tool calls), ``failed`` (a model
error), ``interrupted`` (an interrupt arrived), ``deadline`` (the turn's deadline passed), ``limit`` (a count
limit: model calls in the turn, or the session's tokens).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ...core.codec import digest_of
from .config import Limits
from .model import Message, ModelErrorKind, ModelRequest, ToolCall, ToolSpec

Status = Literal["completed", "failed", "interrupted", "deadline", "limit"]
INTERRUPTED = "interrupted"  # the detail of a CANCELLED model error / cancelled tool result caused by an interrupt
DEADLINE = "turn deadline exceeded"


@dataclass(frozen=True)
class Stop:
    status: Status
    reason: str


def before_model_call(limits: Limits, *, calls_made: int, tokens_used: int, now_ns: int, deadline_ns: int
                      ) -> Stop | None:
    """Whether the turn may make another model call (checked before every call, in this order)."""
    if now_ns >= deadline_ns:
        return Stop("deadline", f"turn deadline of {limits.turn_deadline_s:g} s passed before model call "
                                f"{calls_made + 1}")
    if calls_made >= limits.max_model_calls:
        return Stop("limit", f"max_model_calls ({limits.max_model_calls}) reached")
    if tokens_used >= limits.max_tokens:
        return Stop("limit", f"max_tokens ({limits.max_tokens}) reached: {tokens_used} tokens used")
    return None


def after_model(tool_calls: int, finish: str) -> Stop | None:
    """A model answer without tool calls completes the turn; with tool calls the loop runs them."""
    if tool_calls:
        return None
    if finish == "length":
        return Stop("completed", "the model's answer was cut at its output token limit")
    if finish == "content_filter":
        return Stop("completed", "the model's answer was withheld by its content filter")
    return Stop("completed", "the model answered")


def on_model_error(kind: str, detail: str) -> Stop:
    if kind == ModelErrorKind.CANCELLED.value:
        if detail == INTERRUPTED:
            return Stop("interrupted", "interrupted during a model call")
        return Stop("deadline", f"model call cancelled: {detail}")
    return Stop("failed", f"model error ({kind}): {detail}")


def after_tools(statuses: Sequence[tuple[str, str | None]]) -> Stop | None:
    """After a batch of tool results ``(status, error)``: a cancelled one ends the turn (interrupt or deadline)."""
    for status, error in statuses:
        if status == "cancelled":
            if error == INTERRUPTED:
                return Stop("interrupted", "interrupted during tool calls")
            return Stop("deadline", f"tool call cancelled: {error}")
    return None


def build_request(model: str, system_prompt: str, conversation: Sequence[Message], tools: tuple[ToolSpec, ...],
                  max_output_tokens: int | None) -> ModelRequest:
    messages = (Message(role="system", content=system_prompt), *conversation) if system_prompt else tuple(conversation)
    return ModelRequest(model=model, messages=messages, tools=tools, max_tokens=max_output_tokens)


def request_digest(request: ModelRequest) -> str:
    return digest_of(request)


def conversation_digest(conversation: Sequence[Message]) -> str:
    return digest_of(list(conversation))


def assistant_message(text: str, calls: Sequence[ToolCall]) -> Message:
    return Message(role="assistant", content=text, tool_calls=tuple(calls))


def cap_output(text: str, cap: int) -> tuple[str, bool]:
    """Cut ``text`` to at most ``cap`` UTF-8 bytes on a character edge; say whether anything was cut."""
    data = text.encode("utf-8", errors="surrogatepass")
    if len(data) <= cap:
        return text, False
    return data[:cap].decode("utf-8", errors="ignore"), True


def tool_text(status: str, output: str, truncated: bool, cap: int, error: str | None, error_kind: str | None
              ) -> str:
    """What the model is told for one tool result (the output capped at the session's ``max_output_bytes``)."""
    shown, cut = cap_output(output, cap)
    parts = [shown] if shown else []
    if truncated or cut:
        parts.append(f"[output truncated at {cap} bytes]")
    if error:
        parts.append(f"error ({error_kind or status}): {error}")
    return "\n".join(parts) if parts else f"({status}, no output)"


def tool_message(call_id: str, name: str, text: str) -> Message:
    return Message(role="tool", content=text, tool_call_id=call_id, name=name)


def usage_tokens(usage: dict[str, Any] | None) -> int:
    if not usage:
        return 0
    return int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
