"""Timer and external-job waits on real processes: the session holds no runtime while it waits, the wait survives
a restart (a durable timer fires after the whole node restarted; a job wait outlives its coordinator), and the
resume event that ends it is checked — stale, unknown and duplicate ones are rejected and recorded."""

from __future__ import annotations

import time

import pytest

from ouroactors.sessions import SessionRejected, Sessions

from .actor_support import agent_tree, session_config, wait_for

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]

TIMER_S = 4.0  # longer than a node's shutdown here, so the timer comes due while nothing runs


def two_turns(path) -> dict:
    path.write_text('[[turns]]\nevents = [{ kind = "text", text = "hello" }]\n\n'
                    '[[turns]]\nevents = [{ kind = "text", text = "resumed" }]\n')
    return session_config(None, model={"kind": "scripted", "script": str(path)})


def runtimes(system) -> list:
    return [c for c in system.which_children("agent/execution") if c.status == "running"]


def first_turn(sessions: Sessions) -> None:
    sessions.send("s1", "hi")
    wait_for("the first turn settled", lambda: sessions.show("s1").state == "suspended")


def test_a_durable_timer_fires_after_the_node_restarted(actor_system_factory, tmp_path):
    data = tmp_path / "node"
    first = actor_system_factory(data_dir=data)
    first.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(first)
    sessions.new("s1", two_turns(tmp_path / "script.toml"))
    first_turn(sessions)
    view = sessions.wait("s1", "wake up", seconds=TIMER_S).view
    assert view.state == "waiting:timer" and view.runtime_id is None and view.waits[0].startswith("timer ")
    # the runtime was closed before the wait was answered; its process exits right after (the supervisor hears
    # of it a moment later): gone, not merely closed
    wait_for("no runtime left running", lambda: not runtimes(first))
    first.shutdown()  # the timer is due while no process of the node runs

    restarted_ns = time.time_ns()
    second = actor_system_factory(data_dir=data)
    second.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(second)
    events = list(sessions.events("s1", after=view.committed_cursor, follow=True, until="turn_settled",
                                  idle_timeout=30))
    assert [e.kind for e in events] == ["turn_started", "text", "turn_settled"]
    assert events[0].data["prompt"] == "wake up" and events[-1].data["status"] == "completed"
    assert events[0].committed_ns > restarted_ns  # fired by the restarted node, from the durable record
    after = wait_for("suspended", lambda: (v := sessions.show("s1")).state == "suspended" and v)
    assert after.state_version == view.state_version + 2 and after.waits == ()  # fired once, then the turn


def test_an_external_job_wait_is_completed_by_a_checked_resume_event(actor_system, tmp_path):
    actor_system.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(actor_system)
    sessions.new("s1", two_turns(tmp_path / "script.toml"))
    first_turn(sessions)
    view = sessions.wait("s1", "the build finished", job="build-7").view
    assert (view.state, view.runtime_id) == ("waiting:external_job", None)
    assert [w.split(" due_ns=")[0] for w in view.waits] == ["external_job build-7"]  # with its expiry (a day)
    wait_for("no runtime left running", lambda: not runtimes(actor_system))  # its process exits after the close

    [coordinator] = [c for c in actor_system.which_children("agent/coordinator") if c.status == "running"]
    path = f"agent/coordinator/{coordinator.id}"
    old_pid = actor_system.kill(path)  # the wait is durable: a new coordinator picks it up
    wait_for("a new coordinator", lambda: actor_system.pid_of(path) not in (None, old_pid))

    with pytest.raises(SessionRejected, match="stale"):
        sessions.complete_job("s1", "build-7", expected_version=view.state_version - 1)
    with pytest.raises(SessionRejected, match="ordering"):
        sessions.complete_job("s1", "build-8")
    assert sessions.show("s1").state == "waiting:external_job" and not runtimes(actor_system)

    sessions.complete_job("s1", "build-7", {"ok": True}, event_id="done-1")
    events = list(sessions.events("s1", after=view.committed_cursor, follow=True, until="turn_settled",
                                  idle_timeout=30))
    prompt = events[0].data["prompt"]
    assert prompt.startswith("the build finished") and "build-7" in prompt and '"ok": true' in prompt
    assert events[-1].data["text" if events[-1].kind == "text" else "status"] == "completed"
    with pytest.raises(SessionRejected, match="duplicate"):
        sessions.complete_job("s1", "build-7", {"ok": True}, event_id="done-1")
    with pytest.raises(SessionRejected, match=r"duplicate.*'build-7' was completed already \(event 'done-1'"):
        sessions.complete_job("s1", "build-7", {"ok": True})  # an id of its own: found by its job
    after = wait_for("suspended", lambda: (v := sessions.show("s1")).state == "suspended" and v)
    assert after.rejections == 4 and after.state_version == view.state_version + 2


def test_an_external_job_that_expires_suspends_the_session_with_the_reason_and_runs_no_turn(actor_system, tmp_path):
    actor_system.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(actor_system)
    sessions.new("s1", two_turns(tmp_path / "script.toml"))
    first_turn(sessions)
    view = sessions.wait("s1", "the build finished", job="build-9", expires=1.5).view
    assert view.state == "waiting:external_job" and "due_ns=" in view.waits[0]
    after = wait_for("the job expired", lambda: (v := sessions.show("s1")).state == "suspended" and v, timeout=30)
    assert "'build-9' expired" in after.reason and after.waits == () and after.runtime_id is None
    assert after.state_version == view.state_version + 1 and after.committed_cursor == view.committed_cursor  # no turn
    with pytest.raises(SessionRejected, match=r"expired.*'build-9' expired before it completed"):  # too late
        sessions.complete_job("s1", "build-9", {"ok": True})
    assert sessions.show("s1").rejections == 1
    # the session is not stuck: the next message runs the turn the script holds, and the reason is gone
    sessions.send("s1", "go on")
    done = wait_for("the next turn settled", lambda: (v := sessions.show("s1")).state == "suspended"
                    and v.committed_cursor > after.committed_cursor and v)
    assert done.reason is None
