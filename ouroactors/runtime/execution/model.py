"""What a model provider yields, and what a tool call is: the contract between providers and the turn loop.

A provider turns one :class:`ModelRequest` into an async stream of :data:`ModelEvent` values, ending with exactly
one :class:`Finished` — or raising :class:`ModelError` (typed by :class:`ModelErrorKind`), in which case the turn
loop records the error and applies nothing of the partial stream. Streamed tool calls are assembled by the provider:
the loop only ever sees whole :class:`ToolCall` values with parsed JSON arguments.

Everything here is plain pydantic data so it can be journaled (canonical msgpack) and replayed byte for byte.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from enum import Enum
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Message(_Frozen):
    """One message of the conversation, in Chat Completions' shape (role, content, tool calls, tool result id)."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None


class ToolSpec(_Frozen):
    """A tool as the model sees it: name, description, JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


class ModelRequest(_Frozen):
    """Everything a provider needs for one model call; its canonical digest is journaled as ``model_call``."""

    model: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int | None = None


class TextDelta(_Frozen):
    kind: Literal["text"] = "text"
    text: str


class ToolCall(_Frozen):
    """One whole tool call: the provider's id, the tool name and its parsed JSON arguments."""

    kind: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Usage(_Frozen):
    kind: Literal["usage"] = "usage"
    input_tokens: int = 0
    output_tokens: int = 0


class Finished(_Frozen):
    """The last event of every successful stream."""

    kind: Literal["finished"] = "finished"
    reason: Literal["stop", "tool_calls", "length", "content_filter"]


ModelEvent = TextDelta | ToolCall | Usage | Finished


class ModelErrorKind(str, Enum):
    """Why a model call failed; each is recorded in the journal as a typed model error."""

    HTTP_STATUS = "http_status"  # a non-retryable status, or retries exhausted on 429/5xx
    CONNECT = "connect"  # could not connect / connection refused
    DISCONNECTED = "disconnected"  # the stream broke mid-way
    NO_FINISH = "no_finish"  # the stream ended without a finish_reason
    MALFORMED = "malformed"  # a chunk that is not valid JSON / not the API's shape
    FIRST_TOKEN_TIMEOUT = "first_token_timeout"
    STALL_TIMEOUT = "stall_timeout"
    SCRIPT = "script"  # the scripted provider has no (matching) recorded turn left
    CANCELLED = "cancelled"
    CONFIG = "config"  # the provider cannot be used as configured (e.g. the API key's environment variable is unset)


class ModelError(Exception):
    """A model call that produced no usable turn. ``kind`` says why; ``detail`` says what and where."""

    def __init__(self, kind: ModelErrorKind, detail: str, *, status: int | None = None, attempts: int = 1) -> None:
        super().__init__(f"model error ({kind.value}): {detail}")
        self.kind = kind
        self.detail = detail
        self.status = status
        self.attempts = attempts

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt from its fields, so it survives pickling (an actor may answer with it across processes).
        return (_model_error, (self.kind, self.detail, self.status, self.attempts))


def _model_error(kind: ModelErrorKind, detail: str, status: int | None, attempts: int) -> ModelError:
    return ModelError(kind, detail, status=status, attempts=attempts)


class ModelProvider(Protocol):
    """A source of model turns. ``stream`` is an async generator run under trio."""

    name: str

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]: ...


Message.model_rebuild()

__all__ = [
    "Finished", "Message", "ModelError", "ModelErrorKind", "ModelEvent", "ModelProvider", "ModelRequest",
    "TextDelta", "ToolCall", "ToolSpec", "Usage",
]
