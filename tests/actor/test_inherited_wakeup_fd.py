"""No actor inherits the signal wake-up descriptor of the process that started its system.

``ouroactors run`` sets one (the pipe its stop loop waits on), an asyncio loop with signal handlers too. Every actor
inherited it through the admin's fork: each signal with a Python handler (thespian's SIGCHLD, at every child's exit
anywhere in the system) wrote a byte into the creator's pipe, and a session runtime's trio run in its main thread
warned in ``admin.out`` that its signal handling "collided with another library" (found reading a user's
``admin.out``).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from ouroactors import supervisor, worker

from ..e2e.cli_helpers import cli, write_tree
from .wakeup_probe import WAKEUP_PROBE

pytestmark = pytest.mark.multiproc


def test_an_actor_started_from_a_process_with_a_wakeup_fd_has_none(actor_system_factory):
    read, write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    previous = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    try:
        system = actor_system_factory("multiproc")
    finally:
        signal.set_wakeup_fd(previous)
    try:
        system.start_tree(supervisor("w", [worker("probe", WAKEUP_PROBE)]))
        assert system.ask("w/probe", "?", timeout=30) == (-1, None)
    finally:
        os.close(read)
        os.close(write)


def test_an_actor_of_a_system_ouroactors_run_started_has_none(tmp_path):
    write_tree(tmp_path / "probe.toml", f'[system]\ndata_dir = "data"\n[tree]\nid = "w"\n[[tree.children]]\n'
                                        f'id = "probe"\nactor = "{WAKEUP_PROBE}"\n')
    project = {"PYTHONPATH": str(Path(__file__).resolve().parents[2])}  # where the probe's module imports from
    started = cli("run", "probe.toml", "--detach", cwd=tmp_path, env=project)
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        asked = cli("ask", "w/probe", '"?"', "--json", "--data-dir", "data", cwd=tmp_path, env=project)
        assert asked.returncode == 0 and asked.stdout.split() == ["[-1,", "null]"], asked.stdout + asked.stderr
    finally:
        stopped = cli("stop", "--data-dir", "data", cwd=tmp_path)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
