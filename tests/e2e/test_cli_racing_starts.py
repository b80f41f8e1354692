"""Starts racing on one data dir: exactly one system serves it, the others are refused with a reason.

Before the start lock, the check (no live marker) and the claim (the marker written after the whole boot) left a
window of a second or more: three `run --detach` started at once all printed "started", three systems wrote one
event log, and `stop` reached only the last (the other two ignored SIGTERM until killed by pid).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import threading

import pytest

from ouroactors.system import marker as marker_module
from ouroactors.system.marker import START_LOCK, DataDirStarting, claiming, read_marker

from .cli_helpers import CLI, ENV, SIMPLE_TREE, cli, holding, write_tree

pytestmark = pytest.mark.multiproc


def test_three_detached_runs_at_once_one_serves_the_others_are_refused(tmp_path):
    tree = write_tree(tmp_path / "t.toml", SIMPLE_TREE)
    data = tmp_path / "d"
    runs = [subprocess.Popen([*CLI, "run", str(tree), "--detach", "--data-dir", str(data)], cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV) for _ in range(3)]
    results = [(run.wait(timeout=120), *run.communicate()) for run in runs]
    try:
        started = [r for r in results if r[0] == 0]
        refused = [r for r in results if r[0] != 0]
        assert len(started) == 1, results
        assert "detached" in started[0][1]
        for code, _out, err in refused:
            assert code == 2, (code, err)
            said = " ".join(err.split())
            assert "being claimed by another start" in said or "already served by a live system" in said, err
        served = read_marker(data)
        assert served is not None and served.admin_pid is not None
        writers = holding(data / "admin.out")
        assert {os.getsid(pid) for pid in writers} == {os.getsid(served.admin_pid)}, writers  # one system
    finally:
        stopped = cli("stop", "--data-dir", str(data), "--timeout", "60", cwd=tmp_path, timeout=120)
        left = holding(data / "admin.out")
        for pid in left:  # what a refused start would have left running: end it (ours), then fail
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert not left, f"processes still writing {data / 'admin.out'} after stop: {left}"
    assert read_marker(data) is None
    after = cli("stop", "--data-dir", str(data), cwd=tmp_path)
    assert after.returncode == 5, after.stdout + after.stderr  # nothing left to stop: no second system


def test_a_held_start_lock_refuses_a_start_naming_its_holder(tmp_path):
    """Another process holds the lock (as a start in progress does): the start is refused at once, naming it,
    and changes nothing in the data dir."""
    data = tmp_path / "d"
    data.mkdir()
    holder = subprocess.Popen(
        ["python", "-c", "import fcntl, os, sys\n"
                         f"fd = os.open({str(data / START_LOCK)!r}, os.O_RDWR | os.O_CREAT)\n"
                         "fcntl.lockf(fd, fcntl.LOCK_EX)\n"
                         "os.write(fd, str(os.getpid()).encode())\n"
                         "print('held', flush=True)\n"
                         "sys.stdin.read()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        tree = write_tree(tmp_path / "t.toml", SIMPLE_TREE)
        refused = cli("run", str(tree), "--detach", "--data-dir", str(data), cwd=tmp_path)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        said = " ".join(refused.stderr.split())
        assert f"being claimed by another start (pid {holder.pid})" in said, said
        assert not (data / "events.jsonl").exists() and read_marker(data) is None
    finally:
        holder.communicate(input="", timeout=30)
    assert holder.returncode == 0


def test_the_lock_is_released_when_the_claim_ends_and_is_not_held_by_what_the_start_forks(tmp_path):
    data = tmp_path / "d"
    data.mkdir()
    with claiming(data) as stale:
        assert stale is None
        probe = os.open(data / START_LOCK, os.O_RDWR)
        try:  # a record lock: another process's view, through a forked child (F_GETLK sees other owners only)
            pid = os.fork()
            if pid == 0:
                try:
                    fcntl.lockf(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    os._exit(1)  # got it: the parent's lock did not hold
                except OSError:
                    os._exit(0)
            assert os.waitpid(pid, 0)[1] == 0
        finally:
            os.close(probe)
    fd = os.open(data / START_LOCK, os.O_RDWR)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free again
    finally:
        os.close(fd)


def test_two_threads_of_one_process_do_not_both_claim(tmp_path):
    """A record lock does not exclude the threads of its owner: the process's own set does."""
    data = tmp_path / "d"
    data.mkdir()
    inside, leave = threading.Event(), threading.Event()
    outcome: list[BaseException | None] = []

    def first() -> None:
        with claiming(data):
            inside.set()
            leave.wait(30)

    thread = threading.Thread(target=first)
    thread.start()
    try:
        assert inside.wait(30)
        try:
            with claiming(data):
                outcome.append(None)
        except DataDirStarting as exc:
            outcome.append(exc)
    finally:
        leave.set()
        thread.join(30)
    assert isinstance(outcome[0], DataDirStarting) and outcome[0].holder == os.getpid()
    assert not marker_module._claims  # both ended: nothing claimed any more
