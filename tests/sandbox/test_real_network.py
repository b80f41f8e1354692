"""Granted network against the real bwrap: the bridge is transparent (status, signals, output, cleanup)."""

from __future__ import annotations

import glob
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ouroactors.runtime.sandbox import PROXY_DIR, NetworkPolicy, Probe, SandboxMode, probe_cached, run

from .helpers import needs_bwrap, pids_with, wait_until

pytestmark = needs_bwrap


@pytest.fixture(scope="module")
def found() -> Probe:
    p = probe_cached()
    assert p.available, f"bwrap is installed but the probe failed: {p.failure_kind}: {p.detail}"
    return p


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


def _proxy_dirs() -> set[str]:
    return set(glob.glob(f"{tempfile.gettempdir()}/ouroactors-netproxy-*"))


@pytest.mark.parametrize("script,code", [("exit 0", 0), ("exit 3", 3), ("kill -TERM $$", 143),
                                         ("echo out; echo err >&2", 0)])
def test_the_bridge_passes_status_and_output_through(ws: Path, found: Probe, script: str, code: int) -> None:
    plain = run(["sh", "-c", script], mode=SandboxMode.BWRAP, workspace=str(ws), probe=found)
    proxied = run(["sh", "-c", script], mode=SandboxMode.BWRAP, workspace=str(ws), probe=found, allow_network=True)
    assert (plain.returncode, plain.stdout, plain.stderr) == (proxied.returncode, proxied.stdout, proxied.stderr)
    assert proxied.returncode == code


def test_a_missing_command_is_127_with_network(ws: Path, found: Probe) -> None:
    result = run(["no-such-command-here"], mode=SandboxMode.BWRAP, workspace=str(ws), probe=found,
                 allow_network=True)
    assert result.returncode == 127 and b"no-such-command-here: No such file or directory" in result.stderr


def test_only_the_proxy_variables_and_socket_are_added(ws: Path, found: Probe) -> None:
    result = run(["sh", "-c", f"env | sort; ls -A {PROXY_DIR}"], mode=SandboxMode.BWRAP, workspace=str(ws),
                 probe=found, network=NetworkPolicy(("example.com",)))
    lines = result.stdout.decode().splitlines()
    assert "https_proxy=http://127.0.0.1:3128" in lines and "ALL_PROXY=http://127.0.0.1:3128" in lines
    assert lines[-1] == "proxy.sock"
    assert result.boundary.network_policy == "proxy(example.com)"
    assert any("only through the runtime's proxy: proxy(example.com)" in n for n in result.boundary.notes)


@pytest.mark.slow
def test_proxy_is_gone_after_the_command(ws: Path, found: Probe, new_mark: Callable[[], str]) -> None:
    before = _proxy_dirs()
    mark = new_mark()
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(run, ["sh", "-c", f"sleep {mark} & sleep {mark}"], mode=SandboxMode.BWRAP,
                              workspace=str(ws), probe=found, allow_network=True, timeout=3)
        wait_until(lambda: len(pids_with(mark)) == 2, "both sleeps to start")
        assert len(_proxy_dirs() - before) == 1
        result = pending.result(timeout=30)
    assert result.timed_out
    wait_until(lambda: not pids_with(mark), "the sleeps to be gone")
    assert _proxy_dirs() - before == set()
    assert not any(t.name.startswith("netproxy") and t.is_alive() for t in threading.enumerate())


def test_granted_network_works_from_a_virtualenv_under_tmp(ws: Path, tmp_path: Path) -> None:
    """The bridge runs on the base interpreter: a virtualenv's ``bin/python`` under ``/tmp`` is hidden by the
    sandbox's fresh ``/tmp`` (and one in a home directory is not shown at all), so exec'ing it failed every
    granted-network command of a runtime started from such a virtualenv."""
    import subprocess
    import venv

    env_dir = Path(tempfile.mkdtemp(prefix="ouroactors-venv-", dir="/tmp"))
    try:
        venv.EnvBuilder(system_site_packages=True, with_pip=False, symlinks=True).create(env_dir)
        code = ("import sys; from ouroactors.runtime.sandbox import SandboxMode, run\n"
                f"r = run(['sh', '-c', 'echo through'], mode=SandboxMode.BWRAP, workspace={str(ws)!r}, "
                "allow_network=True)\n"
                "print(r.returncode, r.stdout, r.stderr); sys.exit(r.returncode)")
        done = subprocess.run([str(env_dir / "bin" / "python"), "-c", code], capture_output=True, timeout=60)
        assert done.returncode == 0 and b"through" in done.stdout, (done.stdout, done.stderr)
    finally:
        import shutil

        shutil.rmtree(env_dir, ignore_errors=True)
