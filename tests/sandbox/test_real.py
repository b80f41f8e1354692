"""Against the real bwrap on this machine: containment, network, cleanup, timeouts, honest refusal."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ouroactors.runtime.sandbox import (
    PROBE_COMMAND,
    Probe,
    SandboxMode,
    SandboxUnavailable,
    build_argv,
    probe,
    probe_cached,
    run,
)

from .helpers import BWRAP, needs_bwrap, pids_with, wait_until

MODES = [pytest.param(SandboxMode.BWRAP, marks=needs_bwrap, id="bwrap"), pytest.param(SandboxMode.NONE, id="none")]


@pytest.fixture(scope="module")
def found() -> Probe:
    p = probe_cached()
    assert p.available, f"bwrap is installed but the probe failed: {p.failure_kind}: {p.detail}"
    return p


def probe_for(mode: SandboxMode) -> Probe | None:
    return probe_cached() if mode is SandboxMode.BWRAP else None


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def listener() -> Iterator[int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


@needs_bwrap
def test_probe_succeeds_and_records_the_exact_flags(found: Probe) -> None:
    assert found.path == BWRAP and found.failure is None and found.failure_kind is None
    version = subprocess.run([BWRAP or "bwrap", "--version"], capture_output=True, text=True).stdout.split()[-1]
    assert found.version == version
    flags = list(found.flags)
    ws = flags[flags.index("--bind") + 1]
    assert not os.path.exists(ws)  # the probe's scratch workspace was removed
    os.mkdir(ws)
    try:
        assert flags == build_argv(list(PROBE_COMMAND), workspace=ws, allow_network=False, bwrap=found.path or "")
    finally:
        os.rmdir(ws)
    assert probe_cached() is probe_cached()


@needs_bwrap
def test_writes_inside_the_workspace_only(ws: Path, found: Probe) -> None:
    name = f"ouro-{uuid.uuid4().hex}"
    outside = [f"/etc/{name}", f"/root/{name}", f"/usr/{name}"]
    script = "echo data > made.txt; " + "; ".join(f"touch {p}" for p in outside) + "; true"
    result = run(["sh", "-c", script], mode=SandboxMode.BWRAP, workspace=str(ws), probe=found)
    assert result.returncode == 0, result
    assert (ws / "made.txt").read_text() == "data\n"
    assert result.stderr.count(b"touch: cannot touch") == len(outside)  # read-only, or absent from the view
    assert not any(os.path.exists(p) for p in outside)
    assert result.boundary.writable == (str(ws),) and result.boundary.read_only_root


@needs_bwrap
def test_root_cannot_remount_the_root_writable(ws: Path, found: Probe) -> None:
    # without --cap-drop ALL, root keeps CAP_SYS_ADMIN in bwrap's user namespace and this writes the host's /etc
    target = f"/etc/ouro-escape-{uuid.uuid4().hex}"
    try:
        result = run(["sh", "-c", f"mount -o remount,bind,rw / ; touch {target}; grep CapEff /proc/self/status"],
                     mode=SandboxMode.BWRAP, workspace=str(ws), probe=found)
        assert not os.path.exists(target)
        assert b"CapEff:\t0000000000000000" in result.stdout
    finally:
        if os.path.exists(target):
            os.unlink(target)


@needs_bwrap
def test_extra_read_only_path_inside_the_workspace(ws: Path, found: Probe) -> None:
    (ws / "protected").mkdir()
    result = run(["sh", "-c", "touch protected/x || exit 3; touch free"], mode=SandboxMode.BWRAP, workspace=str(ws),
                 probe=found, extra_ro=(str(ws / "protected"),))
    assert result.returncode == 3 and not (ws / "protected" / "x").exists()
    assert result.boundary.read_only == (str(ws / "protected"),)


@needs_bwrap
def test_tmp_is_private(ws: Path, found: Probe) -> None:
    name = f"ouro-{uuid.uuid4().hex}"
    host_file = Path("/tmp") / f"{name}-host"
    host_file.write_text("host")
    try:
        result = run(["sh", "-c", f"echo inner > /tmp/{name}; test ! -e {host_file} && cat /tmp/{name}"],
                     mode=SandboxMode.BWRAP, workspace=str(ws), probe=found)
        assert (result.returncode, result.stdout) == (0, b"inner\n"), result
        assert not os.path.exists(f"/tmp/{name}")
        assert result.boundary.private_tmp
    finally:
        host_file.unlink()


CONNECT = "import socket, sys; socket.create_connection(('{host}', {port}), 2); print('connected')"


@needs_bwrap
def test_network_is_off_and_granted_only_through_the_proxy(ws: Path, found: Probe, listener: int) -> None:
    code = CONNECT.format(host="127.0.0.1", port=listener)
    closed = run(["python3", "-c", code], mode=SandboxMode.BWRAP, workspace=str(ws), probe=found)
    assert closed.returncode != 0 and b"connected" not in closed.stdout
    assert b"ConnectionRefusedError" in closed.stderr  # only the namespace's own, empty, loopback
    assert closed.boundary.network is False
    outward = run(["python3", "-c", CONNECT.format(host="192.0.2.1", port=9)], mode=SandboxMode.BWRAP,
                  workspace=str(ws), probe=found)
    assert b"Network is unreachable" in outward.stderr, outward
    # granted network is the proxy, not the host's namespace: the host's 127.0.0.1 stays out of reach
    opened = run(["python3", "-c", code], mode=SandboxMode.BWRAP, workspace=str(ws), probe=found,
                 allow_network=True)
    assert opened.returncode != 0 and b"ConnectionRefusedError" in opened.stderr, opened
    assert opened.boundary.network is True and opened.boundary.network_policy == "proxy(*)"


@pytest.mark.parametrize("mode", MODES)
def test_environment_is_minimal(ws: Path, mode: SandboxMode, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OURO_HOST_SECRET", "leak")
    result = run(["env"], mode=mode, workspace=str(ws), probe=probe_for(mode), env={"GIVEN": "yes"})
    lines = set(result.stdout.decode().splitlines())
    assert f"HOME={ws}" in lines and "GIVEN=yes" in lines
    assert not any(line.startswith("OURO_HOST_SECRET=") for line in lines)


@pytest.mark.parametrize("mode", MODES)
def test_output_is_capped_and_drained(ws: Path, mode: SandboxMode) -> None:
    result = run(["sh", "-c", "head -c 3000000 /dev/zero; echo err >&2"], mode=mode, workspace=str(ws),
                 probe=probe_for(mode), output_limit=1000)
    assert result.returncode == 0 and not result.timed_out
    assert (len(result.stdout), result.stdout_truncated) == (1000, True)
    assert (result.stderr, result.stderr_truncated) == (b"err\n", False)


@pytest.mark.parametrize("mode", MODES)
def test_background_process_does_not_outlive_the_command(ws: Path, mode: SandboxMode,
                                                         new_mark: Callable[[], str]) -> None:
    mark = new_mark()
    script = f"sleep {mark} & echo $!; while [ ! -e go ]; do sleep 0.01; done"
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(run, ["sh", "-c", script], mode=mode, workspace=str(ws), probe=probe_for(mode),
                              timeout=60)
        wait_until(lambda: pids_with(mark), "the background sleep to start")
        (ws / "go").touch()
        result = pending.result(timeout=60)
    assert result.returncode == 0 and not result.timed_out, result
    wait_until(lambda: not pids_with(mark), "the background sleep to be gone")
    if mode is SandboxMode.NONE:  # $! is a host pid only outside the pid namespace
        pid = int(result.stdout)
        assert not os.path.exists(f"/proc/{pid}") or Path(f"/proc/{pid}/cmdline").read_bytes() == b""


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_timeout_kills_the_command_and_its_children(ws: Path, mode: SandboxMode,
                                                    new_mark: Callable[[], str]) -> None:
    first, second = new_mark(), new_mark()
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(run, ["sh", "-c", f"sleep {first} & sleep {second}"], mode=mode, workspace=str(ws),
                              probe=probe_for(mode), timeout=3)
        wait_until(lambda: pids_with(first) and pids_with(second), "both sleeps to start", timeout=3)
        result = pending.result(timeout=30)
    assert result.timed_out and result.returncode == -9
    assert 3 <= result.duration_s < 10
    wait_until(lambda: not pids_with(first) and not pids_with(second), "both sleeps to be gone")


@needs_bwrap
def test_sandbox_dies_with_its_parent(ws: Path, found: Probe, new_mark: Callable[[], str]) -> None:
    mark = new_mark()
    code = ("from ouroactors.runtime.sandbox import run, SandboxMode; "
            f"run(['sleep', {mark!r}], mode=SandboxMode.BWRAP, workspace={str(ws)!r}, timeout=120)")
    parent = subprocess.Popen([sys.executable, "-c", code])
    try:
        # wait for the command itself: killing the parent while bwrap is still setting up leaks the sandbox
        # (bwrap arms PR_SET_PDEATHSIG in its child too late; containers/bubblewrap#633, reproduced here)
        wait_until(lambda: pids_with(mark), "the sandboxed sleep to start")
        parent.kill()  # bwrap is in its own session: only --die-with-parent can take it down
        parent.wait()
        wait_until(lambda: not pids_with(mark), "the sandboxed sleep to die with its parent")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def _script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


@needs_bwrap
def test_real_namespace_failure_is_classified(tmp_path: Path, ws: Path) -> None:
    # run the probe's bwrap inside an outer bwrap that forbids further user namespaces
    nested = _script(tmp_path / "nested-bwrap", f"exec {BWRAP} --ro-bind / / --dev /dev --proc /proc --unshare-user "
                                                f"--disable-userns --cap-drop ALL -- {BWRAP} \"$@\"\n")
    broken = probe(nested)
    assert (broken.available, broken.failure_kind) == (False, "no_user_namespaces"), broken
    assert broken.detail.startswith("bwrap: Creating new namespace failed")
    with pytest.raises(SandboxUnavailable, match="no_user_namespaces"):
        run(["touch", "ran"], mode=SandboxMode.BWRAP, workspace=str(ws), probe=broken)
    assert not (ws / "ran").exists()
