"""Numeric options hold their bounds at the parser, NaN included (click's ranges let NaN through: it compares false
with any bound), before any system is reached: no system runs in these tests, so a refusal is exit 2 naming the
option, never a connection error."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from ouroactors.cli import main


@pytest.mark.parametrize(("args", "option", "words"), [
    (["stop", "--timeout", "nan"], "--timeout", "nan is not a number of seconds"),
    (["stop", "--timeout", "-5"], "--timeout", "not in the range"),
    (["stop", "--timeout", "0"], "--timeout", "not in the range"),
    (["stop", "--timeout", "inf"], "--timeout", "not in the range"),
    (["session", "events", "s1", "--follow", "--idle", "nan"], "--idle", "nan is not a number of seconds"),
    (["session", "events", "s1", "--follow", "--idle", "-1"], "--idle", "not in the range"),
    (["journal", "show", "s1", "--from", "-1"], "--from", "not in the range"),
    (["run", "tree.toml", "--metrics-port", "70000"], "--metrics-port", "not in the range"),
])
def test_a_number_out_of_bounds_is_a_usage_error_naming_the_option(tmp_path: Any, args: list[str], option: str,
                                                                    words: str) -> None:
    result = CliRunner().invoke(main, [*args, "--data-dir", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{option}'" in result.output and words in result.output, result.output

