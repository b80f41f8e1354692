"""Pushed publication on real processes: with the directory's follow tick, the coordinator's poll and its
heartbeat all set to an hour, a follower still receives every event — the runtime's pushes carry the events to
the coordinator and each checkpoint wakes the directory's waiting followers (nothing on the path waits on a timer).
"""

from __future__ import annotations

import pytest

from ouroactors.runtime.coordinator import actor, directory
from ouroactors.sessions import Sessions

from .actor_support import agent_tree, session_config, slow_script

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]

HOUR = 3600.0


def test_a_follower_is_answered_by_each_checkpoint_not_by_a_timer(actor_system_factory, monkeypatch, tmp_path):
    # Patched before the system starts: multiproc forks every actor from this process, so they inherit it.
    monkeypatch.setattr(directory, "FOLLOW_TICK_S", HOUR)
    monkeypatch.setattr(actor, "POLL_S", HOUR)
    monkeypatch.setattr(actor, "HEARTBEAT_S", HOUR)
    system = actor_system_factory("multiproc")
    system.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(system, follow_direct=False)  # the directory's follow is what is tested here
    script = slow_script(tmp_path / "slow.toml", words=6, pace_ms=60)
    sessions.new("s1", session_config(None, model={"kind": "scripted", "script": str(script)}))
    sessions.send("s1", "talk", last=True)
    # The words come 60 ms apart, so the follower's reads are held; only a Committed nudge can answer them
    # (without it a held read waits for the hour-long tick and the ask times out).
    events = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=30))
    assert [e.cursor for e in events] == list(range(1, len(events) + 1))  # no gap, no duplicate
    assert events[0].kind == "turn_started" and events[-1].kind == "turn_settled"
    assert len(events) == 8  # turn_started, 6 words, turn_settled


def test_a_tool_call_is_carried_by_the_runtime_s_start_commit(actor_system_factory, monkeypatch, tmp_path):
    """The tool call's event is committed in the ledger transaction of its start (publication.carry), and its
    result's in that of its settlement, not by checkpoints of the coordinator's; the coordinator still commits the
    turn's end, and a follower sees one log."""
    monkeypatch.setattr(directory, "FOLLOW_TICK_S", HOUR)
    monkeypatch.setattr(actor, "POLL_S", HOUR)
    monkeypatch.setattr(actor, "HEARTBEAT_S", HOUR)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.md").write_text("hello\n")
    script = tmp_path / "turn.toml"
    script.write_text('[[turns]]\nevents = [{ kind = "tool_call", id = "r0", name = "read", '
                      'arguments = { path = "notes.md" } }]\n'
                      '[[turns]]\nevents = [{ kind = "text", text = "done" }]\n')
    system = actor_system_factory("multiproc")
    system.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(system, follow_direct=False)  # the directory's follow is what is tested here
    sessions.new("s1", session_config(ws, tools={"enabled": ["read"]},
                                      model={"kind": "scripted", "script": str(script)}))
    sessions.send("s1", "go", last=True)
    events = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=30))
    assert [e.cursor for e in events] == list(range(1, len(events) + 1))
    by_kind = {e.kind: e for e in events}
    assert by_kind["turn_started"].carried, events  # the turn's first commit, the runtime's own, carried it
    assert by_kind["tool_call"].carried, events  # the start's commit carried it
    assert by_kind["tool_result"].carried, events  # a lone call's result: its settlement's commit carried it
    kinds = [e.kind for e in events]
    assert kinds.index("tool_call") < kinds.index("tool_result") < kinds.index("turn_settled")
    assert not by_kind["turn_settled"].carried  # the coordinator's, with the transition it causes
    assert by_kind["turn_settled"].data["status"] == "completed"
