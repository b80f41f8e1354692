"""The probe proves isolation, not an exit status: a binary that runs its command without unsharing anything (or
runs nothing and exits 0, ``--bwrap /bin/true``) is not a working bubblewrap."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

import ouroactors.cli.sandbox  # noqa: F401  (registers the group on ``main``)
from ouroactors.cli import main
from ouroactors.runtime.sandbox import (
    PROBED_NAMESPACES,
    SandboxMode,
    SandboxUnavailable,
    isolation_failure,
    probe,
    run,
)

from .helpers import needs_bwrap

HOST = {name: f"{name}:[40265318{i}]" for i, name in enumerate(PROBED_NAMESPACES)}
ISOLATED = "2\n" + "\n".join(f"{name}:[50000000{i}]" for i, name in enumerate(PROBED_NAMESPACES)) + "\n"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    made = tmp_path / "ws"
    made.mkdir()
    return made


def _fake(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def _passthrough(tmp_path: Path) -> str:
    """A "bwrap" that skips its options and execs the command: it exits as the command does, isolating nothing."""
    return _fake(tmp_path / "bwrap", 'while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do shift; done\nshift\nexec "$@"\n')


def test_a_wrapper_that_just_runs_the_command_is_not_isolating(tmp_path: Path, ws: Path) -> None:
    found = probe(_passthrough(tmp_path))
    assert (found.available, found.failure_kind) == (False, "not_isolating"), found
    assert "host's pid, mnt, net, ipc, uts namespace(s)" in (found.failure or "")
    with pytest.raises(SandboxUnavailable, match="not_isolating"):
        run(["touch", "ran"], mode=SandboxMode.BWRAP, workspace=str(ws), probe=found)
    assert not (ws / "ran").exists()


def test_check_refuses_bin_true(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["sandbox", "check", "--bwrap", "/bin/true"])
    assert result.exit_code == 1, result.output
    assert "UNAVAILABLE — not_isolating" in result.output and "reported no namespaces" in result.output
    passthrough = CliRunner().invoke(main, ["sandbox", "check", "--bwrap", _passthrough(tmp_path)])
    assert passthrough.exit_code == 1 and "not_isolating" in passthrough.output, passthrough.output


@needs_bwrap
def test_the_real_bwrap_proves_isolation() -> None:
    found = probe()
    assert found.available and found.failure_kind is None, found
    result = CliRunner().invoke(main, ["sandbox", "check"])
    assert result.exit_code == 0 and result.output.startswith("bwrap: available"), result.output


@pytest.mark.parametrize(("stdout", "says"), [
    ("", "reported no namespaces"),
    ("2\npid:[1]\n", "reported no namespaces"),
    ("4242\n" + "\n".join(HOST.values()) + "\n", "host's pid, mnt, net, ipc, uts"),
    (ISOLATED.replace("net:[500000002]", HOST["net"]), "host's net namespace"),
    ("4242\n" + ISOLATED.split("\n", 1)[1], "pid in its pid namespace was 4242"),
    (ISOLATED.replace("uts:[500000004]", "garbage"), "host's uts namespace"),
])
def test_isolation_is_judged_from_the_probes_output(stdout: str, says: str) -> None:
    assert says in (isolation_failure(stdout, HOST) or "")


def test_an_isolated_probe_passes() -> None:
    assert isolation_failure(ISOLATED, HOST) is None
    assert isolation_failure(ISOLATED.replace("2\n", "1\n", 1), HOST) is None
