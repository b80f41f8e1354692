"""The tool contract: the registry, what the model sees, and bad calls refused with the field and the problem."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ouroactors.authorities.grants.rules import Effect
from ouroactors.authorities.ledger import fingerprint
from ouroactors.authorities.ledger.reconcilers import DEFAULT_RECONCILERS
from ouroactors.core.codec import Record, decode, digest_of, encode
from ouroactors.runtime.execution.model import ToolCall
from ouroactors.runtime.execution.tools import (
    TOOLS,
    ToolCallError,
    ToolContext,
    ToolError,
    ToolOutcome,
    parse_call,
    specs,
)
from ouroactors.runtime.execution.tools.base import cap_bytes

from .tools_support import call, context, lease


def test_registry_declares_every_tool() -> None:
    assert set(TOOLS) == {"read", "write", "edit", "list", "shell", "http"}
    effects = {name: tool.effect for name, tool in TOOLS.items()}
    assert effects == {"read": Effect.READ, "list": Effect.READ, "write": Effect.WRITE, "edit": Effect.WRITE,
                       "shell": Effect.EXECUTE, "http": Effect.NETWORK}
    assert TOOLS["http"].reconciler == "ouroactors.runtime.execution.tools.http:reconcile"
    assert TOOLS["shell"].reconciler is None  # what a command did cannot be found out: an operator settles it
    for name in ("write", "edit"):  # the ledger looks at the file (the digests the start recorded)
        assert (TOOLS[name].ledger_kind, TOOLS[name].reconciler) == ("file_write", DEFAULT_RECONCILERS["file_write"])
        assert "ledger compensate" in (TOOLS[name].compensation or "")  # and an operator can undo what they wrote
    assert all(TOOLS[n].compensation is None for n in ("read", "list", "shell", "http"))
    for name in ("read", "list"):  # changes nothing: the ledger settles them itself after a crash, by default
        assert (TOOLS[name].ledger_kind, TOOLS[name].reconciler) == ("read", DEFAULT_RECONCILERS["read"])
    for tool in TOOLS.values():  # every fingerprint field is a real argument
        assert set(tool.fingerprint_fields) <= set(tool.Args.model_fields), tool.name


def test_specs_are_the_argument_schemas() -> None:
    by_name = {s.name: s for s in specs()}
    assert by_name["edit"].parameters["required"] == ["path", "old", "new"]
    assert by_name["shell"].parameters["additionalProperties"] is False
    assert [s.name for s in specs(("shell", "read"))] == ["shell", "read"]


def test_a_spec_is_made_once_per_tool_and_each_caller_gets_its_own_copy() -> None:
    from ouroactors.runtime.execution.tools import base

    shell = TOOLS["shell"]
    assert shell.Args in base._SCHEMAS  # made at import: a runtime forked after it does not make it per open
    first, second = shell.spec(), shell.spec()
    assert first.parameters == second.parameters == shell.Args.model_json_schema()
    first.parameters["properties"].clear()  # a caller that changes its copy changes nobody else's
    assert shell.spec().parameters == shell.Args.model_json_schema()


def test_unknown_tool_is_named_with_the_known_ones() -> None:
    with pytest.raises(ToolCallError) as err:
        parse_call(ToolCall(id="c7", name="rm_rf", arguments={}))
    assert err.value.kind == "unknown_tool" and err.value.call_id == "c7"
    assert "'rm_rf'" in str(err.value) and "edit, http, list, read, shell, write" in str(err.value)


@pytest.mark.parametrize(("name", "arguments", "field", "problem"), [
    ("read", {}, "arguments.path", "Field required"),
    ("read", {"path": "a", "offset": -1}, "arguments.offset", "greater than or equal to 0"),
    ("read", {"path": "a", "colour": "red"}, "arguments.colour", "Extra inputs are not permitted"),
    ("edit", {"path": "a", "old": "", "new": "x"}, "arguments.old", "at least 1 character"),
    ("shell", {"command": ["ls"]}, "arguments.command", "valid string"),
    ("shell", {"command": "ls", "timeout_s": 0}, "arguments.timeout_s", "greater than 0"),
    ("http", {"url": "file:///etc/passwd"}, "arguments.url", "scheme must be http or https"),
    ("http", {"url": "http://u:p@example.com/"}, "arguments.url", "credentials"),
    ("http", {"url": "http://example.com/", "method": "TRACE"}, "arguments.method", "Input should be"),
    ("http", {"url": "http://example.com/", "headers": {"Idempotency-Key": "mine"}}, "arguments.headers",
     "set by the tool"),
    ("http", {"url": "http://example.com/", "headers": {"X": "a\r\nInjected: 1"}}, "arguments.headers",
     "not a valid header"),
])
def test_bad_arguments_name_the_field_and_the_problem(name: str, arguments: dict[str, object], field: str,
                                                      problem: str) -> None:
    with pytest.raises(ToolCallError) as err:
        parse_call(ToolCall(id="c1", name=name, arguments=arguments))
    assert err.value.kind == "bad_arguments" and err.value.tool == name
    fields = [where for where, _ in err.value.problems]
    assert field in fields, err.value.problems
    assert problem in str(err.value)


def test_a_call_error_survives_pickling() -> None:  # it may cross a process boundary as an answer
    with pytest.raises(ToolCallError) as err:
        parse_call(ToolCall(id="c1", name="read", arguments={"path": 3}))
    again = pickle.loads(pickle.dumps(err.value))
    assert isinstance(again, ToolCallError) and str(again) == str(err.value) and again.problems == err.value.problems


def test_fingerprint_covers_the_declared_fields_only() -> None:
    tool, args = parse_call(ToolCall(id="c1", name="http", arguments={"url": "http://h/x", "method": "POST"}))
    fp = tool.fingerprint_args(args)
    assert fp == {"tool": "http", "method": "POST", "url": "http://h/x", "headers": {}, "body": None,
                  "json_body": None}
    _, same = parse_call(ToolCall(id="c2", name="http", arguments={"method": "POST", "url": "http://h/x"}))
    assert fingerprint(tool.ledger_kind, tool.fingerprint_args(same)) == fingerprint(tool.ledger_kind, fp)


def test_context_refuses_a_root_that_is_not_canonical(tmp_path: Path) -> None:
    root, _ = lease(tmp_path)
    (tmp_path / "alias").symlink_to(root)
    for bad in ("relative", "/", f"{root}/../lease", str(tmp_path / "alias")):
        with pytest.raises(ValueError, match="root"):
            context(bad)
    with pytest.raises(ValueError, match="output_cap_bytes"):
        context(root, output_cap_bytes=0)


def test_idempotency_key_comes_from_the_ledger_start(tmp_path: Path) -> None:
    root, _ = lease(tmp_path)
    assert context(root, idempotency_key="k", effect_id="e").key() == "k"
    assert context(root, effect_id="e").key() == "e"
    assert context(root).key() == "s1/call-1"
    with pytest.raises(ToolError, match="no idempotency key"):
        ToolContext(session_id="s", root=root).key()


@given(st.text(), st.integers(min_value=1, max_value=64))
def test_cap_never_splits_a_character(text: str, cap: int) -> None:
    data = text.encode()
    out, cut = cap_bytes(data, cap)
    assert cut == (len(data) > cap)
    assert len(out.encode()) <= max(cap, 0) or not cut
    assert data.startswith(out.encode())
    if cut:
        assert len(out.encode()) > cap - 4  # at most one character (≤ 4 bytes) dropped at the edge


def test_refusals_become_journal_able_outcomes(tmp_path: Path) -> None:
    with pytest.raises(ToolCallError) as err:
        parse_call(ToolCall(id="c1", name="read", arguments={"path": 3, "extra": 1}))
    out = err.value.outcome()
    assert out.status == "failed" and out.error_kind == "bad_arguments" and out.evidence["ran"] is False
    assert [p[0] for p in out.evidence["problems"]] == ["arguments.path", "arguments.extra"]
    assert digest_of(out.model_dump(mode="json"))  # canonical bytes exist: the journal can hash it


def test_an_outcome_round_trips_through_canonical_bytes(tmp_path: Path) -> None:
    root, _ = lease(tmp_path)
    out = call("shell", context(root), command="echo hi")
    dumped = out.model_dump(mode="json")
    again = ToolOutcome.model_validate(dumped)
    assert again == out and digest_of(again.model_dump(mode="json")) == digest_of(dumped)
    assert decode(encode(_Wrapped(outcome=dumped)), _Wrapped).outcome == dumped


class _Wrapped(Record):
    SCHEMA: ClassVar[str] = "test.tool_outcome"
    VERSION: ClassVar[int] = 1
    outcome: dict[str, Any]
