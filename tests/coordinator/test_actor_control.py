"""Suspend, resume, steer and cancel through ouroactors.sessions on real processes."""

from __future__ import annotations

import pytest

from ouroactors.core.errors import OuroactorsError
from ouroactors.sessions import Sessions

from .actor_support import agent_tree, journal_kinds, session_config, slow_script, wait_for

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]


@pytest.fixture
def talking(actor_system, tmp_path):
    actor_system.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(actor_system)
    sessions.new("s1", session_config(None, model={"kind": "scripted", "script": str(slow_script(
        tmp_path / "slow.toml", words=30, pace_ms=60))}))
    sessions.send("s1", "talk")
    wait_for("output committed", lambda: sessions.show("s1").committed_cursor >= 3)
    return actor_system, sessions


def test_suspend_stops_the_runtime_and_resume_runs_the_interrupted_turn_again(talking):
    system, sessions = talking
    done = sessions.suspend("s1")
    assert done.view.state == "suspended" and done.view.runtime_id is None
    wait_for("the runtime gone", lambda: not [c for c in system.which_children("agent/execution")
                                               if c.status == "running"])  # a suspended session holds no process
    cut = sessions.show("s1").committed_cursor
    assert "turn_settled" not in [e.kind for e in sessions.events("s1")]
    with pytest.raises(OuroactorsError, match="no turn to steer; send a message to start the next turn"):
        sessions.steer("s1", "hello?")
    resumed = sessions.resume("s1")
    assert resumed.view.state == "running"
    events = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=30))
    assert [e.cursor for e in events] == list(range(1, len(events) + 1)) and events[cut].kind == "turn_started"
    assert events[-1].data["status"] == "completed"
    assert wait_for("suspended", lambda: sessions.show("s1").state == "suspended")
    with pytest.raises(OuroactorsError, match="nothing to resume"):
        sessions.resume("s1")


def test_steer_reaches_the_running_turn_and_cancel_ends_the_session(talking):
    system, sessions = talking
    with pytest.raises(OuroactorsError, match="lone surrogate"):  # bad input: refused, nothing journaled
        sessions.steer("s1", "brief \ud800")
    assert sessions.steer("s1", "and be brief").detail == "steered"
    # answered once its acceptance is durable: the journal holds it, whether or not the loop delivered it yet
    assert journal_kinds(system.data_dir, "s1").count("steer_received") == 1
    done = sessions.cancel("s1")
    assert done.view.state == "cancelled" and done.view.reason == f"cancelled by {sessions.principal}"
    wait_for("the coordinator gone", lambda: not [c for c in system.which_children("agent/coordinator")
                                                    if c.status == "running"])
    wait_for("the runtime gone", lambda: not [c for c in system.which_children("agent/execution")
                                               if c.status == "running"])
    with pytest.raises(OuroactorsError, match="cancelled"):
        sessions.send("s1", "more")
    assert sessions.list() == [] and [v.state for v in sessions.list(all=True)] == ["cancelled"]


def test_a_suspended_session_exports_its_history_from_python(talking):
    from ouroactors.authorities.storage.env import StorageConfig, is_open

    system, sessions = talking
    sessions.suspend("s1")
    doc = sessions.export("s1")
    assert doc["session"]["state"] == "suspended" and "resume" in doc["next_valid"]
    assert [e["cursor"] for e in doc["events"]] == [e.cursor for e in sessions.events("s1")]
    assert [a["kind"] for a in doc["resume_events"]["accepted"]] == ["message"]
    assert doc["journal"]["ok"] and doc["journal"]["records"] > 0
    assert not is_open(StorageConfig.under(system.data_dir))  # nothing left open for a later fork
    with pytest.raises(OuroactorsError):
        sessions.export("nobody")
