"""Ending what a dead process left in its process group, and a whole session (``ouroactors.core.procs``).

Real processes: a leader that starts a member in its group and is then SIGKILLed, as an actor is from outside.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

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
