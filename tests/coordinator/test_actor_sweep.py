"""The boot sweep recovers every non-terminal session (a coordinator where one has work, the rest settled in batch);
recovery that cannot be proven parks."""

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
    booted = second.mark()  # the first system's sweep logged its own (empty) recovery_swept
    second.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(second)
    events = list(sessions.events("busy", follow=True, until="turn_settled", idle_timeout=30))
    assert [e.cursor for e in events] == list(range(1, len(events) + 1))
    kinds = [e.kind for e in events]  # the lost turn ran again from the checkpoint; what it repeated is not published
    assert kinds.count("turn_started") == 1 and kinds.count("turn_resumed") == 1
    assert max(e.generation for e in events) > before.generation
    assert wait_for("busy suspended", lambda: sessions.show("busy").state == "suspended")
    assert {v.session_id: v.state for v in sessions.list()} == {"idle": "suspended", "busy": "suspended"}
    running = [c for c in second.which_children("agent/coordinator") if c.status == "running"]
    assert len(running) == 1  # busy's: the suspended one was settled by the sweep itself, the cancelled one is over
    swept = second.wait_for("recovery_swept", "agent/sessions", after=booted).fields
    assert (swept["sessions"], swept["idle"], swept["parked"], swept["coordinators"]) == (2, 1, 0, 1)
    # the idle session's coordinator starts with its first command, and the turn runs as ever
    sessions.send("idle", "hello again")
    events = list(sessions.events("idle", follow=True, until="turn_settled", idle_timeout=30))
    assert next(e.kind for e in events) == "turn_started" and events[-1].kind == "turn_settled"


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


_POPULATE = r'''
import sys
from ouroactors.authorities.storage.commit import Committed, write
from ouroactors.authorities.storage.env import StorageConfig, ensure_schema, open_env
from ouroactors.runtime.coordinator.record import PinnedVersions, RuntimeAttachment, SessionRecord, WorkspaceLease
from ouroactors.runtime.coordinator.store import SessionStore
from ouroactors.runtime.coordinator.workflow import State

config = StorageConfig.under(sys.argv[1])
env = open_env(config)
ensure_schema(env, config.path)
store = SessionStore(env)
pinned = PinnedVersions(prompt="p1", model="scripted", tools="t1", workflow="w1", policy="pol1")
common = dict(node="local", state_version=3, revision=5, pinned=pinned, principal="user:t", tenant="default",
              channels=("cli",), last_generation=1, committed_cursor=0, coordinator="c.before", created_ns=1,
              updated_ns=1)
records = [
    SessionRecord(session_id="idle", state=State.SUSPENDED, **common),
    # running on a runtime that died with the node, holding a lease whose capability was never kept: unprovable
    SessionRecord(session_id="lost", state=State.RUNNING, runtime=RuntimeAttachment(runtime_id="rt", generation=1),
                  workspace=WorkspaceLease(lease_id="lease-x", root="/nonexistent", fencing_token=1), **common),
]
assert isinstance(write(env, lambda txn: [store._put(txn, None, r) for r in records]), Committed)
'''


def test_the_sweep_settles_idle_sessions_and_parks_unprovable_ones_in_batch_without_a_coordinator(
        actor_system_factory, tmp_path):
    """A node that died left one suspended session and one running on a lost runtime whose lease cannot be proven:
    the sweep leaves the first as it is and parks the second itself (one transaction), and starts no coordinator."""
    import subprocess
    import sys

    data = tmp_path / "node"
    subprocess.run([sys.executable, "-c", _POPULATE, str(data)], check=True, timeout=60)
    system = actor_system_factory(data_dir=data)
    system.start_tree(agent_tree(str(tmp_path)))
    swept = system.wait_for("recovery_swept", "agent/sessions", after=0).fields
    assert (swept["sessions"], swept["idle"], swept["parked"], swept["coordinators"]) == (2, 1, 1, 0)
    sessions = Sessions(system)
    lost = sessions.show("lost")
    assert lost.state == "parked" and lost.reason.startswith("reservation_not_reclaimable"), lost.reason
    idle = sessions.show("idle")
    assert idle.state == "suspended" and idle.revision == 5  # nothing about it changed: nothing was written
    assert [c for c in system.which_children("agent/coordinator") if c.status == "running"] == []
