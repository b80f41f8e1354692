"""A new user's session: run a tree in one terminal, inspect and steer it from another, stop it."""

from __future__ import annotations

import os
import signal

import httpx
import pytest

from ouroactors.system.handle import session_alive
from ouroactors.system.marker import read_marker

from .cli_helpers import SIMPLE_TREE, Served, cli, events, wait_event, write_tree

pytestmark = pytest.mark.multiproc


@pytest.mark.slow  # ~7 s: seventeen CLI processes, one after another
def test_run_inspect_kill_restart_stop(tmp_path):
    tree = write_tree(tmp_path / "t.toml", SIMPLE_TREE)
    served = Served(tmp_path, str(tree))
    data = tmp_path / ".ouroactors"
    try:
        marker = read_marker(data)
        assert marker is not None and marker.owner_pid == served.proc.pid
        status = cli("status", cwd=tmp_path)
        assert status.returncode == 0, status.stderr
        assert "tree r: running" in status.stdout and "2 running" in status.stdout
        assert "r/e" in cli("tree", cwd=tmp_path).stdout

        mark = len(events(data))
        killed = cli("kill", "r/e", cwd=tmp_path)
        assert killed.returncode == 0 and "killed r/e" in killed.stdout
        assert wait_event(data, "exited", "r/e", mark)["reason"] == {"kind": "killed"}
        wait_event(data, "started", "r/e", mark)

        mark = len(events(data))
        assert cli("restart", "r/c", cwd=tmp_path).returncode == 0
        assert wait_event(data, "terminated", "r/c", mark)["reason"]["kind"] == "shutdown"
        assert cli("terminate", "r/c", cwd=tmp_path).returncode == 0
        assert "r/c" in cli("tree", cwd=tmp_path).stdout and "undefined" in cli("tree", cwd=tmp_path).stdout

        metrics = cli("metrics", cwd=tmp_path).stdout
        assert 'ouroactors_restarts_total{path="r/e",reason="killed"} 1' in metrics
        assert 'ouroactors_children{supervisor="r",status="undefined"} 1' in metrics
        assert "killed" in cli("events", cwd=tmp_path).stdout

        bad = cli("kill", "r/nope", cwd=tmp_path)
        assert bad.returncode == 2 and "r/nope" in bad.stderr and "r/c, r/e" in bad.stderr  # what does exist

        plan = tmp_path / "plan.toml"
        plan.write_text('[[rules]]\npoint = "message.r/e"\naction = "delay"\n\n'
                        '[[rules]]\npoint = "storage.befor_commit"\naction = "raise"\n')
        armed = cli("faults", "arm", str(plan), "--at", "r/e", cwd=tmp_path)
        assert armed.returncode == 0 and "armed 2 rule(s) in 1 actor(s)" in armed.stdout, armed.stderr
        warned = " ".join(armed.stderr.split())
        assert "rules[0]" not in warned  # a running actor's message point is a known point
        assert "rules[1]: point 'storage.befor_commit' matches no registered point" in warned
        assert "did you mean 'storage.before_commit'?" in warned and "workspace.lease_recorded" in warned
        assert cli("faults", "disarm", cwd=tmp_path).returncode == 0

        stopped = cli("stop", cwd=tmp_path)
        assert stopped.returncode == 0, stopped.stderr
        code, out = served.finish()
        assert code == 0 and "stopped cleanly" in out
        assert " started " in out  # not a terminal: plain event lines, no live view
        assert not session_alive(marker.admin_pgid)
        assert read_marker(data) is None
    finally:
        served.kill()


def test_second_run_on_a_served_data_dir_is_refused_naming_the_pid(tmp_path):
    tree = write_tree(tmp_path / "t.toml", SIMPLE_TREE)
    served = Served(tmp_path, str(tree))
    try:
        before = (tmp_path / ".ouroactors" / "node.epoch").read_text()
        second = cli("run", str(tree), cwd=tmp_path)
        marker = read_marker(tmp_path / ".ouroactors")
        assert second.returncode == 2
        assert f"pid {marker.admin_pid}" in " ".join(second.stderr.split())
        assert (tmp_path / ".ouroactors" / "node.epoch").read_text() == before  # nothing durable changed
        served.proc.send_signal(signal.SIGTERM)
        assert served.finish()[0] == 0
    finally:
        served.kill()


def test_killed_run_leaves_a_stale_marker_that_is_detected_and_cleaned(tmp_path):
    tree = write_tree(tmp_path / "t.toml", SIMPLE_TREE)
    served = Served(tmp_path, str(tree))
    marker = read_marker(tmp_path / ".ouroactors")
    served.proc.kill()  # SIGKILL the foreground run: its system must not outlive it
    served.proc.communicate(timeout=30)
    from tests.actor.helpers import wait_until

    wait_until(lambda: not session_alive(marker.admin_pgid), what="orphaned system to die")
    status = cli("status", cwd=tmp_path)
    assert status.returncode == 5 and "stale marker" in " ".join(status.stderr.split())
    detached = cli("run", str(tree), "--detach", cwd=tmp_path)
    assert detached.returncode == 0, detached.stdout + detached.stderr
    cleaned = f"cleaned a stale marker left by a killed system (pid {served.proc.pid})"
    assert cleaned in " ".join(detached.stdout.split())
    new = read_marker(tmp_path / ".ouroactors")
    try:
        assert "tree r: running" in cli("status", cwd=tmp_path).stdout  # outlived its starter: detached
        assert cli("stop", cwd=tmp_path).returncode == 0
        assert not session_alive(new.admin_pgid)
    finally:
        if session_alive(new.admin_pgid) and new.admin_pgid != os.getpgid(0):
            os.killpg(new.admin_pgid, signal.SIGKILL)


def test_escalation_ends_run_with_its_own_exit_code(tmp_path):
    flag = tmp_path / "broken"
    tree = write_tree(tmp_path / "t.toml", f"""
[tree]
id = "r"
intensity = 0
[[tree.children]]
id = "f"
actor = "ouroactors.examples.workers:FailsWhenFlagged"
kwargs = {{ flag = "{flag}" }}
""")
    served = Served(tmp_path, str(tree))
    try:
        assert cli("kill", "r/f", cwd=tmp_path).returncode == 0
        code, out = served.finish()
        assert code == 4 and "the tree ended on its own" in out
        assert "escalated" in out
    finally:
        served.kill()


def test_metrics_endpoint_on_loopback(tmp_path):
    from ouroactors.system.handle import free_port

    port = free_port()
    tree = write_tree(tmp_path / "t.toml", SIMPLE_TREE)
    served = Served(tmp_path, str(tree), "--metrics-port", str(port))
    try:
        body = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
        assert 'ouroactors_children{supervisor="r",status="running"} 2' in body
        assert httpx.get(f"http://127.0.0.1:{port}/other", timeout=10).status_code == 404
        served.proc.send_signal(signal.SIGINT)
        assert served.finish()[0] == 0
    finally:
        served.kill()


def test_commands_without_a_system_say_so(tmp_path):
    for command in (["status"], ["tree"], ["kill", "r/e"], ["stop"]):
        result = cli(*command, cwd=tmp_path)
        assert result.returncode == 5, command
        assert "no" in result.stderr.lower()


def test_join_to_nothing_listening_is_a_clear_error_not_a_hang(tmp_path):
    from ouroactors.system.handle import free_port

    tree = write_tree(tmp_path / "t.toml", SIMPLE_TREE)
    port = free_port()
    result = cli("run", str(tree), "--join", f"127.0.0.1:{port}", cwd=tmp_path, timeout=30)
    assert result.returncode == 2
    assert "nothing answers there" in " ".join(result.stderr.split())
