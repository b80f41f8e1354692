"""An approval asked in the middle of a turn, answered through the verified operator path: a stale answer
(another state version) is refused and recorded and resumes nothing; the fresh one lets the call run."""

from __future__ import annotations

import pytest

from ouroactors.authorities.grants.approvals import ApprovalRefused
from ouroactors.sessions import Sessions

from .actor_support import RULES, agent_tree, session_config, wait_for

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]


def test_a_stale_approval_does_not_resume_and_a_fresh_one_does(actor_system, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    script = tmp_path / "ask.toml"
    script.write_text('[[turns]]\nevents = [{ kind = "tool_call", id = "call_touch", name = "shell", '
                      'arguments = { command = "touch approved.txt" } }]\n'
                      '[[turns]]\nevents = [{ kind = "text", text = "done" }]\n')
    actor_system.start_tree(agent_tree(str(tmp_path), {"user": [*RULES["user"], "ask:Bash(touch *)"]}))
    sessions = Sessions(actor_system)
    sessions.new("s1", session_config(ws, model={"kind": "scripted", "script": str(script)}))
    sessions.send("s1", "touch it")
    wait_for("the approval asked and published",
             lambda: any(e.kind == "approval_needed" for e in sessions.events("s1")))
    [pending] = sessions.approvals("s1")
    with pytest.raises(ApprovalRefused, match="state version"):
        sessions.approve("s1", pending.approval_id, expected_version=pending.state_version + 1)
    [still] = sessions.approvals("s1")
    assert still.status == "pending" and len(still.refusals) == 1  # refused, recorded, nothing resumed
    assert not (ws / "approved.txt").exists() and sessions.show("s1").state == "running"
    assert sessions.approve("s1", pending.approval_id, "looks fine").status == "approved"
    events = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=30))
    assert [e.data["status"] for e in events if e.kind == "tool_result"] == ["ok"]
    assert (ws / "approved.txt").exists() and events[-1].data["status"] == "completed"
