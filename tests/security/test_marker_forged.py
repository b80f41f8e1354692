"""``ouroactors stop`` signals only processes that belong to the system the marker names.

The attack: a ``system.json`` naming an unrelated process (its pid, its real start time, its own
process group) made ``stop`` SIGTERM it as the "owner", or SIGKILL its whole process group as the
"admin's". Now the marker's processes are checked first (our uid, the recorded process group, the
data dir's ``admin.out`` held open by the admin); a marker that does not match is refused, the
process survives, and the refusal names what did not match.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from ouroactors import ActorSystem
from ouroactors.system.marker import (
    Marker,
    MarkerMismatch,
    process_start_ticks,
    read_marker,
    verify_owner,
    verify_processes,
    write_marker,
)
from tests.e2e.cli_helpers import cli


def _spawn_sleeper(*prefix: str) -> subprocess.Popen[bytes]:
    """An unrelated process in a process group of its own (like a user's long-running job)."""
    proc = subprocess.Popen([*prefix, "sleep", "300"], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while process_start_ticks(proc.pid) is None or Path(f"/proc/{proc.pid}/comm").read_text().strip() != "sleep":
        assert time.monotonic() < deadline, "the sleeper did not start"
        time.sleep(0.01)  # polling for another process to exec, bounded
    return proc


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = _spawn_sleeper()
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=10)


def _forge(data_dir: Path, pid: int, *, detached: bool, base: str = "multiproc") -> Marker:
    data_dir.mkdir(mode=0o700, exist_ok=True)
    (data_dir / "admin.out").touch()  # even the files a real system leaves: the process must hold them
    (data_dir / "events.jsonl").touch()
    marker = Marker(
        base=base, admin_port=1, admin_pid=pid, admin_pgid=os.getpgid(pid),
        admin_start_ticks=process_start_ticks(pid), owner_pid=pid, detached=detached, bind_host="127.0.0.1",
        node_epoch=1, started_ns=time.time_ns(), origin_ns=0,
    )
    write_marker(data_dir, marker)
    return marker


@pytest.mark.parametrize("detached", [False, True], ids=["foreground-owner", "detached-admin-group"])
def test_stop_refuses_a_forged_marker_and_the_unrelated_process_survives(
        tmp_path: Path, sleeper: subprocess.Popen[bytes], detached: bool) -> None:
    data_dir = tmp_path / "data"
    _forge(data_dir, sleeper.pid, detached=detached)
    result = cli("stop", "--data-dir", str(data_dir), "--timeout", "5", cwd=tmp_path)
    assert result.returncode != 0
    assert "MarkerMismatch" in result.stderr and "admin.out" in result.stderr, result.stderr
    assert sleeper.poll() is None and process_start_ticks(sleeper.pid) is not None  # untouched


def test_a_forged_in_process_marker_is_refused(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    data_dir = tmp_path / "data"
    _forge(data_dir, sleeper.pid, detached=False, base="simple")
    result = cli("stop", "--data-dir", str(data_dir), "--timeout", "5", cwd=tmp_path)
    assert result.returncode != 0 and "events.jsonl" in result.stderr, result.stderr
    assert sleeper.poll() is None


def test_a_marker_naming_another_users_process_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to start a process as another user")
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no 'nobody' user on this machine")
    proc = _spawn_sleeper("setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups")
    try:
        marker = _forge(tmp_path / "data", proc.pid, detached=True)
        with pytest.raises(MarkerMismatch, match=f"runs as uid {nobody.pw_uid}"):
            verify_processes(tmp_path / "data", marker)
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait(timeout=10)


@pytest.mark.multiproc
def test_the_real_system_is_verified_and_a_marker_pointing_elsewhere_is_not(
        actor_system: ActorSystem, sleeper: subprocess.Popen[bytes]) -> None:
    found = read_marker(actor_system.data_dir)
    assert found is not None
    verify_processes(actor_system.data_dir, found)  # the genuine admin passes
    verify_owner(actor_system.data_dir, found)  # so does its creator (this process)
    elsewhere = replace(found, admin_pid=sleeper.pid, admin_pgid=sleeper.pid,
                        admin_start_ticks=process_start_ticks(sleeper.pid))
    with pytest.raises(MarkerMismatch, match="does not write to"):
        verify_processes(actor_system.data_dir, elsewhere)
    with pytest.raises(MarkerMismatch, match="process group"):
        verify_processes(actor_system.data_dir, replace(found, admin_pgid=sleeper.pid))
    with pytest.raises(MarkerMismatch, match="started after the admin"):
        verify_owner(actor_system.data_dir, replace(found, owner_pid=sleeper.pid))


def test_a_real_in_process_system_is_verified(simple_system: ActorSystem) -> None:
    found = read_marker(simple_system.data_dir)
    assert found is not None and found.base == "simple"
    verify_processes(simple_system.data_dir, found)
