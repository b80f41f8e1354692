"""The ``scripted`` provider and the provider configuration: determinism, refusals, key-path errors, cancellation."""

from __future__ import annotations

import json
import re
import time
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from ouroactors.runtime.execution.model import (
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
from ouroactors.runtime.execution.providers import (
    DEFAULT_SCRIPT,
    OpenAIConfig,
    ProviderConfigError,
    ScriptedConfig,
    ScriptedProvider,
    ScriptFileError,
    load_script,
    make_provider,
    parse_provider_config,
    parse_script,
)

SCRIPTS = Path(__file__).resolve().parents[1] / "data" / "scripts"


def request(*messages: Message) -> ModelRequest:
    return ModelRequest(model="scripted", messages=messages)


def user(text: str) -> Message:
    return Message(role="user", content=text)


def answered(events: list[ModelEvent]) -> Message:
    """The assistant message a loop would append for a turn's events."""
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    return Message(role="assistant", content=text, tool_calls=tuple(e for e in events if isinstance(e, ToolCall)))


def tool(call_id: str, content: str) -> Message:
    return Message(role="tool", tool_call_id=call_id, content=content)


def collect(provider: Any, req: ModelRequest) -> list[ModelEvent]:
    async def main() -> list[ModelEvent]:
        async with aclosing(provider.stream(req)) as stream:
            return [event async for event in stream]

    return trio.run(main)


def problems_of(error: ScriptFileError | ProviderConfigError) -> dict[str, str]:
    return dict(error.problems)


# -- streaming -------------------------------------------------------------------------------------------------------


def test_a_recorded_session_plays_back_turn_by_turn() -> None:
    provider = ScriptedProvider(load_script(SCRIPTS / "read_edit.toml"))
    first = collect(provider, request(user("tidy my notes")))
    assert first == [TextDelta(text="Reading "), TextDelta(text="the notes."),
                     ToolCall(id="call_read_1", name="read", arguments={"path": "notes.txt"}),
                     Usage(input_tokens=30, output_tokens=12), Finished(reason="tool_calls")]
    conversation = (user("tidy my notes"), answered(first), tool("call_read_1", "- [ ] try the demo"))
    second = collect(provider, request(*conversation))
    assert [e.id for e in second if isinstance(e, ToolCall)] == ["call_edit_1", "call_list_1"]
    assert second[-1] == Finished(reason="tool_calls")
    conversation += (answered(second), tool("call_edit_1", "ok"), tool("call_list_1", "notes.txt"))
    assert collect(provider, request(*conversation))[-1] == Finished(reason="stop")


def test_same_request_same_events_from_any_instance_in_any_order() -> None:
    """Determinism, and no hidden state: the turn is chosen by the request, so sessions can share a provider."""
    script = load_script(SCRIPTS / "read_edit.toml")
    shared = ScriptedProvider(script)
    one = request(user("my notes"))
    two = request(user("my notes"), answered(collect(shared, one)), tool("call_read_1", "- [ ] a"))
    runs = [collect(shared, two), collect(shared, one), collect(ScriptedProvider(script), two), collect(shared, one)]
    assert runs[0] == runs[2] and runs[1] == runs[3] and runs[0] != runs[1]


def test_past_the_last_turn_is_a_script_error() -> None:
    provider = ScriptedProvider(parse_script({"turns": [{"events": [{"kind": "text", "text": "only"}]}]}), "one.toml")
    conversation = (user("a"), Message(role="assistant", content="only"), user("again"))
    with pytest.raises(ModelError) as caught:
        collect(provider, request(*conversation))
    assert caught.value.kind is ModelErrorKind.SCRIPT
    assert "one.toml: the script has 1 turn(s)" in caught.value.detail and "turns[1]" in caught.value.detail


@pytest.mark.parametrize(("messages", "where"), [
    ((user("hello"),), "turns[0].expect.user_contains: the request's last user message does not contain 'notes'"),
    ((tool("x", "notes"),), "turns[0].expect.last_role: the request's last message is from 'tool'"),
])
def test_expect_refuses_a_request_the_turn_was_not_recorded_for(messages: tuple[Message, ...], where: str) -> None:
    provider = ScriptedProvider(load_script(SCRIPTS / "read_edit.toml"), "read_edit.toml")
    with pytest.raises(ModelError) as caught:
        collect(provider, request(*messages))
    assert caught.value.kind is ModelErrorKind.SCRIPT and where in caught.value.detail, caught.value.detail


def test_expect_on_the_tool_result() -> None:
    provider = ScriptedProvider(load_script(SCRIPTS / "read_edit.toml"))
    first = collect(provider, request(user("notes")))
    with pytest.raises(ModelError, match=r"turns\[1\]\.expect\.tool_result_contains.*it is 'all done'"):
        collect(provider, request(user("notes"), answered(first), tool("call_read_1", "all done")))


def test_the_embedded_default_is_a_whole_demo_session() -> None:
    provider = make_provider({"kind": "scripted"})
    conversation: tuple[Message, ...] = (user("show me what you can do"),)
    names = []
    while True:
        events = collect(provider, request(*conversation))
        calls = [e for e in events if isinstance(e, ToolCall)]
        names += [c.name for c in calls]
        conversation += (answered(events), *(tool(c.id, "ok") for c in calls))
        if events[-1] == Finished(reason="stop"):
            break
    assert names == ["read", "edit", "shell"] and len(DEFAULT_SCRIPT.turns) == 4


def test_cancellation_between_events() -> None:
    """A paced turn (200 ms per event) cancelled after 50 ms stops at once, having yielded nothing."""
    provider = ScriptedProvider(load_script(SCRIPTS / "pace.json"))
    seen: list[ModelEvent] = []

    async def main() -> None:
        with trio.move_on_after(0.05):
            async with aclosing(provider.stream(request(user("go")))) as stream:
                async for event in stream:
                    seen.append(event)

    started = time.monotonic()
    trio.run(main)
    assert seen == [] and time.monotonic() - started < 0.15


def test_an_unpaced_turn_still_checkpoints_so_a_cancel_lands_between_events() -> None:
    script = parse_script({"turns": [{"events": [{"kind": "text", "text": str(i)} for i in range(50)]}]})
    provider = ScriptedProvider(script)
    seen: list[ModelEvent] = []

    async def main() -> None:
        with trio.CancelScope() as scope:
            async with aclosing(provider.stream(request(user("go")))) as stream:
                async for event in stream:
                    seen.append(event)
                    if len(seen) == 3:
                        scope.cancel()

    trio.run(main)
    assert seen == [TextDelta(text="0"), TextDelta(text="1"), TextDelta(text="2")]


def test_a_cancel_after_the_last_event_lands_before_the_finish() -> None:
    script = parse_script({"turns": [{"events": [{"kind": "text", "text": "only"}]}]})
    seen: list[ModelEvent] = []

    async def main() -> None:
        with trio.CancelScope() as scope:
            async with aclosing(ScriptedProvider(script).stream(request(user("go")))) as stream:
                async for event in stream:
                    seen.append(event)
                    scope.cancel()

    trio.run(main)
    assert seen == [TextDelta(text="only")]  # no Finished: the turn was cut, not completed


# -- script file errors ----------------------------------------------------------------------------------------------


def test_every_problem_of_a_bad_file_is_named_by_key_path_with_value_and_allowed_values() -> None:
    with pytest.raises(ScriptFileError) as caught:
        load_script(SCRIPTS / "bad_events.toml")
    problems = problems_of(caught.value)
    assert problems == {
        "turns[0].events[0].text": "Input should be a valid string (given: 5)",
        "turns[1].events[0].kind": "unknown kind 'tool'; allowed: 'text', 'tool_call', 'usage'",
        "turns[1].finish": "must be one of 'stop', 'tool_calls', 'length' or 'content_filter' (given: 'done')",
        "turns[2].events[0].name": "Input should be a valid string (given: ['read'])",
        "turns[2].events[0].argumnets": "unknown key 'argumnets' (did you mean 'arguments'?)",
    }
    assert str(caught.value).startswith("invalid scripted model file:\n  ")
    assert f"{SCRIPTS / 'bad_events.toml'}: turns[1].finish:" in str(caught.value)


@pytest.mark.parametrize(("data", "loc", "fragment"), [
    ({}, "turns", "is required"),
    ({"turns": []}, "turns", "at least 1 item"),
    ({"turns": [{"events": []}]}, "turns[0].events", "at least 1 item"),
    ({"turns": [{"events": [{"text": "x"}]}]}, "turns[0].events[0].kind", "is required; allowed: 'text'"),
    ({"turns": [{"events": [{"kind": "usage", "input_tokens": "5"}]}]}, "turns[0].events[0].input_tokens",
     "(given: '5')"),
    ({"turns": [{"events": [{"kind": "usage", "output_tokens": -1}]}]}, "turns[0].events[0].output_tokens",
     "greater than or equal to 0 (given: -1)"),
    ({"turns": [{"events": [{"kind": "tool_call", "id": "", "name": "read"}]}]}, "turns[0].events[0].id",
     "at least 1 character"),
    ({"turns": [{"events": [{"kind": "tool_call", "id": "a", "name": "rm -rf"}]}]}, "turns[0].events[0].name",
     "should match pattern"),
    ({"turns": [{"events": [{"kind": "text", "text": "x"}], "finish": "tool_calls"}]}, "turns[0].finish",
     "'tool_calls' needs at least one event of kind 'tool_call'"),
    ({"turns": [{"events": [{"kind": "tool_call", "id": "a", "name": "r"}], "finish": "stop"}]}, "turns[0].finish",
     "a turn that calls tools finishes with 'tool_calls' (given: 'stop')"),
    ({"turns": [{"events": [{"kind": "tool_call", "id": "a", "name": "r"}]},
                {"events": [{"kind": "text", "text": "x"}, {"kind": "tool_call", "id": "a", "name": "r"}]}]},
     "turns[1].events[1].id", "duplicate tool call id 'a' (first at turns[0].events[0])"),
    ({"turns": [{"expect": {"last_role": "assistant"}, "events": [{"kind": "text", "text": "x"}]}]},
     "turns[0].expect.last_role", "must be one of 'user' or 'tool' (given: 'assistant')"),
    ({"turns": [{"pace_ms": 10**6, "events": [{"kind": "text", "text": "x"}]}]}, "turns[0].pace_ms",
     "less than or equal to 60000"),
    ({"turns": [{"events": [{"kind": "text", "text": "x"}]}], "nmae": "x"}, "nmae", "did you mean 'name'?"),
])
def test_validation_error_key_paths(data: dict[str, Any], loc: str, fragment: str) -> None:
    with pytest.raises(ScriptFileError) as caught:
        parse_script(data, "s.json")
    problems = problems_of(caught.value)
    assert loc in problems and fragment in problems[loc], problems


@pytest.mark.parametrize(("name", "content", "message"), [
    ("s.toml", "turns = [", "malformed TOML"),
    ("s.json", '{"turns": [}', "malformed JSON: Expecting value at line 1 column 12"),
    ("s.json", "[1]", "the top level must be a table/object (given: list)"),
    ("s.yaml", "turns: []", "ends in .toml or .json (given: '.yaml')"),
    ("s.json", b"\xff\xfe", "not UTF-8 at byte 0"),
])
def test_unreadable_files(tmp_path: Path, name: str, content: str | bytes, message: str) -> None:
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ScriptFileError, match=re.escape(message)):
        load_script(path)


def test_a_missing_file() -> None:
    with pytest.raises(ScriptFileError, match="cannot read script file: No such file"):
        load_script(SCRIPTS / "does-not-exist.toml")


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                        st.sampled_from(["turns", "events", "kind", "text", "id", "name", "finish", "x"]), inner,
                        max_size=4), max_leaves=12))
def test_any_json_either_loads_or_is_a_script_file_error(data: Any) -> None:
    """Garbage never escapes as a pydantic or Python error: it is a ScriptFileError or a valid script."""
    try:
        parse_script(data if isinstance(data, dict) else {"turns": data}, "fuzz.json")
    except ScriptFileError as exc:
        assert exc.problems and all(isinstance(loc, str) and msg for loc, msg in exc.problems)


def test_json_and_toml_scripts_load_the_same(tmp_path: Path) -> None:
    script = load_script(SCRIPTS / "read_edit.toml")
    path = tmp_path / "same.json"
    path.write_text(json.dumps(script.model_dump(exclude_defaults=True)))
    assert load_script(path) == script


# -- provider configuration ------------------------------------------------------------------------------------------


def test_provider_config_is_a_union_on_kind() -> None:
    assert isinstance(parse_provider_config({"kind": "scripted"}), ScriptedConfig)
    config = parse_provider_config({"kind": "openai", "base_url": "http://127.0.0.1:8080/v1/", "model": "m",
                                    "api_key_env": "MY_KEY"})
    assert isinstance(config, OpenAIConfig) and config.url == "http://127.0.0.1:8080/v1/chat/completions"


@pytest.mark.parametrize(("data", "loc", "fragment"), [
    ({"kind": "claude"}, "model.kind", "unknown kind 'claude'; allowed: 'scripted', 'openai'"),
    ({}, "model.kind", "is required"),
    ({"kind": "openai", "model": "m"}, "model.base_url", "is required"),
    ({"kind": "openai", "model": "m", "base_url": "ftp://x"}, "model.base_url", "http:// or https://"),
    ({"kind": "openai", "model": "m", "base_url": "http://u:p@h/v1"}, "model.base_url", "must not carry credentials"),
    ({"kind": "openai", "model": "m", "base_url": "http://h/v1", "max_attempts": 0}, "model.max_attempts",
     "greater than or equal to 1 (given: 0)"),
    ({"kind": "openai", "model": "m", "base_url": "http://h/v1", "stall_timeout": 3}, "model.stall_timeout",
     "did you mean 'stall_timeout_s'?"),
    ({"kind": "scripted", "script": 3}, "model.script", "(given: 3)"),
])
def test_provider_config_errors(data: dict[str, Any], loc: str, fragment: str) -> None:
    with pytest.raises(ProviderConfigError) as caught:
        parse_provider_config(data, source="session.toml")
    problems = problems_of(caught.value)
    assert loc in problems and fragment in problems[loc], problems


def test_a_key_put_where_its_variable_name_belongs_is_refused_and_not_echoed() -> None:
    secret = "sk-proj-abcdef0123456789"
    with pytest.raises(ProviderConfigError) as caught:
        parse_provider_config({"kind": "openai", "base_url": "http://h/v1", "model": "m", "api_key_env": secret})
    assert "model.api_key_env" in problems_of(caught.value)
    assert "NAME of an environment variable" in str(caught.value)
    assert secret not in str(caught.value) and secret not in repr(caught.value.problems)


def test_make_provider_resolves_a_relative_script_and_reports_bad_ones(tmp_path: Path) -> None:
    provider = make_provider({"kind": "scripted", "script": "read_edit.toml"}, base_dir=SCRIPTS)
    assert isinstance(provider, ScriptedProvider) and provider.script.name == "read and edit"
    with pytest.raises(ScriptFileError, match=r"turns\[1\]\.finish"):
        make_provider(ScriptedConfig(kind="scripted", script=str(SCRIPTS / "bad_events.toml")))


def _plain_count(messages: tuple[Message, ...]) -> int:
    return sum(1 for m in messages if m.role == "assistant")


@given(steps=st.lists(st.tuples(st.sampled_from(["grow", "again", "shrink", "copy", "other"]),
                                st.lists(st.sampled_from(["user", "assistant", "tool"]), max_size=4)), max_size=25))
def test_the_turn_index_is_the_requests_own_count_whatever_came_before(steps: list[tuple[str, list[str]]]) -> None:
    """One provider asked in any order — a conversation growing (the same message objects plus new ones), asked
    again, cut back, rebuilt from equal but new objects, or another conversation — answers each request by its
    own assistant messages, as if it had never seen another."""
    provider = ScriptedProvider(DEFAULT_SCRIPT)
    messages: tuple[Message, ...] = ()
    for how, roles in steps:
        new = tuple(Message(role=r, content=f"{len(messages)}") for r in roles)  # type: ignore[arg-type]
        if how == "grow":
            messages = (*messages, *new)
        elif how == "shrink":
            messages = messages[: len(messages) // 2]
        elif how == "copy":
            messages = tuple(m.model_copy() for m in messages)
        elif how == "other":
            messages = new
        request = ModelRequest(model="m", messages=messages)
        assert provider.turn_index(request) == _plain_count(messages)
