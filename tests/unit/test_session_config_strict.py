"""A session's configuration is strictly typed, as a tree file is, and its bad values are said as what they are —
checked where ``session new`` runs, before any system is reached (none runs here): exit 2, the key path, the value.

The review found: ``turn_deadline_s = "10"`` and ``sandbox.network = "yes"`` accepted (coerced); ``nan`` refused as
"less than or equal to 604800"; ``max_tokens = 99999999999999999999`` refused by the request's encoder as ``bad request
NewSession.config … (got None)``; ``workspace = ""`` refused by the workspace authority's ``CheckRoot.root``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from ouroactors.cli import main
from ouroactors.runtime.execution.config import parse_session_config


def _refused(tmp_path: Path, text: str) -> str:
    config = tmp_path / "c.toml"
    config.write_text(text)
    result = CliRunner().invoke(main, ["session", "new", "x", "--config", str(config), "--data-dir",
                                       str(tmp_path / "D")])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "cannot reach a system" not in result.output and "Traceback" not in result.output
    assert not (tmp_path / "D").exists()  # nothing durable: no data dir made
    return result.output


@pytest.mark.parametrize(("text", "said"), [
    ('[limits]\nturn_deadline_s = "10"\n', "limits.turn_deadline_s: got '10'; Input should be a valid number (a "
                                           "string was given: write the value without quotes)"),
    ('[sandbox]\nnetwork = "yes"\n', "sandbox.network: got 'yes'; Input should be a valid boolean"),
    ('[limits]\nmax_turns = "3"\n', "limits.max_turns: got '3'; Input should be a valid integer"),
    ('[limits]\nmax_turns = 3.0\n', "limits.max_turns: got 3.0; Input should be a valid integer"),
    ('[limits]\nmax_tokens = true\n', "limits.max_tokens: got True; Input should be a valid integer"),
    ('[model]\nkind = "openai"\nbase_url = "http://127.0.0.1:1/v1"\nmodel = "m"\ntrust_env = 1\n',
     "model.trust_env: got 1; Input should be a valid boolean"),
    ('[limits]\nturn_deadline_s = nan\n', "limits.turn_deadline_s: got nan; NaN is not a number of seconds"),
    ('[limits]\ntool_deadline_s = inf\n', "limits.tool_deadline_s: got inf; an infinity is not a number of seconds"),
    ('[model]\nkind = "openai"\nbase_url = "http://127.0.0.1:1/v1"\nmodel = "m"\ntemperature = nan\n',
     "model.temperature: got nan; NaN is not a number"),
    ('[limits]\nmax_tokens = 99999999999999999999\n',
     "limits.max_tokens: got 99999999999999999999; Input should be less than or equal to 4611686018427387904"),
])
def test_a_wrong_type_or_value_is_refused_naming_its_key_and_value(tmp_path: Path, text: str, said: str) -> None:
    output = _refused(tmp_path, text)
    assert said in output, output
    assert "604800" not in output and "NewSession" not in output and "got None" not in output, output


def test_an_empty_workspace_names_the_option_and_the_key(tmp_path: Path) -> None:
    output = _refused(tmp_path, 'workspace = ""\n')
    assert "workspace: got ''" in output and "--workspace DIR" in output and 'workspace = "DIR"' in output, output
    assert "CheckRoot" not in output, output


def test_a_config_too_large_for_its_request_is_refused_here_naming_the_option(tmp_path: Path) -> None:
    output = _refused(tmp_path, f'system_prompt = "{"x" * 40_000}"\n')
    assert "Invalid value for --config: the session's configuration is" in output, output
    assert "over the limit" in output and "NewSession" not in output, output


def test_what_was_valid_stays_valid() -> None:
    """Strict, not narrower: an integer for seconds, a TOML array of tools, a table already parsed with a list or a
    tuple in it (a stored configuration read back)."""
    config = parse_session_config('[limits]\nturn_deadline_s = 10\n[tools]\nenabled = ["read", "shell"]\n'
                                  '[sandbox]\nnetwork = true\n')
    assert config.limits.turn_deadline_s == 10.0 and config.tools.enabled == ("read", "shell")
    assert config.sandbox.network is True
    for enabled in (["read"], ("read",)):
        assert parse_session_config({"tools": {"enabled": enabled}}).tools.enabled == ("read",)
    assert parse_session_config(config.model_dump(mode="python")) == config


def test_a_string_where_an_array_goes_is_said_as_toml_says_it(tmp_path: Path) -> None:
    output = _refused(tmp_path, '[tools]\nenabled = "read"\n')
    assert "tools.enabled: got 'read'; Input should be an array, such as [\"read\", \"list\"]" in output, output
    assert "without quotes" not in output and "tuple" not in output, output
