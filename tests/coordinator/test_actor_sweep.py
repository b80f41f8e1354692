"""The boot sweep restarts a coordinator for every non-terminal session; recovery that cannot be proven parks."""

from __future__ import annotations

import pytest

from ouroactors.sessions import Sessions

from .actor_support import RULES, agent_tree, session_config, slow_script, wait_for

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]


def test_the_boot_sweep_recovers_every_live_session_of_the_node(actor_system_factory, tmp_path):
    data = tmp_path / "node"
    first = actor_system_factory(data_dir=data)
    first.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(first)
    slow = session_config(None, model={"kind": "scripted", "script": str(slow_script(tmp_path / "slow.toml"))})
    sessions.new("idle", session_config(None))
    sessions.new("busy", slow)
    sessions.new("gone", session_config(None))
    sessions.cancel("gone")
    sessions.send("busy", "talk slowly")
    before = wait_for("output committed", lambda: (v := sessions.show("busy")).committed_cursor >= 3 and v)
    first.shutdown()  # the whole node stops mid-turn

    second = actor_system_factory(data_dir=data)
    second.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(second)
    events = list(sessions.events("busy", follow=True, until="turn_settled", idle_timeout=30))
    assert [e.cursor for e in events] == list(range(1, len(events) + 1))
    assert [e.kind for e in events].count("turn_started") == 2  # the lost turn ran again from the checkpoint
    assert max(e.generation for e in events) > before.generation
    assert wait_for("busy suspended", lambda: sessions.show("busy").state == "suspended")
    assert {v.session_id: v.state for v in sessions.list()} == {"idle": "suspended", "busy": "suspended"}
    running = [c for c in second.which_children("agent/coordinator") if c.status == "running"]
    assert len(running) == 2  # idle and busy, not the cancelled one


def test_a_runtime_lost_in_the_middle_of_an_effect_parks_the_session_with_the_reason(actor_system, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    script = tmp_path / "sleepy.toml"
    script.write_text('[[turns]]\nevents = [{ kind = "tool_call", id = "call_sleep", name = "shell", '
                      'arguments = { command = "sleep 20" } }]\n'
                      '[[turns]]\nevents = [{ kind = "text", text = "done" }]\n')
    actor_system.start_tree(agent_tree(str(tmp_path), {"user": [*RULES["user"], "allow:Bash(sleep *)"]}))
    sessions = Sessions(actor_system)
    sessions.new("s1", session_config(ws, sandbox={"mode": "bwrap"},
                                      model={"kind": "scripted", "script": str(script)}))
    sessions.send("s1", "sleep")
    wait_for("the tool call committed", lambda: any(e.kind == "tool_call" for e in sessions.events("s1")))
    running = [c for c in actor_system.which_children("agent/execution") if c.status == "running"]
    actor_system.kill(f"agent/execution/{running[0].id}")
    parked = wait_for("the session parked", lambda: (v := sessions.show("s1")).state == "parked" and v)
    assert parked.reason is not None and parked.reason.startswith("ambiguous_effect"), parked.reason
    assert "s1/t1/call_sleep" in parked.reason and parked.runtime_id is None
    assert not any(e.kind == "tool_result" for e in sessions.events("s1"))  # nothing is guessed


def test_a_restarted_directory_finds_the_running_coordinators_and_starts_no_second_one(actor_system, tmp_path):
    actor_system.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(actor_system)
    sessions.new("a", session_config(None))
    sessions.new("b", session_config(None))
    old = actor_system.kill("agent/sessions")
    wait_for("the directory back", lambda: actor_system.pid_of("agent/sessions") != old
             and actor_system.child_info("agent/sessions").status == "running")
    assert {v.session_id for v in sessions.list()} == {"a", "b"}
    assert len([c for c in actor_system.which_children("agent/coordinator") if c.status == "running"]) == 2
    sessions.send("b", "hello")  # routed to the coordinator that kept running
    events = list(sessions.events("b", follow=True, until="turn_settled", idle_timeout=30))
    assert events[-1].kind == "turn_settled"
    assert len([c for c in actor_system.which_children("agent/coordinator") if c.status == "running"]) == 2
