"""A worker's crash ends it (no thespian retry, no PoisonMessage) and its supervisor restarts it."""

from __future__ import annotations

import pytest

from ouroactors import ActorCrashed, UnhandledMessage, supervisor, worker

from .helpers import COUNTER, ECHO, FAILING_START, pid_alive, wait_until

pytestmark = pytest.mark.multiproc


def test_crash_ends_process_and_restart_resets_state(actor_system):
    actor_system.start_tree(supervisor("root", [worker("c", COUNTER, kwargs={"start": 5})]))
    assert actor_system.ask("root/c", "incr") == 6
    old_pid = actor_system.child_info("root/c").pid
    mark = actor_system.mark()
    with pytest.raises(ActorCrashed) as caught:
        actor_system.ask("root/c", "crash")
    assert "ValueError" in str(caught.value)
    exited = actor_system.wait_for("exited", "root/c", after=mark)
    assert exited.reason["kind"] == "crash"
    assert exited.reason["exc_type"] == "builtins.ValueError"
    assert exited.reason["traceback_digest"]
    actor_system.wait_for("started", "root/c", after=mark)
    wait_until(lambda: not pid_alive(old_pid), what="crashed worker process to end")
    info = actor_system.child_info("root/c")
    assert info.pid != old_pid and info.restarts == 1
    assert actor_system.ask("root/c", "get") == 5  # fresh state from the spec's kwargs


def test_failing_handler_runs_once(actor_system, tmp_path):
    """Thespian would run a failing handler twice (retry with a deepcopy); we run it once."""
    from ouroactors.examples import workers  # noqa: F401  (the class below is importable)

    actor_system.start_tree(supervisor("root", [worker("r", "ouroactors.examples.workers:Recorder",
                                                       kwargs={"log_path": str(tmp_path / "log"), "name": "r"})]))
    mark = actor_system.mark()
    with pytest.raises(ActorCrashed):
        actor_system.ask("root/r", "crash")
    actor_system.wait_for("started", "root/r", after=mark)
    lines = (tmp_path / "log").read_text().splitlines()
    # start, stop (on_stop ran once with the crash), start again — and nothing else
    assert lines == ["r start", "r stop:crash", "r start"]


def test_unhandled_message_is_reported_not_dropped(actor_system):
    actor_system.start_tree(supervisor("root", [worker("c", COUNTER)]))
    with pytest.raises(UnhandledMessage) as caught:
        actor_system.ask("root/c", 3.14)
    assert caught.value.message_type == "float"
    assert actor_system.ask("root/c", "incr") == 1  # still serving: not a crash


def test_start_failure_reaches_caller_and_leaves_nothing(actor_system):
    from ouroactors import StartFailed

    with pytest.raises(StartFailed) as caught:
        actor_system.start_tree(supervisor("root", [worker("ok", ECHO), worker("bad", FAILING_START),
                                                    worker("never", ECHO)]))
    assert "bad" in str(caught.value) and "cannot start" in str(caught.value)
    kinds = [(e.kind, e.path) for e in actor_system.events.all()]
    assert ("start_failed", "root/bad") in kinds
    assert ("terminated", "root/ok") in kinds
    assert not any(path == "root/never" for _, path in kinds)


def test_sigkill_of_worker_is_killed_and_restarted(actor_system):
    actor_system.start_tree(supervisor("root", [worker("e", ECHO)]))
    mark = actor_system.mark()
    pid = actor_system.kill("root/e")
    exited = actor_system.wait_for("exited", "root/e", after=mark)
    assert exited.reason == {"kind": "killed"}
    actor_system.wait_for("started", "root/e", after=mark)
    assert actor_system.ask("root/e", "pid") != pid


def test_two_children_killed_within_milliseconds_are_both_noticed(actor_system):
    """Thespian can lose one of two near-simultaneous exit notices; the supervisor checks pids itself."""
    import os
    import signal

    actor_system.start_tree(supervisor("root", [worker("a", ECHO), worker("b", ECHO)], intensity=10))
    pids = [actor_system.child_info(f"root/{n}").pid for n in ("a", "b")]
    mark = actor_system.mark()
    for pid in pids:  # back to back: the gap that loses a notice
        os.kill(pid, signal.SIGKILL)
    for name in ("a", "b"):
        actor_system.wait_for("started", f"root/{name}", after=mark, timeout=15)
    assert all(actor_system.child_info(f"root/{n}").pid not in pids for n in ("a", "b"))
