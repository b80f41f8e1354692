"""Seed 001, "Resume against the current user and state": an approval answered after the session's policy changed
during the wait does not admit the call — it is refused where it would be used, recorded on the approval, and the
call is reported to the model as denied with the reason (ask again), never run."""

from __future__ import annotations

import pytest

from ouroactors.authorities.asking import ask_authority
from ouroactors.authorities.grants.messages import AddRules
from ouroactors.authorities.storage.env import StorageConfig, open_env
from ouroactors.runtime.execution.reading import records
from ouroactors.sessions import GRANTS

from .actor_support import waiting_on_an_approval

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]


def test_an_approval_answered_after_the_policy_changed_during_the_wait_does_not_run_the_call(actor_system,
                                                                                              tmp_path):
    sessions, ws = waiting_on_an_approval(actor_system, tmp_path, "touch approved.txt", "ask:Bash(touch *)",
                                          "I will ask again")
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
