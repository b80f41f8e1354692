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


@needs_bwrap
def test_check_lists_the_view_without_secrets() -> None:
    result = CliRunner().invoke(main, ["sandbox", "check", "--view"])
    assert result.exit_code == 0, result.output
    views = [line for line in result.output.splitlines() if line.startswith("view: ")]
    assert "view: /usr" in views and "view: /etc/passwd" in views
    assert not any(v in ("view: /", "view: /etc", "view: /etc/shadow", "view: /home", "view: /run") for v in views)
    assert "own network namespace always" in result.output


def test_net_check_names_the_reason() -> None:
    runner = CliRunner()
    refused = runner.invoke(main, ["sandbox", "net-check", "127.0.0.1:8080"])
    assert refused.exit_code == 1
    assert "refused: 127.0.0.1 resolves to 127.0.0.1 (loopback); no private rule names it" in refused.output
    allowed = runner.invoke(main, ["sandbox", "net-check", "127.0.0.1:8080", "--domain", "127.0.0.1",
                                   "--private", "127.0.0.1/32"])
    assert allowed.exit_code == 0 and "allowed: 127.0.0.1 allowed by domain rule '127.0.0.1'" in allowed.output
    outside = runner.invoke(main, ["sandbox", "net-check", "evil.test", "--domain", "*.example.com"])
    assert outside.exit_code == 1 and "not resolved" in outside.output  # never resolved: not granted
    bad = runner.invoke(main, ["sandbox", "net-check", "x.com", "--domain", "bad pattern"])
    assert bad.exit_code == 2 and "bad domain pattern" in bad.output
