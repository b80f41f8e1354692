"""Facts about local processes, read from ``/proc`` (Linux)."""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import select
import signal
import time
from collections.abc import Callable, Iterable


def process_start_ticks(pid: int) -> int | None:
    """The kernel's start time of ``pid`` (clock ticks since boot); None if gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            stat = handle.read()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a reaped or dead child is gone)."""
    return process_start_ticks(pid) is not None


@functools.cache
def boot_id() -> str | None:
    """This kernel's boot id: equal in two processes exactly when they share one monotonic clock (the same host,
    the same boot), so a ``time.monotonic_ns()`` of one means something to the other. None where it cannot be read."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            return handle.read().strip() or None
    except OSError:
        return None


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (every thread's ``children`` list: a child belongs to the thread that forked it)."""
    found: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                found += [int(x) for x in fh.read().split()]
        except (OSError, ValueError):
            continue
    return found


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it, read from ``/proc`` before anything is killed (a killed parent's
    children move to a subreaper and could no longer be found)."""
    tree, stack = [], [pid]
    while stack:
        current = stack.pop()
        tree.append(current)
        stack += children(current)
    return tree


def end_descendants(pid: int, spare: Callable[[int], bool] = lambda _: False, wait_s: float = 2.0) -> list[int]:
    """SIGKILL every process below ``pid`` but the subtrees of the children ``spare`` keeps: the pids signalled.
    Each is pinned by a pidfd before any is signalled, so a pid reused meanwhile is never hit; then up to ``wait_s``
    seconds pass until each has exited. A SIGKILL is only delivered: a process on a busy machine holds its port or
    its files a while longer, and what is started next (the worker's next incarnation) would meet them."""
    return _end(itertools.chain.from_iterable(descendants(child) for child in children(pid) if not spare(child)),
                wait_s)


def end_tree(pid: int, wait_s: float = 2.0) -> list[int]:
    """SIGKILL ``pid`` and every process below it, as :func:`end_descendants` does (the tree read from ``/proc``
    before any is killed: a killed parent's children move away); the pids signalled (none: ``pid`` was gone)."""
    return _end(descendants(pid), wait_s)


def _end(members: Iterable[int], wait_s: float) -> list[int]:
    """Pin each of ``members`` by a pidfd (those gone already are skipped), SIGKILL them all, await their exits."""
    pinned: list[tuple[int, int]] = []
    try:
        for member in members:
            with contextlib.suppress(OSError):
                pinned.append((member, os.pidfd_open(member)))
        for _, fd in pinned:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
        _await_exits([fd for _, fd in pinned], wait_s)
    finally:
        for _, fd in pinned:
            os.close(fd)
    return [member for member, _ in pinned]


def _await_exits(pidfds: list[int], wait_s: float) -> None:
    """Wait until every process the ``pidfds`` pin has exited (a pidfd polls readable then), at most ``wait_s``."""
    waiting = select.poll()
    for fd in pidfds:
        waiting.register(fd, select.POLLIN)
    left, deadline = len(pidfds), time.monotonic() + wait_s
    while left and (remaining := deadline - time.monotonic()) > 0:
        for fd, _ in waiting.poll(remaining * 1000):
            waiting.unregister(fd)
            left -= 1


def forked_copy(pid: int) -> bool:
    """Whether ``pid`` runs this process's program with its command line (forked, not exec'd: an actor thespian
    forked from this one, a ``multiprocessing`` child) rather than a program of its own."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as theirs, open("/proc/self/cmdline", "rb") as ours:
            return theirs.read() == ours.read() and os.readlink(f"/proc/{pid}/exe") == os.readlink("/proc/self/exe")
    except OSError:
        return False
