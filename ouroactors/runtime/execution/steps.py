"""The turn loop's decisions, pure: what to ask the model, when to stop, what the model is told.

Nothing here awaits, reads a clock or touches a port, so the same inputs give the same decision in a live turn and
in its replay — which is what lets replay compare digests at all. :mod:`.loop` is the shell that feeds these
functions from its ports.

Turn statuses (``turn_settled.status``): ``completed`` (the model answered without tool calls), ``failed`` (a model
error), ``interrupted`` (an interrupt arrived), ``deadline`` (the turn's deadline passed), ``limit`` (a count
limit: model calls in the turn, or the session's tokens), ``ambiguous`` (a tool call's outcome is unknown: see
:func:`after_tools`).
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ...core.codec import _pack, digest_of
from .config import Limits
from .model import Message, ModelErrorKind, ModelRequest, ToolCall, ToolSpec

Status = Literal["completed", "failed", "interrupted", "deadline", "limit", "ambiguous"]
INTERRUPTED = "interrupted"  # the detail of a CANCELLED model error / cancelled tool result caused by an interrupt
DEADLINE = "turn deadline exceeded"
STOPPED = "its runtime stopped"  # a cancel neither an interrupt nor the deadline made: the runtime's trio loop ended


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


def repeated_call_id(calls: Sequence[ToolCall], used: set[str], prefix: str = "", limit: int = 200) -> str | None:
    """What is wrong with a model answer whose tool calls reuse an id — another call's of the same answer, or one an
    earlier model call of the same turn made — or None. A call's id is its effect's identity in the ledger
    (``prefix`` + call id, cut to ``limit`` characters: session/turn/call id): a repeated one would be taken for the
    effect already recorded and reported as it, never run; so would two long ids that are one once cut. ``used``
    holds the effect keys of the turn's earlier calls (:func:`effect_key`). The loop makes it a model error
    (``malformed``), whatever the provider: nothing of the answer runs."""
    seen: dict[str, str] = {}
    for position, call in enumerate(calls):
        key = effect_key(prefix, call.id, limit)
        if key in seen or key in used:
            where = ("another call of the same answer" if key in seen
                     else "a call an earlier model call of this turn made")
            if seen.get(key, call.id) == call.id and len(prefix) + len(call.id) <= limit:
                return f"tool call {position} ({call.name}) repeats the id {call.id!r} of {where}"
            return (f"tool call {position} ({call.name}): its id {call.id[:60]!r}… and the id of {where} name one "
                    f"effect once cut to {limit} characters (session/turn/call id): too long to tell apart")
        seen[key] = call.id
    return None


def effect_key(prefix: str, call_id: str, limit: int = 200) -> str:
    """The effect identity a call id gives (:func:`~.effects.effect_id_of`: ``prefix`` + id, cut to ``limit``)."""
    return f"{prefix}{call_id}"[:limit]


def on_model_error(kind: str, detail: str) -> Stop:
    if kind == ModelErrorKind.CANCELLED.value:
        if detail == INTERRUPTED:
            return Stop("interrupted", "interrupted during a model call")
        return Stop("deadline", f"model call cancelled: {detail}")
    return Stop("failed", f"model error ({kind}): {detail}")


def after_tools(statuses: Sequence[tuple[str, str | None]]) -> Stop | None:
    """After a batch of tool results ``(status, error)``: a cancelled one ends the turn (interrupt or deadline), and
    so does one whose outcome is ``unknown`` — status ``ambiguous``. The model is not asked again: told that a write
    may or may not have happened, it could only guess or retry it (a new call, with a new idempotency key), and
    seed 001 asks to query downstream state before retrying an ambiguous write. The coordinator takes the session
    to recovery, where the effect's reconciler settles it or the session parks for an operator."""
    for status, error in statuses:
        if status == "cancelled":
            if error == INTERRUPTED:
                return Stop("interrupted", "interrupted during tool calls")
            return Stop("deadline", f"tool call cancelled: {error}")
    for status, error in statuses:
        if status == "unknown":
            return Stop("ambiguous", f"a tool call's outcome is unknown ({error or 'no detail'}): the turn stops "
                                     "until its effect is reconciled or settled")
    return None


def build_request(model: str, system: Message | None, conversation: Sequence[Message], tools: tuple[ToolSpec, ...],
                  max_output_tokens: int | None) -> ModelRequest:
    """The request for the next model call, built from values that are already validated models.

    ``model_construct``: validating would re-check every message of the conversation on every call (and copy the
    tools tuple, which defeats :class:`Digests`' cache) for values the loop built itself from validated parts.
    """
    messages = (system, *conversation) if system is not None else tuple(conversation)
    return ModelRequest.model_construct(model=model, messages=messages, tools=tuple(tools),
                                        max_tokens=max_output_tokens)


def request_digest(request: ModelRequest) -> str:
    """``digest_of(request)`` — the canonical digest (see :class:`Digests` for the incremental form)."""
    return digest_of(request)


def conversation_digest(conversation: Sequence[Message]) -> str:
    return digest_of(list(conversation))


def _array_header(n: int) -> bytes:
    if n < 16:
        return bytes([0x90 | n])
    if n < 1 << 16:
        return b"\xdc" + n.to_bytes(2, "big")
    return b"\xdd" + n.to_bytes(4, "big")


class _Run:
    """Values encoded end to end, and the values themselves (by identity): a sequence that extends the last one
    seen appends only its new values' encodings (the prefix is checked in C: ``map(operator.is_)``)."""

    __slots__ = ("data", "values")

    def __init__(self) -> None:
        self.values: list[object] = []
        self.data = bytearray()

    def of(self, values: Sequence[object], packed: Callable[[object], bytes]) -> bytearray:
        known = len(self.values)
        if len(values) < known or not all(map(operator.is_, values, self.values)):  # map stops at the shorter
            self.values.clear()
            self.data = bytearray()
            known = 0
        for value in values[known:]:
            self.data += packed(value)
            self.values.append(value)
        return self.data


class Digests:
    """The same digests as :func:`request_digest` and :func:`conversation_digest`, byte for byte, without
    re-encoding the whole conversation on every call: a msgpack array is its header followed by its elements'
    encodings, so each (immutable) message is encoded once and its bytes reused. A session's requests grow with
    its conversation; re-encoding all of it per call made a 100-turn replay quadratic (most of its time).

    Requests and the conversation keep a run each (:class:`_Run`: a request starts with the system message, the
    conversation does not, so one run would be rebuilt at every switch): a turn's requests and its settled
    conversation then cost the encodings of their new messages and one SHA-256 over the bytes, not a Python call
    per message of the whole session (which, per turn, made a 200-turn replay quadratic again: ~84k calls)."""

    def __init__(self) -> None:
        self._cache: dict[int, tuple[object, bytes]] = {}
        # A per-message loop in Python cost ~1 µs a message — a 60-turn session's requests hold ~1000 of them.
        self._requests = _Run()
        self._conversation = _Run()

    def packed(self, value: object) -> bytes:
        hit = self._cache.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1]
        data = _pack(value, type(value).__name__)
        self._cache[id(value)] = (value, data)
        return data

    def forget(self, keep: Sequence[object]) -> None:
        """Drop cached encodings of values no longer in ``keep`` (the loop calls it as turns settle). Only once the
        cache holds twice as many as ``keep`` (and a margin): pruning walks all of ``keep``, so pruning at every turn
        made a long session's turns cost in proportion to its length; amortised, it is constant per turn."""
        if len(self._cache) <= 2 * len(keep) + 64:
            return
        alive = {id(v) for v in keep}
        alive.update(id(x) for v in keep if type(v) is tuple for x in v)  # a tuple's elements (the tool specs)
        self._cache = {k: v for k, v in self._cache.items() if k in alive}

    def request(self, request: ModelRequest) -> str:
        h = hashlib.sha256(b"\x94")  # ModelRequest: [model, messages, tools, max_tokens]
        h.update(_pack(request.model, "model"))
        h.update(_array_header(len(request.messages)))
        h.update(self._requests.of(request.messages, self.packed))
        h.update(_array_header(len(request.tools)))  # each spec's bytes cached (the tuple may be a new object)
        for spec in request.tools:
            h.update(self.packed(spec))
        h.update(_pack(request.max_tokens, "max_tokens"))
        return h.hexdigest()

    def conversation(self, conversation: Sequence[Message]) -> str:
        h = hashlib.sha256(_array_header(len(conversation)))
        h.update(self._conversation.of(conversation, self.packed))
        return h.hexdigest()

    def encodings(self, conversation: Sequence[Message]) -> bytes:
        """The conversation's messages' canonical encodings end to end (what :meth:`conversation` hashes after the
        array's header): a conversation snapshot keeps these bytes (:mod:`.snapshots`)."""
        return bytes(self._conversation.of(conversation, self.packed))

    def seed(self, values: Sequence[object], encodings: Sequence[bytes]) -> None:
        """Take ``encodings[i]`` as the encoding of ``values[i]`` (decoded from those very bytes, and checked against
        a digest): a restored conversation is not encoded again by its first request."""
        for value, data in zip(values, encodings, strict=True):
            self._cache[id(value)] = (value, data)


def run_digest(count: int, encodings: bytes) -> str:
    """:func:`conversation_digest` of a conversation of ``count`` messages whose encodings, end to end, are
    ``encodings`` (:meth:`Digests.encodings`)."""
    return hashlib.sha256(_array_header(count) + encodings).hexdigest()


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
    shown, cut = cap_output(repaired(output), cap)
    parts = [shown] if shown else []
    if truncated or cut:
        parts.append(f"[output truncated at {cap} bytes]")
    if error:
        parts.append(repaired(f"error ({error_kind or status}): {error}"))
    return "\n".join(parts) if parts else f"({status}, no output)"


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be a message (it must encode as UTF-8: no lone surrogates), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"not valid text: lone surrogate {text[exc.start]!r} at index {exc.start}"
    return None


def repaired(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (what a message can carry)."""
    return text if text_problem(text) is None else "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c
                                                           for c in text)


def tool_message(call_id: str, name: str, text: str) -> Message:
    return Message(role="tool", content=text, tool_call_id=call_id, name=name)


def usage_tokens(usage: dict[str, Any] | None) -> int:
    if not usage:
        return 0
    return int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
