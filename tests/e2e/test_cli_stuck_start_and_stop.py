"""A boot whose on_start hangs ends on Ctrl-C or `stop`, naming the child; `stop --timeout` bounds the stop.

Before: a foreground `run` ignored SIGINT and SIGTERM until its 60 s start timeout (then spent ~40 s more in its
shutdown), and named only the tree; `stop --timeout 3` of a child whose on_stop took 40 s returned after ~14 s
saying "stopped the system" (exit 0), with nothing in the event log about the forced end.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from ouroactors.system.marker import read_marker

from .cli_helpers import CLI, ENV, cli, events, holding

pytestmark = pytest.mark.multiproc

WORKERS = """
import time
from ouroactors import Worker


class Fine(Worker):
    pass


class HangStart(Worker):
    def on_start(self):
        time.sleep(300)


class SlowStop(Worker):
    def on_stop(self, reason):
        time.sleep(300)
"""

HANGING = """
[tree]
id = "hs"
strategy = "one_for_one"

[[tree.children]]
id = "ok"
actor = "stuckapp.w:Fine"

[[tree.children]]
id = "inner"
type = "supervisor"
strategy = "one_for_one"

[[tree.children.children]]
id = "fine"
actor = "stuckapp.w:Fine"

[[tree.children.children]]
id = "hang"
actor = "stuckapp.w:HangStart"
"""

SLOW_STOP = """
[tree]
id = "sl"
strategy = "one_for_one"

[[tree.children]]
id = "s"
actor = "stuckapp.w:SlowStop"
shutdown = "infinity"
"""


def _project(root: Path) -> None:
    (root / "stuckapp").mkdir()
    (root / "stuckapp" / "__init__.py").write_text("")
    (root / "stuckapp" / "w.py").write_text(WORKERS)
    (root / "hang.toml").write_text(HANGING)
    (root / "slow.toml").write_text(SLOW_STOP)


def _wait_started(data: Path, path: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(e["kind"] == "started" and e["path"] == path for e in events(data)):
            return
        time.sleep(0.05)  # polling a file the system writes
    raise AssertionError(f"{path} never started")


def _system_left(data: Path) -> list[int]:
    """Processes still holding the system's admin.out (every process of a multiproc system does)."""
    return holding(data / "admin.out")


def _end(run: subprocess.Popen[str], data: Path) -> None:
    """Whatever the test saw: nothing of it stays behind (ours, by pid)."""
    if run.poll() is None:
        run.kill()
        run.communicate(timeout=30)
    for pid in _system_left(data):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("how", ["ctrl-c", "stop"])
def test_a_hung_boot_ends_on_request_naming_the_child_still_starting(tmp_path, how):
    _project(tmp_path)
    data = tmp_path / "d"
    run = subprocess.Popen([*CLI, "run", "hang.toml", "--data-dir", str(data)], cwd=tmp_path,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV)
    try:
        _wait_started(data, "hs/inner/fine")
        if how == "ctrl-c":
            run.send_signal(signal.SIGINT)
        else:
            stopped = cli("stop", "--data-dir", str(data), "--timeout", "60", cwd=tmp_path, timeout=120)
            assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        out, _ = run.communicate(timeout=45)  # before: not until the 60 s start timeout, then ~40 s of shutdown
        said = " ".join(out.split())
        assert run.returncode == 3, out
        assert "interrupted: the start of tree 'hs' was interrupted before it was up" in said, out
        assert "still starting (its on_start has not returned): hs/inner/hang" in said, out
        assert _system_left(data) == [] and read_marker(data) is None
    finally:
        _end(run, data)


def test_stop_timeout_bounds_the_orderly_stop_and_says_it_killed(tmp_path):
    _project(tmp_path)
    data = tmp_path / "d"
    started = cli("run", "slow.toml", "--detach", "--data-dir", str(data), cwd=tmp_path, timeout=120)
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        stopped = cli("stop", "--data-dir", str(data), "--timeout", "2", cwd=tmp_path, timeout=120)
        said = " ".join(stopped.stderr.split())
        assert stopped.returncode == 1, stopped.stdout + stopped.stderr
        assert "the orderly stop did not finish within 2s (still stopping: tree sl)" in said, said
        assert "every process of the system" in said and "was killed" in said
        forced = [e for e in events(data) if e["kind"] == "stop_forced"]
        assert [e["path"] for e in forced] == ["sl"] and forced[0]["timeout_s"] == 2.0
        assert _system_left(data) == [] and read_marker(data) is None
        assert "stop_forced" in cli("events", "--data-dir", str(data), cwd=tmp_path).stdout
    finally:
        for pid in _system_left(data):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_stop_in_time_is_still_an_orderly_one(tmp_path):
    _project(tmp_path)
    data = tmp_path / "d"
    (tmp_path / "fine.toml").write_text('[tree]\nid = "f"\n\n[[tree.children]]\nid = "a"\nactor = "stuckapp.w:Fine"\n')
    started = cli("run", "fine.toml", "--detach", "--data-dir", str(data), cwd=tmp_path, timeout=120)
    assert started.returncode == 0, started.stdout + started.stderr
    stopped = cli("stop", "--data-dir", str(data), "--timeout", "60", cwd=tmp_path, timeout=120)
    assert stopped.returncode == 0 and "stopped the system" in stopped.stdout, stopped.stdout + stopped.stderr
    kinds = [e["kind"] for e in events(data)]
    assert "tree_ended" in kinds and "stop_forced" not in kinds


CRASHY = """
[tree]
id = "cr"
strategy = "one_for_one"
intensity = 0

[[tree.children]]
id = "e"
actor = "ouroactors.examples.workers:Echo"
"""


def test_a_detached_system_ends_with_its_last_tree_leaving_no_marker_and_no_process(tmp_path):
    """A foreground `run` exits 4 when its tree ends on its own; a detached system served nothing on, refused the
    next `run` on its data dir ("already served") and answered `status` with exit 0 until stopped by hand."""
    (tmp_path / "crashy.toml").write_text(CRASHY)
    data = tmp_path / "d"
    started = cli("run", "crashy.toml", "--detach", "--data-dir", str(data), cwd=tmp_path, timeout=120)
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        served = read_marker(data)
        assert served is not None
        killed = cli("kill", "cr/e", "--data-dir", str(data), cwd=tmp_path)  # intensity 0: the tree escalates
        assert killed.returncode == 0, killed.stdout + killed.stderr
        deadline = time.monotonic() + 30
        while (_system_left(data) or read_marker(data) is not None) and time.monotonic() < deadline:
            time.sleep(0.05)  # polling for the system's end, bounded
        assert _system_left(data) == [] and read_marker(data) is None
        assert [e["path"] for e in events(data) if e["kind"] == "tree_ended"] == ["cr"]
        assert "no tree is left: a detached system with no tree ends" in (data / "admin.out").read_text()
        assert cli("status", "--data-dir", str(data), cwd=tmp_path).returncode == 5
        again = cli("run", "crashy.toml", "--detach", "--data-dir", str(data), cwd=tmp_path, timeout=120)
        assert again.returncode == 0, again.stdout + again.stderr  # the data dir is free again
        assert cli("stop", "--data-dir", str(data), cwd=tmp_path, timeout=120).returncode == 0
    finally:
        for pid in _system_left(data):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
