"""``ouroactors sandbox check``."""

from __future__ import annotations

from click.testing import CliRunner

import ouroactors.cli.sandbox  # noqa: F401  (registers the group on ``main``)
from ouroactors.cli import main

from .helpers import needs_bwrap


@needs_bwrap
def test_check_reports_an_available_sandbox() -> None:
    result = CliRunner().invoke(main, ["sandbox", "check"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("bwrap: available (bubblewrap ")
    assert "--cap-drop ALL" in result.output and "no seccomp filter" in result.output


def test_check_fails_for_a_missing_binary() -> None:
    result = CliRunner().invoke(main, ["sandbox", "check", "--bwrap", "/nonexistent/bwrap"])
    assert result.exit_code == 1
    assert "UNAVAILABLE — not_installed" in result.output and "apt-get install bubblewrap" in result.output
