"""A tool command that outlived its runtime: the `none` sandbox mode runs each command in a session of its own, so a
runtime SIGKILLed mid-command left it running — an effect still acting while recovery judged it, and a process the
system's end never found. Its environment's lineage marks (``ouroactors.core.procs``) end it with the runtime."""

from __future__ import annotations

import contextlib
import os
import signal

import pytest

from ouroactors.core.procs import _stat, pid_alive
from ouroactors.sessions import Sessions

from .actor_support import RULES, agent_tree, child_path, session_config, wait_for

pytestmark = pytest.mark.multiproc


def _sleeping(seconds: str) -> list[int]:
    """The processes running ``sleep <seconds>``."""
    found = []
    for entry in os.listdir("/proc"):
        with contextlib.suppress(OSError), open(f"/proc/{entry}/cmdline", "rb") as handle:
            if handle.read() == f"sleep\0{seconds}\0".encode():
                found.append(int(entry))
    return found


def test_a_runtime_sigkilled_mid_command_takes_its_unsandboxed_command_with_it(actor_system, tmp_path):
    seconds = f"300.{os.getpid()}"  # this test's own sleep, told from any other on the machine
    ws = tmp_path / "ws"
    ws.mkdir()
    script = tmp_path / "sleep.toml"
    script.write_text(f'[[turns]]\nevents = [{{ kind = "tool_call", id = "c1", name = "shell", '
                      f'arguments = {{ command = "sleep {seconds}" }} }}]\n'
                      '[[turns]]\nevents = [{ kind = "text", text = "done" }]\n')
    actor_system.start_tree(agent_tree(str(tmp_path), {"user": [*RULES["user"], "allow:Bash(sleep *)"]}))
    sessions = Sessions(actor_system)
    sessions.new("s1", session_config(ws, model={"kind": "scripted", "script": str(script)}))
    sessions.send("s1", "go")
    [command] = wait_for("the command running", lambda: _sleeping(seconds))
    try:
        fields = _stat(command)
        assert fields is not None and int(fields[3]) != actor_system.pgid  # out of the system's session
        actor_system.kill(child_path(actor_system, "agent/execution"))
        wait_for("the command ended with its runtime", lambda: not pid_alive(command))
    finally:
        with contextlib.suppress(OSError):
            os.kill(command, signal.SIGKILL)
