"""What works without bwrap: the explicit ``none`` mode, and refusing BWRAP when the probe failed."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from ouroactors.runtime.sandbox import NONE_BOUNDARY, SandboxMode, SandboxUnavailable, probe, run


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


def test_none_mode_runs_unsandboxed_and_says_so(tmp_path: Path, ws: Path) -> None:
    outside = tmp_path / "outside.txt"
    result = run(["sh", "-c", f"pwd; echo x > {outside}"], mode=SandboxMode.NONE, workspace=str(ws))
    assert result.returncode == 0 and result.stdout == f"{ws}\n".encode()
    assert outside.exists()  # nothing contained it
    assert result.boundary == NONE_BOUNDARY and "unsandboxed: explicit none mode" in result.boundary.notes
    assert result.argv == ("sh", "-c", f"pwd; echo x > {outside}")


def test_missing_bwrap_is_refused_not_run_unsandboxed(ws: Path) -> None:
    broken = probe("/nonexistent/bwrap")
    assert (broken.available, broken.failure_kind) == (False, "not_installed")
    assert "No such file or directory" in broken.detail
    with pytest.raises(SandboxUnavailable, match="not_installed") as info:
        run(["touch", "ran"], mode=SandboxMode.BWRAP, workspace=str(ws), probe=broken)
    assert info.value.kind == "not_installed" and not (ws / "ran").exists()


def _script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_uid_map_refusal_is_classified(tmp_path: Path, ws: Path) -> None:
    fake = _script(tmp_path / "bwrap", "echo 'bwrap: setting up uid map: Permission denied' >&2; exit 1\n")
    broken = probe(fake)
    assert (broken.available, broken.failure_kind) == (False, "uid_map_refused")
    assert broken.detail == "bwrap: setting up uid map: Permission denied"
    with pytest.raises(SandboxUnavailable, match="uid_map_refused"):
        run(["touch", "ran"], mode=SandboxMode.BWRAP, workspace=str(ws), probe=broken)
    assert not (ws / "ran").exists()


def test_none_mode_says_a_network_grant_is_not_enforced(ws: Path) -> None:
    from ouroactors.runtime.sandbox import NetworkPolicy

    result = run(["true"], mode=SandboxMode.NONE, workspace=str(ws), network=NetworkPolicy(("example.com",)))
    assert result.boundary.network_policy == "host (unsandboxed)" and result.network_refusals == ()
    assert "requested proxy(example.com) is NOT enforced unsandboxed: the host's network is reachable" in \
        result.boundary.notes
