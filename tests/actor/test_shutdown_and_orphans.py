"""Shutdown timeouts, brutal_kill, infinity; supervisors that die take their subtree with them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from ouroactors import supervisor, worker
from ouroactors.system.handle import session_alive

from .helpers import ECHO, RECORDER, SLOW_STOP, pid_alive, read_lines, wait_until

pytestmark = pytest.mark.multiproc


def test_child_ignoring_polite_request_is_killed_at_timeout(actor_system):
    actor_system.start_tree(supervisor("root", [worker("slow", SLOW_STOP, kwargs={"seconds": 60}, shutdown=300)]))
    pid = actor_system.child_info("root/slow").pid
    started = time.monotonic()
    actor_system.terminate_child("root", "slow")
    elapsed = time.monotonic() - started
    assert not pid_alive(pid)
    kinds = [e.kind for e in actor_system.events.all() if e.path == "root/slow"]
    assert "shutdown_timeout" in kinds
    terminated = [e for e in actor_system.events.all() if e.kind == "terminated" and e.path == "root/slow"][-1]
    assert terminated.reason["kind"] == "killed"
    assert elapsed >= 0.3  # it waited the shutdown time before killing (not a timing goal: a lower bound)


def test_brutal_kill_does_not_wait_for_on_stop(actor_system):
    actor_system.start_tree(supervisor("root", [worker("slow", SLOW_STOP, kwargs={"seconds": 60},
                                                       shutdown="brutal_kill")]))
    pid = actor_system.child_info("root/slow").pid
    actor_system.terminate_child("root", "slow")
    assert not pid_alive(pid)
    terminated = [e for e in actor_system.events.all() if e.kind == "terminated"][-1]
    assert terminated.reason["kind"] == "killed"
    assert not any(e.kind == "shutdown_timeout" for e in actor_system.events.all())


def test_infinity_waits_for_the_child_to_finish(actor_system):
    actor_system.start_tree(supervisor("root", [worker("slow", SLOW_STOP, kwargs={"seconds": 0.5},
                                                       shutdown="infinity")]))
    actor_system.terminate_child("root", "slow")
    terminated = [e for e in actor_system.events.all() if e.kind == "terminated"][-1]
    assert terminated.reason["kind"] == "shutdown"  # finished on_stop, never killed


def test_tree_shutdown_is_reverse_start_order(actor_system, tmp_path):
    log = tmp_path / "order"
    kids = [worker(n, RECORDER, kwargs={"log_path": str(log), "name": n}) for n in ("a", "b", "c")]
    actor_system.start_tree(supervisor("root", [kids[0], supervisor("mid", [kids[1], kids[2]])]))
    actor_system.stop_tree("root")
    assert read_lines(log) == ["a start", "b start", "c start",
                               "c stop:shutdown", "b stop:shutdown", "a stop:shutdown"]


def test_sigkill_of_supervisor_takes_its_subtree_and_parent_restarts_it(actor_system):
    actor_system.start_tree(supervisor("root", [supervisor("mid", [worker("x", ECHO), worker("y", ECHO)])]))
    grandchildren = [actor_system.child_info(f"root/mid/{n}").pid for n in ("x", "y")]
    mark = actor_system.mark()
    actor_system.kill("root/mid")
    exited = actor_system.wait_for("exited", "root/mid", after=mark)
    assert exited.reason["kind"] == "killed"
    for pid in grandchildren:  # no orphans: the kernel killed them with their parent
        wait_until(lambda pid=pid: not pid_alive(pid), what=f"orphan {pid} to die")
    actor_system.wait_for("started", "root/mid/y", after=mark)
    assert actor_system.ask("root/mid/x", "hi") == "hi"


def test_shutdown_leaves_no_process_and_no_port(actor_system_factory):
    from ouroactors.testing import assert_nothing_left

    system = actor_system_factory("multiproc")
    system.start_tree(supervisor("root", [supervisor("s", [worker("a", ECHO), worker("b", ECHO)])]))
    pids = [system.child_info(p).pid for p in ("root/s", "root/s/a", "root/s/b")]
    system.shutdown()
    assert_nothing_left(system)
    assert not any(pid_alive(p) for p in pids)


SCRIPT = textwrap.dedent("""
    import os, sys
    from ouroactors import ActorSystem, supervisor, worker
    system = ActorSystem.start("multiproc", sys.argv[1], detached={detached})
    system.start_tree(supervisor("root", [worker("e", "ouroactors.examples.workers:Echo")]))
    print(system.pgid, system.child_info("root/e").pid, flush=True)
    os._exit(0)   # the creator dies without shutting anything down
""")


@pytest.mark.parametrize("detached", [False, True])
def test_system_dies_with_its_creator_unless_detached(tmp_path, detached):
    proc = subprocess.run([sys.executable, "-c", SCRIPT.format(detached=detached), str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    pgid, worker_pid = (int(x) for x in proc.stdout.split())
    try:
        if detached:
            time.sleep(0.5)  # give a wrongly-watching admin time to act; then check it did not
            assert session_alive(pgid) and pid_alive(worker_pid)
        else:
            wait_until(lambda: not session_alive(pgid), what="orphaned system to die")
            assert not pid_alive(worker_pid)
    finally:
        if session_alive(pgid) and pgid != os.getpgid(0):
            os.killpg(pgid, 9)
