"""What a user's worker started in a session of its own (``start_new_session=True``, ``setsid``) ends with the
system, whichever way it ends: ``ouroactors stop`` from another terminal, or the death of the foreground ``run``.
Before, only the system's session was swept, and such a program outlived its system (a server kept its port)."""

from __future__ import annotations

import json
import os
import signal

from ouroactors.core.procs import pid_alive
from ouroactors.system.marker import read_marker

from .cli_helpers import Served, cli, write_tree

WORKER = '''
import subprocess
from ouroactors import Worker


class Escaper(Worker):
    def on_start(self):
        self.child = subprocess.Popen(["sleep", "300"], start_new_session=True)
        shell = subprocess.run(["sh", "-c", "setsid sleep 300 >/dev/null 2>&1 & echo $!"], capture_output=True,
                               text=True, check=True, timeout=10)
        self.daemon = int(shell.stdout.strip())

    def on_message(self, message, sender):
        return [self.child.pid, self.daemon]
'''

TREE = """
[tree]
id = "app"

[[tree.children]]
id = "esc"
actor = "escapes:Escaper"
"""


def _escaped(tmp_path) -> list[int]:
    asked = cli("ask", "app/esc", '"pids"', cwd=tmp_path)
    assert asked.returncode == 0, asked.stdout + asked.stderr
    pids = json.loads(asked.stdout.strip().splitlines()[-1])
    assert all(os.getsid(pid) == pid for pid in pids)  # each leads a session of its own: out of the system's
    return pids


def _project(tmp_path) -> str:
    (tmp_path / "escapes.py").write_text(WORKER)
    return str(write_tree(tmp_path / "app.toml", TREE))


def _end(pids: list[int]) -> None:
    for pid in pids:
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_stop_from_another_terminal_ends_what_left_the_systems_session(tmp_path):
    started = cli("run", _project(tmp_path), "--detach", cwd=tmp_path)
    assert started.returncode == 0, started.stdout + started.stderr
    marker = read_marker(tmp_path / ".ouroactors")
    pids: list[int] = []
    try:
        pids = _escaped(tmp_path)
        stopped = cli("stop", cwd=tmp_path)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert not any(pid_alive(pid) for pid in pids), "`stop` left the worker's escaped programs running"
    finally:
        _end(pids)
        if marker.admin_pgid is not None and pid_alive(marker.admin_pgid):
            cli("stop", cwd=tmp_path)


def test_a_killed_foreground_run_takes_what_left_the_systems_session(tmp_path):
    from tests.actor.helpers import wait_until

    served = Served(tmp_path, _project(tmp_path))
    pids: list[int] = []
    try:
        pids = _escaped(tmp_path)
        served.proc.kill()  # the admin watches its creator and ends the system: its session and its marked programs
        served.proc.communicate(timeout=30)
        wait_until(lambda: not any(pid_alive(pid) for pid in pids), what="the escaped programs ended with the run")
    finally:
        served.kill()
        _end(pids)
