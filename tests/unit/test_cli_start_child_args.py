"""``ouroactors start-child PATH ARGS…``: each argument is the JSON value it spells, or a plain word as a string; one
that begins as JSON and does not parse is a usage error naming it, before any system is reached (no system runs
in these tests: a refusal here is exit 2 from the parser, never a connection error)."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from ouroactors.cli import main
from ouroactors.cli.control import _literal


@pytest.mark.parametrize(("text", "value"), [
    ("7", 7), ("1.5", 1.5), ("true", True), ("null", None), ('"7"', "7"), ("[1, 2]", [1, 2]),
    ('{"k": 1}', {"k": 1}), ("hello", "hello"), ("1.2.3", "1.2.3"), ("", ""), ("- a", "- a"),
])
def test_an_argument_is_the_value_it_spells(text: str, value: Any) -> None:
    assert _literal(text) == value


@pytest.mark.parametrize(("args", "which"), [
    (['{"a":'], "argument 1"),  # the brace's other half lost to the shell
    (["5", "[1, 2"], "argument 2"),
    (["ok", '"unterminated'], "argument 2"),
    ([' {"k": }'], "argument 1"),
])
def test_an_argument_that_begins_as_json_and_is_not_is_refused(tmp_path: Any, args: list[str], which: str) -> None:
    result = CliRunner().invoke(main, ["start-child", "--data-dir", str(tmp_path), "app/pool", *args])
    assert result.exit_code == 2, result.output
    assert f"Invalid value for 'ARGS' ({which})" in result.output and "begins as JSON but is not JSON" in result.output
    assert "cannot reach a system" not in result.output  # refused by the parser, not by a failed connection


@pytest.mark.parametrize(("text", "why"), [
    ("NaN", "is not a JSON value"), ("-Infinity", "is not a JSON value"), ("[1, NaN]", "is not a JSON value"),
    ("1e999", "is not a finite number"), ('{"k": 1e400}', "is not a finite number"),
    ("9" * 5000, "begins as JSON but is not JSON"),  # over the digit limit: was passed on as a string of digits
    ("[" * 5000 + "]" * 5000, "nests too deep to decode"),  # was an uncaught RecursionError (exit 1)
])
@pytest.mark.parametrize("command", [["start-child", "app/pool"], ["ask", "app/w"], ["tell", "app/w"]])
def test_what_json_has_no_value_for_is_refused_before_any_system_is_reached(tmp_path: Any, command: list[str],
                                                                            text: str, why: str) -> None:
    name, path = command  # ("--": "-Infinity" is a value, not an option)
    result = CliRunner().invoke(main, [name, "--data-dir", str(tmp_path), "--", path, text])
    assert result.exit_code == 2, result.output
    assert why in result.output and "cannot reach a system" not in result.output
    assert len(result.output) < 2000  # the value is named cut short, not echoed whole
