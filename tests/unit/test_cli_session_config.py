"""``session new --config FILE``: the session's table is checked where the command runs, before any system is
reached (no system runs in this test): a bad one is refused naming each key, not with "cannot reach a system"."""

from __future__ import annotations

from typing import Any

from click.testing import CliRunner

from ouroactors.cli import main


def test_a_session_config_is_checked_before_any_system_is_reached(tmp_path: Any) -> None:
    bad = tmp_path / "session.toml"
    bad.write_text('[modle]\nkind = "scripted"\n[limits]\nmax_turns = "a lot"\n')
    result = CliRunner().invoke(main, ["session", "new", "s1", "--config", str(bad), "--data-dir", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert "modle: unknown key 'modle' (did you mean 'model'?)" in result.output
    assert "limits.max_turns: got 'a lot'" in result.output and "cannot reach a system" not in result.output
