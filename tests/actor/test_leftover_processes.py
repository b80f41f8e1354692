"""What a worker's incarnation started ends with it (``ouroactors.supervision.leftovers``).

A worker's subprocess outlived the worker's crash and its ``terminate_child``: the next incarnation met it (a server
it started could no longer bind its port) and it lived on until the whole system stopped.
"""

from __future__ import annotations

import pytest

from ouroactors import supervisor, worker
from ouroactors.core.procs import pid_alive

from .helpers import wait_until
from .leftover_workers import FAILING_STARTER, SESSION_STARTER, SPAWNER, STARTER

pytestmark = pytest.mark.multiproc


def test_a_crashed_or_terminated_workers_subprocess_ends_with_it(actor_system):
    actor_system.start_tree(supervisor("p", [worker("sp", SPAWNER)], intensity=10))
    first = actor_system.ask("p/sp", "pid")
    mark = actor_system.mark()
    with pytest.raises(Exception, match="asked to crash"):
        actor_system.ask("p/sp", "crash")
    actor_system.wait_for("started", "p/sp", after=mark)
    assert not pid_alive(first), "the crashed incarnation's subprocess outlived it"
    second = actor_system.ask("p/sp", "pid")
    assert pid_alive(second)
    actor_system.terminate_child("p", "sp")
    assert not pid_alive(second), "the terminated incarnation's subprocess outlived it"


def test_a_subprocess_the_worker_stops_itself_in_on_stop_is_left_to_it(actor_system):
    actor_system.start_tree(supervisor("p", [worker("sp", SPAWNER, kwargs={"stop_own": True})]))
    pid = actor_system.ask("p/sp", "pid")
    actor_system.terminate_child("p", "sp")
    wait_until(lambda: not pid_alive(pid), what="the subprocess ended")
    exited = [e for e in actor_system.events.all() if e.kind == "terminated" and e.path == "p/sp"]
    assert exited and exited[-1].reason == {"kind": "shutdown"}


def test_a_brutally_killed_workers_subprocess_ends_with_it(actor_system):
    # shutdown = brutal_kill: SIGKILLed by its supervisor without being asked, so its own stop never runs; what it
    # started is killed with it (the process tree, read before the kill)
    actor_system.start_tree(supervisor("p", [worker("sp", SPAWNER, shutdown="brutal_kill")]))
    pid = actor_system.ask("p/sp", "pid")
    actor_system.terminate_child("p", "sp")
    assert not pid_alive(pid), "the killed worker's subprocess outlived it"
    actor_system.restart_child("p", "sp")
    assert pid_alive(actor_system.ask("p/sp", "pid"))


def test_what_a_worker_sigkilled_from_outside_started_ends_before_its_restart(actor_system):
    # system.kill is a SIGKILL from outside (as the OOM killer's): nothing in the worker runs, and its children move
    # to init, where no process tree leads to them. Each actor process leads a process group of its own, and its
    # supervisor ends what is left of the dead worker's group before the restart.
    actor_system.start_tree(supervisor("p", [worker("st", STARTER)], intensity=10))
    child, daemon = actor_system.ask("p/st", "pid")
    assert pid_alive(child) and pid_alive(daemon)
    actor_system.kill("p/st")
    actor_system.wait_for("started", "p/st")
    assert not pid_alive(child), "the SIGKILLed worker's child outlived it"
    assert not pid_alive(daemon), "the SIGKILLed worker's daemon outlived it"
    again = actor_system.ask("p/st", "pid")
    assert all(pid_alive(pid) for pid in again)  # the next incarnation's own are untouched


def test_a_daemon_that_left_the_process_tree_ends_with_its_crashed_worker(actor_system):
    # the worker's own end (.leftovers) walks its process tree, which the daemon had left; its group it had not
    actor_system.start_tree(supervisor("p", [worker("st", STARTER)], intensity=10))
    _, daemon = actor_system.ask("p/st", "pid")
    mark = actor_system.mark()
    with pytest.raises(Exception, match="asked to crash"):
        actor_system.ask("p/st", "crash")
    actor_system.wait_for("started", "p/st", after=mark)
    assert not pid_alive(daemon), "the crashed worker's daemon outlived it"


def test_a_living_siblings_daemon_is_not_taken_for_a_dead_workers(actor_system):
    # why not a subreaper supervisor: it would receive a living sibling's detached daemons too, and could not tell
    # them from the dead child's orphans. By process group each stays its own worker's.
    actor_system.start_tree(supervisor("p", [worker("a", STARTER), worker("b", STARTER)], intensity=10))
    a_child, a_daemon = actor_system.ask("p/a", "pid")
    b_child, b_daemon = actor_system.ask("p/b", "pid")
    actor_system.kill("p/b")
    actor_system.wait_for("started", "p/b")
    assert not pid_alive(b_child) and not pid_alive(b_daemon)
    assert pid_alive(a_child) and pid_alive(a_daemon), "a living sibling's processes were killed"


def test_what_a_failed_on_start_started_ends_with_it(actor_system, tmp_path):
    # a start refused (on_start raised) ends the incarnation like a crash: what it had started ends with it
    pid_file = tmp_path / "pid"
    with pytest.raises(Exception, match="on_start failed"):
        actor_system.start_tree(supervisor("p", [worker("f", FAILING_STARTER, kwargs={"pid_file": str(pid_file)})],
                                           intensity=0))
    pid = int(pid_file.read_text())
    assert not pid_alive(pid), "the subprocess of a failed on_start outlived it"


def test_what_the_workers_of_a_sigkilled_supervisor_started_ends_before_its_restart(actor_system):
    # the workers die with their supervisor (parent-death signal) and end nothing themselves; its own supervisor
    # finds them by their starts in the event log and ends what is left in each one's process group
    actor_system.start_tree(supervisor("p", [supervisor("mid", [worker("st", STARTER)], intensity=10)],
                                       intensity=10))
    child, daemon = actor_system.ask("p/mid/st", "pid")
    mark = actor_system.mark()
    actor_system.kill("p/mid")
    actor_system.wait_for("started", "p/mid/st", after=mark)
    assert not pid_alive(child) and not pid_alive(daemon), "what the dead supervisor's worker started outlived it"
    assert all(pid_alive(pid) for pid in actor_system.ask("p/mid/st", "pid"))


def test_what_the_workers_of_a_sigkilled_tree_root_started_ends_with_the_tree(actor_system):
    actor_system.start_tree(supervisor("p", [worker("st", STARTER)]))
    child, daemon = actor_system.ask("p/st", "pid")
    mark = actor_system.mark()
    actor_system.kill("p")
    actor_system.wait_for("tree_ended", "p", after=mark)  # logged once they are ended
    assert not pid_alive(child) and not pid_alive(daemon), "what the dead tree's worker started outlived it"


def _in_sessions_of_their_own(pids: list[int]) -> None:
    from ouroactors.core.procs import _stat

    def sid(pid: int) -> int:
        fields = _stat(pid)
        assert fields is not None, f"pid {pid} is gone"
        return int(fields[3])
    wait_until(lambda: all(sid(pid) == pid for pid in pids), what="both started sessions of their own")


def test_what_a_sigkilled_worker_started_in_a_session_of_its_own_ends_before_its_restart(actor_system):
    # neither its process group nor the system's session leads to them; the lineage marks in their environments do
    actor_system.start_tree(supervisor("p", [worker("ss", SESSION_STARTER)], intensity=10))
    child, daemon = actor_system.ask("p/ss", "pid")
    _in_sessions_of_their_own([child, daemon])
    actor_system.kill("p/ss")
    actor_system.wait_for("started", "p/ss")
    assert not pid_alive(child), "the SIGKILLed worker's child in a session of its own outlived it"
    assert not pid_alive(daemon), "the SIGKILLed worker's setsid daemon outlived it"
    assert all(pid_alive(pid) for pid in actor_system.ask("p/ss", "pid"))


def test_a_setsid_daemon_ends_with_its_crashed_worker(actor_system):
    # the worker's own end: the daemon left its process tree and its group; the worker did start programs, so its
    # end looks for what carries its mark
    actor_system.start_tree(supervisor("p", [worker("ss", SESSION_STARTER)], intensity=10))
    child, daemon = actor_system.ask("p/ss", "pid")
    _in_sessions_of_their_own([child, daemon])
    mark = actor_system.mark()
    with pytest.raises(Exception, match="asked to crash"):
        actor_system.ask("p/ss", "crash")
    actor_system.wait_for("started", "p/ss", after=mark)
    assert not pid_alive(child) and not pid_alive(daemon), "the crashed worker's setsid daemon outlived it"


def test_a_living_siblings_setsid_daemon_is_not_taken_for_a_crashed_or_killed_workers(actor_system):
    # the marks name the actor: a sibling's programs, in sessions of their own too, carry another pid
    actor_system.start_tree(supervisor("p", [worker("a", SESSION_STARTER), worker("b", SESSION_STARTER)],
                                       intensity=10))
    a = actor_system.ask("p/a", "pid")
    mark = actor_system.mark()
    with pytest.raises(Exception, match="asked to crash"):
        actor_system.ask("p/b", "crash")
    actor_system.wait_for("started", "p/b", after=mark)
    actor_system.kill("p/b")
    actor_system.wait_for("started", "p/b")
    assert all(pid_alive(pid) for pid in a), "a living sibling's programs were ended"


def test_the_systems_end_ends_what_its_workers_started_in_sessions_of_their_own(actor_system):
    actor_system.start_tree(supervisor("p", [worker("ss", SESSION_STARTER), worker("st", STARTER)]))
    escaped = actor_system.ask("p/ss", "pid")
    _in_sessions_of_their_own(escaped)
    actor_system.shutdown()
    assert not any(pid_alive(pid) for pid in escaped), "the system's end left programs of its workers running"
