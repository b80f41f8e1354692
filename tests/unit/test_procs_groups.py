"""Ending what a dead process left in its process group, and a whole session (``ouroactors.core.procs``).

Real processes: a leader that starts a member in its group and is then SIGKILLed, as an actor is from outside.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from ouroactors.core import procs
from ouroactors.core.procs import end_orphaned_group, end_session, members, pid_alive

# A new group (and, with setsid, a new session), one member started in it, both pids printed; then it waits.
_LEADER = (
    "import os, subprocess, sys, time\n"
    "if sys.argv[1] == 'session': os.setsid()\n"
    "else: os.setpgid(0, 0)\n"
    "member = subprocess.Popen(['sleep', '300'])\n"
    "print(os.getpid(), member.pid, flush=True)\n"
    "time.sleep(300)\n"
)


def _leader(kind: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, "-c", _LEADER, kind], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    leader, member = (int(x) for x in proc.stdout.readline().split())
    assert leader == proc.pid
    return proc, member


def _wait_gone(pid: int) -> None:
    deadline = time.monotonic() + 10
    while pid_alive(pid):
        assert time.monotonic() < deadline, f"pid {pid} still alive"
        time.sleep(0.01)  # bounded poll for the kernel to reap


def test_a_dead_leaders_group_is_ended_and_a_living_leaders_is_left() -> None:
    proc, member = _leader("group")
    try:
        assert members(group=proc.pid) == sorted([proc.pid, member])
        assert end_orphaned_group(proc.pid) == [], "the leader lives: not an orphaned group"
        assert pid_alive(member)
        proc.kill()
        proc.wait(10)
        assert pid_alive(member), "the member outlives a SIGKILLed leader on its own"
        assert end_orphaned_group(proc.pid) == [member]
        _wait_gone(member)
        assert end_orphaned_group(proc.pid) == []  # nothing left: nothing signalled
    finally:
        proc.kill()
        proc.wait(10)
        if pid_alive(member):
            os.kill(member, signal.SIGKILL)


def test_a_session_is_ended_whole() -> None:
    proc, member = _leader("session")
    try:
        assert os.getsid(member) == proc.pid
        ended = end_session(proc.pid)
        assert sorted(ended) == sorted([proc.pid, member])
        proc.wait(10)
        _wait_gone(member)
        assert members(session=proc.pid) == []
    finally:
        proc.kill()
        proc.wait(10)
        if pid_alive(member):
            os.kill(member, signal.SIGKILL)


def _marked_sleep(system: str, actor: str) -> subprocess.Popen[bytes]:
    """``sleep 300`` in a session of its own, its environment carrying ``system``'s and ``actor``'s lineage marks."""
    env = {**os.environ, procs.SYSTEM_MARK: system, procs.ACTOR_MARK: actor}
    return subprocess.Popen(["sleep", "300"], env=env, start_new_session=True)


def test_a_program_in_a_session_of_its_own_is_found_and_ended_by_its_marks() -> None:
    # neither its group nor any session leads to it any more; its environment still names its system and actor
    dead_actor = subprocess.Popen(["true"])
    dead_actor.wait()  # a pid no process has now (until reused: end_marked checks again)
    mine = _marked_sleep("1:42", str(dead_actor.pid))
    sibling = _marked_sleep("1:42", "999999999")  # another actor's, same system
    stranger = _marked_sleep("2:42", str(dead_actor.pid))  # another system's
    try:
        assert procs.marked("1:42", actor=dead_actor.pid) == [mine.pid]
        assert set(procs.marked("1:42")) == {mine.pid, sibling.pid}
        assert procs.end_marked("1:42", actor=os.getpid()) == []  # a living actor's programs are its own to end
        assert procs.end_marked("1:42", actor=dead_actor.pid) == [mine.pid]
        assert mine.wait(10) == -signal.SIGKILL
        assert sibling.poll() is None and stranger.poll() is None
        assert procs.end_marked("1:42") == [sibling.pid]  # the system's end: every program of its
        assert sibling.wait(10) == -signal.SIGKILL and stranger.poll() is None
    finally:
        for proc in (mine, sibling, stranger):
            proc.kill()
            proc.wait()


def test_lineage_is_what_this_process_carries(monkeypatch: pytest.MonkeyPatch) -> None:
    assert procs.system_mark(os.getpid()) == f"{os.getpid()}:{procs.process_start_ticks(os.getpid())}"
    assert procs.system_mark(7, ticks=9) == "7:9"
    monkeypatch.delenv(procs.SYSTEM_MARK, raising=False)
    monkeypatch.delenv(procs.ACTOR_MARK, raising=False)
    assert procs.lineage() == {}
    monkeypatch.setenv(procs.SYSTEM_MARK, "1:2")
    assert procs.lineage() == {procs.SYSTEM_MARK: "1:2"}


def test_what_is_left_of_a_system_counts_its_marked_programs() -> None:
    escaped = _marked_sleep("3:42", "1")
    try:
        assert procs.left_behind(None, "3:42") == [escaped.pid]  # the leak check, `stop` and the demo count it
        assert procs.left_behind(None, "4:42") == [] and procs.left_behind(None, None) == []
    finally:
        escaped.kill()
        escaped.wait()
    assert procs.left_behind(None, "3:42") == []


def test_the_pids_looked_at_for_a_commands_leftovers() -> None:
    listing = ["1", "5", "100", "150", "300", "70000"]

    def unlisted() -> list[str]:
        raise AssertionError("/proc listed when the range said enough")
    assert procs._given_after(100, 100, unlisted) == []  # nobody given a pid since: one read
    assert procs._given_after(100, 103, unlisted) == ["101", "102", "103"]  # a few: probed one by one
    assert procs._given_after(100, 500, lambda: listing) == ["150", "300"]  # many: the listing, in the range
    assert procs._given_after(65000, 50, lambda: listing) == ["1", "5", "70000"]  # wrapped around pid_max
    assert procs._given_after(100, -1, lambda: listing) == listing  # the last pid unknown: every process


def test_a_process_that_started_nothing_says_so_in_one_look() -> None:
    code = ("import subprocess, sys\nfrom ouroactors.core import procs\nbefore = procs.started_programs()\n"
            "subprocess.run(['true'], check=True)\nprint(before, procs.started_programs())\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.split() == ["False", "True"]  # a program it waited for counts, though gone (one still
    # running is found by the tree walk that comes first)
