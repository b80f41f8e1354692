"""The ``scripted`` provider: recorded model turns from a TOML or JSON file, deterministic, the embedded default.

A script is a list of turns; a turn is the events one model call streams (text deltas, whole tool calls with fixed
ids, usage) and its finish reason::

    name = "demo"

    [[turns]]
    expect = { user_contains = "notes" }        # optional: refuse a request this turn was not recorded for
    events = [
      { kind = "text", text = "Reading it." },
      { kind = "tool_call", id = "call_read_1", name = "read", arguments = { path = "notes.txt" } },
      { kind = "usage", input_tokens = 12, output_tokens = 7 },
    ]                                            # finish defaults to "tool_calls" here, "stop" without calls

**Which turn answers a request** is a function of the request alone: turn *n* answers a request whose conversation
holds *n* assistant messages. So the provider keeps no state — one instance can serve many sessions, a runtime
that resumes a conversation gets the turn that follows it, and a failed call asked again gets the same turn. A
request past the last turn, or one a turn's ``expect`` does not accept, is a :class:`ModelError` of kind
``SCRIPT`` naming the turn and what differed: a script never answers a conversation it was not recorded for.

Events are streamed with a trio checkpoint (or the turn's ``pace_ms`` sleep) before each one, so a cancelled
turn stops between two events like a real stream would (before the finish, a cancel already requested is seen
without yielding again).
"""

from __future__ import annotations

import json
import operator
import tomllib
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import trio
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError, model_validator

from ..model import (
    Finished,
    Message,
    ModelError,
    ModelErrorKind,
    ModelEvent,
    ModelRequest,
    TextDelta,
    ToolCall,
    Usage,
)
from ._errors import ScriptFileError, problems_from

MAX_SCRIPT_BYTES = 16 * 1024 * 1024
FinishReason = Literal["stop", "tool_calls", "length", "content_filter"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TextEvent(_Strict):
    """One streamed text delta."""

    kind: Literal["text"]
    text: StrictStr


class ToolCallEvent(_Strict):
    """One whole tool call; its ``id`` is fixed so a replayed or re-run script produces the same ledger keys."""

    kind: Literal["tool_call"]
    id: Annotated[StrictStr, Field(min_length=1, max_length=128)]
    name: Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
    arguments: dict[str, Any] = Field(default_factory=dict)


class UsageEvent(_Strict):
    kind: Literal["usage"]
    input_tokens: Annotated[StrictInt, Field(ge=0)] = 0
    output_tokens: Annotated[StrictInt, Field(ge=0)] = 0


ScriptEvent = Annotated[TextEvent | ToolCallEvent | UsageEvent, Field(discriminator="kind")]


class Expect(_Strict):
    """What the request a turn answers must look like; every given condition must hold."""

    user_contains: StrictStr | None = None  # the last user message contains this
    tool_result_contains: StrictStr | None = None  # the last tool result contains this
    last_role: Literal["user", "tool"] | None = None  # the role of the request's last message


class ScriptTurn(_Strict):
    expect: Expect | None = None
    events: Annotated[tuple[ScriptEvent, ...], Field(min_length=1)]
    finish: FinishReason | None = None  # default: "tool_calls" when the turn calls tools, else "stop"
    pace_ms: Annotated[StrictInt, Field(ge=0, le=60_000)] = 0  # a pause before each event, to look like generation

    @model_validator(mode="after")
    def _finish_matches_calls(self) -> ScriptTurn:
        calls = any(isinstance(e, ToolCallEvent) for e in self.events)
        if calls and self.finish not in (None, "tool_calls"):
            raise ValueError(f"@finish: a turn that calls tools finishes with 'tool_calls' (given: {self.finish!r})")
        if not calls and self.finish == "tool_calls":
            raise ValueError("@finish: 'tool_calls' needs at least one event of kind 'tool_call'")
        return self

    @property
    def finish_reason(self) -> FinishReason:
        if self.finish is not None:
            return self.finish
        return "tool_calls" if any(isinstance(e, ToolCallEvent) for e in self.events) else "stop"


class Script(_Strict):
    name: StrictStr = "script"
    turns: Annotated[tuple[ScriptTurn, ...], Field(min_length=1)]

    @model_validator(mode="after")
    def _unique_call_ids(self) -> Script:
        first: dict[str, str] = {}
        for t, turn in enumerate(self.turns):
            for e, event in enumerate(turn.events):
                if isinstance(event, ToolCallEvent):
                    where = f"turns[{t}].events[{e}]"
                    if event.id in first:
                        raise ValueError(
                            f"@{where}.id: duplicate tool call id {event.id!r} (first at {first[event.id]})"
                        )
                    first[event.id] = where
        return self


_KNOWN_KEYS = {name for model in (Script, ScriptTurn, Expect, TextEvent, ToolCallEvent, UsageEvent)
               for name in model.model_fields}


def parse_script(data: Mapping[str, Any], source: str = "<script>") -> Script:
    """Validate an already-decoded script; raise :class:`ScriptFileError` with every problem's key path."""
    try:
        return Script.model_validate(data)
    except ValidationError as exc:
        raise ScriptFileError(problems_from(exc, data, known_keys=_KNOWN_KEYS,
                                             kinds=("text", "tool_call", "usage")), source) from None


def load_script(path: str | Path) -> Script:
    """Read a ``.toml`` or ``.json`` script file and validate it."""
    source = str(path)
    suffix = Path(path).suffix.lower()
    if suffix not in (".toml", ".json"):
        given = suffix or "no suffix"
        raise ScriptFileError([("", f"a script file ends in .toml or .json (given: {given!r})")], source)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_SCRIPT_BYTES + 1)
    except OSError as exc:
        raise ScriptFileError([("", f"cannot read script file: {exc.strerror}")], source) from None
    if len(raw) > MAX_SCRIPT_BYTES:
        raise ScriptFileError([("", f"script file is larger than {MAX_SCRIPT_BYTES} bytes")], source)
    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text) if suffix == ".toml" else json.loads(text)
    except UnicodeDecodeError as exc:
        raise ScriptFileError([("", f"not UTF-8 at byte {exc.start}")], source) from None
    except tomllib.TOMLDecodeError as exc:
        raise ScriptFileError([("", f"malformed TOML: {exc}")], source) from None
    except json.JSONDecodeError as exc:
        raise ScriptFileError([("", f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")],
                              source) from None
    if not isinstance(data, dict):
        raise ScriptFileError([("", f"the top level must be a table/object (given: {type(data).__name__})")], source)
    return parse_script(data, source)


def _to_event(event: TextEvent | ToolCallEvent | UsageEvent) -> ModelEvent:
    if isinstance(event, TextEvent):
        return TextDelta(text=event.text)
    if isinstance(event, ToolCallEvent):
        return ToolCall(id=event.id, name=event.name, arguments=event.arguments)
    return Usage(input_tokens=event.input_tokens, output_tokens=event.output_tokens)


def _last(messages: tuple[Message, ...], role: str) -> Message | None:
    return next((m for m in reversed(messages) if m.role == role), None)


def _short(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:77] + "...")


class ScriptedProvider:
    """Streams the recorded turn that answers a request (see the module docstring for which one)."""

    name = "scripted"

    def __init__(self, script: Script, source: str = "<embedded default>") -> None:
        self.script = script
        self.source = source
        self._events = [(tuple(_to_event(e) for e in turn.events), Finished(reason=turn.finish_reason))
                        for turn in script.turns]
        self._counted: tuple[tuple[Message, ...], int] = ((), 0)  # the last request's messages, and their count

    def _refuse(self, detail: str) -> ModelError:
        return ModelError(ModelErrorKind.SCRIPT, f"{self.source}: {detail}")

    def turn_index(self, request: ModelRequest) -> int:
        """The index of the turn that answers ``request``: how many assistant messages it already holds.

        A request holds the whole conversation, and counting it all cost ~45 ns a message on every model call of a
        long session; a turn's request holds the previous request's very messages (the same objects) plus the new
        ones, so only those are counted. The answer is still a function of the request alone: a request whose
        messages do not begin with the last one's (another session, a resumed or rebuilt conversation) is counted
        whole."""
        messages = request.messages
        known, count = self._counted
        if len(known) > len(messages) or not all(map(operator.is_, messages, known)):
            known, count = (), 0
        count += sum(1 for message in messages[len(known):] if message.role == "assistant")
        self._counted = (messages, count)
        return count

    def _check(self, index: int, request: ModelRequest) -> None:
        if index >= len(self.script.turns):
            raise self._refuse(f"the script has {len(self.script.turns)} turn(s) and the request asks for "
                               f"turn {index} (turns[{index}] does not exist): it was not recorded for this "
                               "conversation")
        expect = self.script.turns[index].expect
        if expect is None:
            return
        where = f"turns[{index}].expect"
        messages = request.messages
        if expect.last_role is not None:
            role = messages[-1].role if messages else "(none)"
            if role != expect.last_role:
                raise self._refuse(f"{where}.last_role: the request's last message is from {role!r}, "
                                   f"the turn was recorded after {expect.last_role!r}")
        for field, role in (("user_contains", "user"), ("tool_result_contains", "tool")):
            wanted = getattr(expect, field)
            if wanted is None:
                continue
            found = _last(messages, role)
            if found is None or wanted not in found.content:
                actual = "there is none" if found is None else f"it is {_short(found.content)}"
                raise self._refuse(f"{where}.{field}: the request's last {role} message does not contain "
                                   f"{wanted!r} ({actual})")

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        index = self.turn_index(request)
        self._check(index, request)
        events, finished = self._events[index]
        pace = self.script.turns[index].pace_ms / 1000.0
        for event in events:
            if pace:
                await trio.sleep(pace)
            else:
                await trio.lowlevel.checkpoint()
            yield event
        # Before the finish, a cancel already requested still ends the stream here; no task is let in first (each
        # was, at the checkpoint before the last event): a scheduler round per model call saved.
        await trio.lowlevel.checkpoint_if_cancelled()
        yield finished


# The embedded default: a short session that shows every step of the effect path — read a file, edit it, run a
# shell command, and finish. Argument names follow the tools' schemas (read/edit/shell).
DEFAULT_SCRIPT_DATA: dict[str, Any] = {
    "name": "default demo",
    "turns": [
        {"events": [
            {"kind": "text", "text": "Let me look at the notes first."},
            {"kind": "tool_call", "id": "call_demo_read", "name": "read", "arguments": {"path": "NOTES.md"}},
            {"kind": "usage", "input_tokens": 42, "output_tokens": 18},
        ]},
        {"expect": {"last_role": "tool"}, "events": [
            {"kind": "text", "text": "I'll mark the first task as done."},
            {"kind": "tool_call", "id": "call_demo_edit", "name": "edit",
             "arguments": {"path": "NOTES.md", "old": "- [ ] try the demo", "new": "- [x] try the demo"}},
            {"kind": "usage", "input_tokens": 96, "output_tokens": 31},
        ]},
        {"expect": {"last_role": "tool"}, "events": [
            {"kind": "text", "text": "Now let me check the result from the shell."},
            {"kind": "tool_call", "id": "call_demo_shell", "name": "shell",
             "arguments": {"command": "grep -c '\\[x\\]' NOTES.md"}},
            {"kind": "usage", "input_tokens": 140, "output_tokens": 22},
        ]},
        {"expect": {"last_role": "tool"}, "events": [
            {"kind": "text", "text": "Done: "},
            {"kind": "text", "text": "the first task in NOTES.md is checked off."},
            {"kind": "usage", "input_tokens": 170, "output_tokens": 14},
        ]},
    ],
}

DEFAULT_SCRIPT = parse_script(DEFAULT_SCRIPT_DATA, "<embedded default>")
