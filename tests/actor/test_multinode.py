"""Two nodes of one thespian convention on 127.0.0.1: placement by capability, node loss."""

from __future__ import annotations

import os

import pytest

from ouroactors import ActorSystemError, supervisor, worker
from ouroactors.core.procs import end_session
from ouroactors.system.handle import free_port

from .helpers import ECHO

pytestmark = pytest.mark.multiproc


@pytest.mark.slow  # ~8 s: the lost node is noticed by heartbeat, then dropped by the convention's timers (6 s)
def test_child_is_placed_on_the_node_with_the_capability_and_node_loss_is_a_killed_exit(actor_system_factory):
    port = free_port()
    leader = actor_system_factory("multiproc", admin_port=port, leader=True)
    member = actor_system_factory("multiproc", convention=f"127.0.0.1:{port}", capabilities={"color": "red"},
                                  secret_file=leader.data_dir / "secret")
    joined = leader.wait_for("node_joined")
    assert joined.fields["capabilities"]["color"] == "red"
    leader.start_tree(supervisor("root", intensity=50, period=5, children=[
        worker("here", ECHO), worker("there", ECHO, requires={"color": "red"}, start_timeout=2,
                                backoff={"min_s": 0.5, "max_s": 2.0, "jitter": 0.0}),
    ]))
    here_ref = leader.ref("root/here")
    here, there = leader.child_info("root/here"), leader.child_info("root/there")
    assert os.getsid(here.pid) == leader.pgid  # a system's processes: its admin's session
    assert os.getsid(there.pid) == member.pgid  # it runs in the member's process tree
    assert there.node == f"127.0.0.1:{member.admin_port}"
    assert leader.ask("root/there", "hello") == "hello"

    mark = leader.mark()
    end_session(member.pgid, wait_s=0.0)  # the whole member node dies at once
    exited = leader.wait_for("exited", "root/there", after=mark, timeout=15)
    assert exited.reason == {"kind": "killed", "info": f"node 127.0.0.1:{member.admin_port} lost"}
    assert (exited.time_ns - leader.events.all()[mark].time_ns) / 1e9 < 10  # "within seconds"
    lost = leader.wait_for("node_lost", after=mark)
    assert lost.fields["peer"] == f"127.0.0.1:{member.admin_port}"
    leader.wait_for("node_left", after=mark, timeout=30)
    assert here_ref.ask("still") == "still"  # the local child was never touched (same process)
    assert leader.child_info("root/here").pid == here.pid
    failed = leader.wait_for("start_failed", "root/there", after=mark, timeout=30)
    assert failed.reason["kind"] in ("killed", "crash")  # timed out, or no node can host it any more
    assert leader.child_info("root/there").status == "restarting"  # backing off, not escalating
    assert here_ref.ask("still") == "still"


def test_joining_nothing_fails_fast_and_clearly(tmp_path):
    port = free_port()
    with pytest.raises(ActorSystemError) as caught:
        from ouroactors import ActorSystem

        ActorSystem.start("multiproc", tmp_path, convention=f"127.0.0.1:{port}")
    assert f"cannot join 127.0.0.1:{port}: nothing answers there" in str(caught.value)
    assert not (tmp_path / "node.epoch").exists()  # refused before anything durable changed


def test_joining_needs_the_leaders_secret_and_refuses_another(actor_system_factory, tmp_path):
    port = free_port()
    leader = actor_system_factory("multiproc", admin_port=port, leader=True)
    from ouroactors import ActorSystem

    with pytest.raises(ActorSystemError) as missing:
        ActorSystem.start("multiproc", tmp_path / "no-secret", convention=f"127.0.0.1:{port}")
    assert "needs the leader's secret" in str(missing.value)

    other = tmp_path / "other-secret"
    other.write_text("ab" * 32 + "\n")
    other.chmod(0o600)
    with pytest.raises(ActorSystemError) as wrong:
        ActorSystem.start("multiproc", tmp_path / "wrong", convention=f"127.0.0.1:{port}", secret_file=other,
                          join_timeout=2.0)  # never registered: any wait is the whole wait
    assert "could not join" in str(wrong.value) and "within 2.0s" in str(wrong.value) and "secret" in str(wrong.value)
    assert leader.dropped_frames()["mac"] >= 1  # the member's frames reached the leader and were dropped
    assert leader.nodes() == {}
