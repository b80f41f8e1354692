"""Supervise one sandboxed (or explicitly unsandboxed) process: capped output, timeout, process-group cleanup.

Split from :mod:`.sandbox` to keep each module short. bwrap runs in its own process group
(``start_new_session``): when the command exits, or on timeout, the whole group is SIGKILLed while the leader's
zombie still pins the group id (no reuse race); stdout and stderr are read concurrently and capped, and a pipe
held open by an escaped process is given up after a grace period rather than waited on forever.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time

from ..core import procs

DRAIN_GRACE_S = 2.0  # after exit, how long to wait for pipes held by an escaped process


class Capture:
    def __init__(self, limit: int) -> None:
        self.data, self.limit, self.truncated = bytearray(), limit, False

    def add(self, chunk: bytes) -> None:
        room = max(self.limit - len(self.data), 0)
        self.truncated |= len(chunk) > room
        self.data += chunk[:room]


def killpg(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _exited(pid: int) -> bool:
    """Has ``pid`` exited? Does not reap, so its (zombie) pid still pins the process group id."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None and info.si_pid == pid


def end_escaped(mark: str | None, leader: int, notes: list[str]) -> None:
    """Unsandboxed (``mark``, the command's own in its environment): SIGKILL what the command ``leader`` left in
    sessions of its own, past its process group, and say so in ``notes``."""
    if mark is not None and (ended := procs.end_command_leftovers(mark, leader)):
        notes.append(f"ended {len(ended)} process(es) the command left running in a session of its own "
                     f"(pids {', '.join(map(str, ended))})")


def supervise(proc: subprocess.Popen[bytes], timeout: float, limit: int,
              mark: str | None = None) -> tuple[Capture, Capture, bool, list[str]]:
    """Read both pipes until the command ends; SIGKILL its process group on exit (stragglers) or timeout, and with
    ``mark`` what it left in sessions of its own (:func:`end_escaped`)."""
    assert proc.stdout is not None and proc.stderr is not None
    out, err = Capture(limit), Capture(limit)
    sel = selectors.DefaultSelector()
    pidfd = -1
    notes: list[str] = []
    try:
        for stream, capture in ((proc.stdout, out), (proc.stderr, err)):
            os.set_blocking(stream.fileno(), False)
            sel.register(stream.fileno(), selectors.EVENT_READ, capture)
        with contextlib.suppress(AttributeError, OSError):
            pidfd = os.pidfd_open(proc.pid)  # readable when the process exits; we then still poll to be sure
            sel.register(pidfd, selectors.EVENT_READ, None)
        deadline = time.monotonic() + timeout
        swept_at: float | None = None
        timed_out = False
        while True:
            now = time.monotonic()
            if swept_at is None and _exited(proc.pid):
                killpg(proc.pid)  # the leader's zombie still holds the group id: no reuse race
                end_escaped(mark, proc.pid, notes)
                swept_at = now
            elif swept_at is None and now >= deadline:
                timed_out = True
                killpg(proc.pid)
                end_escaped(mark, proc.pid, notes)
                swept_at = now
            pipes_open = any(k.data is not None for k in sel.get_map().values())
            if swept_at is not None and not pipes_open and _exited(proc.pid):
                break
            if swept_at is not None and now >= swept_at + DRAIN_GRACE_S:
                notes.append("output pipes still held open after the command ended; stopped reading")
                break
            wait = 0.05 if swept_at is not None else min(0.05 if pidfd < 0 else 1.0, max(deadline - now, 0.0))
            for key, _ in sel.select(wait):
                if key.data is None:  # pidfd became readable: exit is noticed at the top of the loop
                    sel.unregister(key.fd)
                    continue
                chunk = os.read(key.fd, 65536)
                if chunk:
                    key.data.add(chunk)
                else:
                    sel.unregister(key.fd)
        proc.wait()
        return out, err, timed_out, notes
    finally:
        sel.close()
        if pidfd >= 0:
            os.close(pidfd)
        if proc.returncode is None:  # an exception escaped the loop: never leave the command behind
            killpg(proc.pid)
            end_escaped(mark, proc.pid, notes)
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
