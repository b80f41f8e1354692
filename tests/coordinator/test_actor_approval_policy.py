"""Seed 001, "Resume against the current user and state": an approval answered after the session's policy changed
during the wait does not admit the call — it is refused where it would be used, recorded on the approval, and the
call is reported to the model as denied with the reason (ask again), never run."""

from __future__ import annotations

import pytest

from ouroactors.authorities.asking import ask_authority
from ouroactors.authorities.grants.messages import AddRules
from ouroactors.authorities.storage.env import StorageConfig, open_env
from ouroactors.runtime.execution.reading import records
from ouroactors.sessions import GRANTS, Sessions

from .actor_support import RULES, agent_tree, session_config, wait_for

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]


def test_an_approval_answered_after_the_policy_changed_during_the_wait_does_not_run_the_call(actor_system,
                                                                                              tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    script = tmp_path / "ask.toml"
    script.write_text('[[turns]]\nevents = [{ kind = "tool_call", id = "call_touch", name = "shell", '
                      'arguments = { command = "touch approved.txt" } }]\n'
                      '[[turns]]\nevents = [{ kind = "text", text = "I will ask again" }]\n')
    actor_system.start_tree(agent_tree(str(tmp_path), {"user": [*RULES["user"], "ask:Bash(touch *)"]}))
    sessions = Sessions(actor_system)
    sessions.new("s1", session_config(ws, model={"kind": "scripted", "script": str(script)}))
    sessions.send("s1", "touch it")
    wait_for("waiting", lambda: sessions.show("s1").state == "waiting:approval")
    [pending] = sessions.approvals("s1")

    # While the session is suspended on the answer, its permissions change (the call itself still asks).
    ask_authority(actor_system, GRANTS, AddRules("session", ("allow:Bash(make *)",), session_id="s1"))
    assert sessions.approve("s1", pending.approval_id, "looks fine").status == "approved"

    events = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=30))
    assert [e.data["status"] for e in events if e.kind == "tool_result"] == ["denied"]
    env = open_env(StorageConfig.under(actor_system.data_dir))
    [told] = [r.fields for r in records(env, "s1") if r.kind == "tool_result"]  # what the model was told
    assert told["status"] == "denied" and "policy changed since the approval was asked" in told["error"]
    assert "ask again" in told["error"]
    assert not (ws / "approved.txt").exists()  # the call never ran
    assert events[-1].data["status"] == "completed"  # the model heard the refusal and answered
    [record] = sessions.approvals("s1", None)
    assert record.status == "approved" and "policy changed" in record.refusals[-1]  # not consumed; refusal recorded
