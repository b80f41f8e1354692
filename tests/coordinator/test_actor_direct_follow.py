"""``session events --follow`` reads the committed log in its own process, woken by whoever commits to it.

The CLI follows a session through a turn whose coordinator is killed halfway (its events are carried by the
runtime or checkpointed by the coordinator, before and after the restart): it prints every event once, in cursor
order, the same events the directory serves, and leaves no FIFO behind.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ouroactors.runtime.coordinator.wake import subscribers_dir
from ouroactors.sessions import Sessions

from .actor_support import agent_tree, child_path, session_config, wait_for

pytestmark = [pytest.mark.multiproc]

CLI = [sys.executable, "-c", "from ouroactors.cli import main; main()"]


def script(path: Path) -> Path:
    """A tool call (carried by the runtime), then text streamed slowly (checkpointed by the coordinator)."""
    words = ", ".join(f'{{ kind = "text", text = "w{i} " }}' for i in range(30))
    path.write_text('[[turns]]\nevents = [{ kind = "tool_call", id = "c1", name = "shell", '
                    'arguments = { command = "grep -c x /dev/null" } }]\n\n'
                    f'[[turns]]\npace_ms = 60\nevents = [{words}]\n')
    return path


@pytest.mark.slow
def test_the_cli_follows_the_log_itself_through_a_coordinator_restart(actor_system, tmp_path: Path):
    system = actor_system
    ws = tmp_path / "ws"
    ws.mkdir()
    system.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(system)
    sessions.new("s1", session_config(ws, model={"kind": "scripted", "script": str(script(tmp_path / "s.toml"))}))
    follower = subprocess.Popen([*CLI, "session", "events", "s1", "--follow", "--until", "turn_settled", "--idle",
                                 "60", "--json", "--data-dir", str(system.data_dir)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        fifos = subscribers_dir(system.data_dir, "s1")
        wait_for("the follower's FIFO in place", lambda: fifos.is_dir() and any(fifos.iterdir()))
        sessions.send("s1", "go")
        wait_for("text committed", lambda: sessions.show("s1").committed_cursor >= 8)
        system.kill(child_path(system, "agent/coordinator"))  # recovery adopts the runtime; the turn goes on
        out, err = follower.communicate(timeout=90)
    finally:
        follower.kill()
    assert follower.returncode == 0, err
    followed = [json.loads(line) for line in out.splitlines()]
    assert [e["cursor"] for e in followed] == list(range(1, len(followed) + 1))  # each once, no gap
    assert followed[-1]["kind"] == "turn_settled" and followed[-1]["data"]["status"] == "completed"
    kinds = [e["kind"] for e in followed]
    assert "tool_call" in kinds and "tool_result" in kinds and kinds.count("text") == 30
    served = list(sessions.events("s1", 0))  # what the directory serves from the same log
    assert [(e.cursor, e.kind) for e in served][:len(followed)] == [(e["cursor"], e["kind"]) for e in followed]
    assert not fifos.exists()  # the follower removed its FIFO (and the session's directory) on the way out


def test_a_follower_reading_the_log_ends_when_the_session_is_cancelled(actor_system, tmp_path: Path):
    system = actor_system
    system.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(system)
    (tmp_path / "unused.toml").write_text('[[turns]]\nevents = [{kind = "text", text = "ok"}]\n')  # read at creation
    sessions.new("s1", session_config(None, model={"kind": "scripted", "script": str(tmp_path / "unused.toml")}))
    follower = subprocess.Popen([*CLI, "session", "events", "s1", "--follow", "--json", "--data-dir",
                                 str(system.data_dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        fifos = subscribers_dir(system.data_dir, "s1")
        wait_for("the follower's FIFO in place", lambda: fifos.is_dir() and any(fifos.iterdir()))
        sessions.cancel("s1")
        out, err = follower.communicate(timeout=30)  # no --until, no --idle: only the terminal state ends it
    finally:
        follower.kill()
    assert follower.returncode == 0 and out == "", err
    assert not fifos.exists()
