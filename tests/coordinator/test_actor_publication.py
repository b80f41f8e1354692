"""Commit before publish on real processes: a rejected checkpoint publishes nothing, an unknown one stops the
coordinator, and its replacement reconciles by reading back — no gap, no duplicate, no model call repeated."""

from __future__ import annotations

import json

import pytest

from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule
from ouroactors.sessions import Sessions

from .actor_support import agent_tree, journal_kinds, session_config, slow_script, wait_for

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]


@pytest.fixture
def running(actor_system, tmp_path):
    actor_system.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(actor_system, follow_direct=False)  # publication through the coordinator is tested here
    sessions.new("s1", session_config(None, model={"kind": "scripted", "script": str(slow_script(
        tmp_path / "slow.toml", words=30, pace_ms=50))}))
    sessions.send("s1", "talk")
    wait_for("output committed", lambda: sessions.show("s1").committed_cursor >= 2)
    coordinator = next(c for c in actor_system.which_children("agent/coordinator") if c.status == "running")
    return actor_system, sessions, f"agent/coordinator/{coordinator.id}"


def settled(sessions: Sessions) -> list:
    events = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=30))
    assert [e.cursor for e in events] == list(range(1, len(events) + 1))  # no gap, no duplicate
    assert [e.kind for e in events].count("turn_started") == 1 and events[-1].kind == "turn_settled"
    return events


def test_rejected_checkpoints_publish_nothing_and_the_batch_is_committed_later(running):
    system, sessions, coordinator = running
    system.arm_faults(coordinator, FaultPlan((FaultRule("storage.before_commit", FaultAction.COMMIT_REJECTED,
                                                        times=10),)))
    stuck = sessions.show("s1").committed_cursor
    # While its checkpoints are refused, nothing beyond the committed cursor is readable, whatever the runtime made.
    assert [e.cursor for e in sessions.events("s1")][-1] == stuck or stuck == 0
    events = settled(sessions)
    assert len(events) == 32  # turn_started, 30 words, turn_settled: all of them, once each
    assert sessions.show("s1").state == "suspended"


def test_an_unknown_commit_stops_the_coordinator_and_the_next_one_reconciles(running):
    system, sessions, coordinator = running
    old = sessions.show("s1")
    system.arm_faults(coordinator, FaultPlan((FaultRule("storage.after_commit", FaultAction.COMMIT_UNKNOWN,
                                                        nth=1),)))
    events = settled(sessions)
    assert len(events) == 32
    crashes = [json.loads(line) for line in (system.data_dir / "events.jsonl").read_text().splitlines()]
    crashed = [e for e in crashes if e.get("path") == coordinator and e["kind"] in ("exited", "crashed")
               and "commit outcome unknown" in json.dumps(e)]
    assert crashed, "the coordinator did not stop on commit_outcome_unknown"
    view = wait_for("suspended", lambda: (v := sessions.show("s1")).state == "suspended" and v)
    assert view.state_version == old.state_version + 1  # only the turn's completion moved it: adopted, not replaced
    kinds = journal_kinds(system.data_dir, "s1")
    assert kinds.count("model_call") == 1


def test_a_coordinator_killed_after_the_last_checkpoint_leaves_no_runtime_open(actor_system, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    script = tmp_path / "short.toml"
    # two turns: the second turn's runtime continues the conversation from the journal (one answer per turn)
    script.write_text('[[turns]]\nevents = [{ kind = "text", text = "hello" }]\n\n'
                      '[[turns]]\nevents = [{ kind = "text", text = "again" }]\n')
    actor_system.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(actor_system, follow_direct=False)  # publication through the coordinator is tested here
    sessions.new("s1", session_config(ws, model={"kind": "scripted", "script": str(script)}))
    coordinator = next(c for c in actor_system.which_children("agent/coordinator") if c.status == "running")
    path = f"agent/coordinator/{coordinator.id}"
    # The turn's events come in one batch: the coordinator dies right after committing it (the session is
    # suspended durably) and before it acks and closes the runtime, which is left open holding the lease.
    actor_system.arm_faults(path, FaultPlan((FaultRule("coordinator.checkpoint_committed", FaultAction.KILL,
                                                       nth=1),)))
    sessions.send("s1", "hi")
    first = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=30))
    assert [e.kind for e in first] == ["turn_started", "text", "turn_settled"]
    wait_for("no runtime left open", lambda: not [c for c in actor_system.which_children("agent/execution")
                                                  if c.status == "running"])
    wait_for("the coordinator back", lambda: actor_system.child_info(path).status == "running")
    sessions.send("s1", "again")  # the workspace lease was released: the next turn's runtime can lease it
    second = list(sessions.events("s1", after=3, follow=True, until="turn_settled", idle_timeout=30))
    assert [e.cursor for e in second] == [4, 5, 6] and second[-1].data["status"] == "completed"
