"""Seed 001, "define compensation when an action cannot be made idempotent": a session's file writes are undone
by the operator — the content from before put back (or a created file removed) — as ledger effects of their own,
and only while the file still holds what the write left."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ouroactors.authorities.asking import ask_authority
from ouroactors.authorities.ledger.messages import GetEntry
from ouroactors.core.errors import OuroactorsError
from ouroactors.sessions import Sessions

from .actor_support import agent_tree, session_config, wait_for

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]


def test_an_operator_undoes_a_sessions_edit_and_created_file_recorded_in_the_ledger(actor_system, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.md").write_text("hello\n")
    script = tmp_path / "turn.json"
    calls = [{"kind": "tool_call", "id": "e0", "name": "edit",
              "arguments": {"path": "notes.md", "old": "hello", "new": "rewritten"}},
             {"kind": "tool_call", "id": "e1", "name": "write", "arguments": {"path": "made.txt", "content": "x"}}]
    script.write_text(json.dumps({"turns": [{"events": [calls[0]]}, {"events": [calls[1]]},
                                            {"events": [{"kind": "text", "text": "done"}]}]}))
    actor_system.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(actor_system)
    sessions.new("s1", session_config(ws, model={"kind": "scripted", "script": str(script)}))
    sessions.send("s1", "change things")
    events = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=30))
    assert events[-1].data["status"] == "completed"
    wait_for("suspended", lambda: sessions.show("s1").state == "suspended")
    assert (ws / "notes.md").read_text() == "rewritten\n" and (ws / "made.txt").exists()

    undone = sessions.compensate("s1/t1/e0", "the edit was not wanted")
    assert (undone.effect_id, undone.kind, undone.status.value) == ("compensate:s1/t1/e0", "compensation", "ok")
    assert undone.evidence["compensates"] == "s1/t1/e0" and undone.cause == "the edit was not wanted"
    assert (ws / "notes.md").read_text() == "hello\n"
    with pytest.raises(OuroactorsError, match="changed since"):  # done: the file no longer holds the edit's result
        sessions.compensate("s1/t1/e0", "again")

    (ws / "made.txt").write_text("changed by hand")  # the operator's own change is never undone
    refused = subprocess.run([sys.executable, "-c", "from ouroactors.cli import main; main()", "ledger", "compensate",
                              "s1/t1/e1", "--reason", "not wanted", "--data-dir", str(actor_system.data_dir)],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "changed since" in refused.stderr + refused.stdout
    assert (ws / "made.txt").read_text() == "changed by hand"
    (ws / "made.txt").write_text("x")
    done = subprocess.run([sys.executable, "-c", "from ouroactors.cli import main; main()", "ledger", "compensate",
                           "s1/t1/e1", "--reason", "not wanted", "--data-dir", str(actor_system.data_dir)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "removed" in done.stdout and not (ws / "made.txt").exists()
    entry = ask_authority(actor_system, "agent/ledger", GetEntry("compensate:s1/t1/e1"))
    assert entry.status.value == "ok" and entry.evidence["removed"] is True
