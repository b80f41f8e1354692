"""The sandbox's runner for trio code: the same plan as :func:`.sandbox.run`, waited for in the event loop.

**Why.** A session runtime runs tools as trio activities. Calling the blocking :func:`.sandbox.run` in a worker
thread cost two thread hand-offs per tool call (0.2-0.4 ms each way here, as much as the spawn of a small command)
and needed a side channel to find and kill the command on cancellation. Here the decisions are the same
(:func:`.sandbox.plan`: probe, argv, environment, boundary, lease root, proxy) and only the waiting differs:

* the command is spawned in the loop's thread (``vfork``: it returns once the command has exec'd, ~0.3 ms);
* its exit (a pidfd) and both pipes are waited for in one epoll set of their own, in one task, and the pipes are
  read as they become readable (capped as in :func:`run`);
* on exit or timeout the process group is SIGKILLed while the leader's zombie still pins the group id, and a pipe
  held open by an escaped process is given up after :data:`~.sandbox_proc.DRAIN_GRACE_S`;
* **cancellation** (an interrupt, the turn's deadline, a runtime stop): every process of the run — the leader and
  all its descendants, found through the kernel's ``children`` lists and pinned by pidfds before any is killed —
  is SIGKILLed, with the process group, and the cancel returns only once each has exited. Under bwrap that covers
  bwrap, its namespace init and the command; a process that called ``setsid`` itself is still a descendant.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence

import trio

from ..core.procs import descendants
from .sandbox import OUTPUT_LIMIT, NetworkPolicy, Probe, Result, SandboxMode, plan
from .sandbox_proc import DRAIN_GRACE_S, Capture, end_escaped, killpg

REAP_LIMIT_S = 5.0  # how long a cancel waits for the run's processes to exit after SIGKILL


async def kill_tree(pid: int) -> None:
    """SIGKILL ``pid``'s process group and every descendant, and return once each has exited (pidfds, in trio)."""
    fds: list[int] = []
    try:
        for member in descendants(pid):
            with contextlib.suppress(OSError):
                fds.append(os.pidfd_open(member))  # pins the process: no pid reuse between here and the kill
        killpg(pid)  # started with start_new_session: its pid is the group id
        for fd in fds:
            with contextlib.suppress(ProcessLookupError, OSError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
        with trio.move_on_after(REAP_LIMIT_S):
            for fd in fds:
                await trio.lowlevel.wait_readable(fd)  # readable once that process has exited
    finally:
        for fd in fds:
            os.close(fd)


class _Pipes:
    """Both output pipes and the leader's pidfd in one epoll set of their own, waited for by one task.

    Why not a task per pipe: trio registers each fd it waits on with its own epoll (an ``EPOLL_CTL_MOD`` that fails
    with an exception, then an ``ADD``, per new fd) and two drain tasks in a nursery cost their creation and a
    scheduling round each. The set's own fd is the only one trio waits on: ~0.05 ms less per run of a small
    command, with the same reads (a chunk per readable pipe per wake-up, level-triggered, capped by
    :class:`~.sandbox_proc.Capture`).
    """

    def __init__(self, proc: subprocess.Popen[bytes], pidfd: int, out: Capture, err: Capture) -> None:
        assert proc.stdout is not None and proc.stderr is not None
        self.epoll = select.epoll()
        self.pidfd = pidfd
        self.open: dict[int, Capture] = {}
        for stream, capture in ((proc.stdout, out), (proc.stderr, err)):
            fd = stream.fileno()
            os.set_blocking(fd, False)
            self.epoll.register(fd, select.EPOLLIN)
            self.open[fd] = capture
        self.epoll.register(pidfd, select.EPOLLIN)
        self.exited = False

    async def wake(self) -> None:
        """Wait until a pipe or the pidfd is ready; read a chunk from each ready pipe (EOF closes it here)."""
        await trio.lowlevel.wait_readable(self.epoll.fileno())
        for fd, _ in self.epoll.poll(0):
            if fd == self.pidfd:
                self.exited = True  # the leader exited (not reaped: its zombie pins the group)
                self.epoll.unregister(fd)  # level-triggered: it would be ready at every later wake-up
                continue
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if chunk:
                self.open[fd].add(chunk)
            else:
                self.epoll.unregister(fd)
                del self.open[fd]

    def close(self) -> None:
        self.epoll.close()


async def supervise_async(proc: subprocess.Popen[bytes], timeout: float, limit: int, mark: str | None = None
                          ) -> tuple[Capture, Capture, bool, list[str]]:
    """:func:`.sandbox_proc.supervise` in trio; on cancellation the whole run is killed before ``Cancelled`` goes on."""
    assert proc.stdout is not None and proc.stderr is not None
    out, err = Capture(limit), Capture(limit)
    notes: list[str] = []
    pidfd = os.pidfd_open(proc.pid)
    pipes: _Pipes | None = None
    try:
        pipes = _Pipes(proc, pidfd, out, err)
        with trio.move_on_after(timeout) as waited:
            while not pipes.exited:  # the pipes are read meanwhile: a command never blocks on a full pipe
                await pipes.wake()
        timed_out = waited.cancelled_caught
        killpg(proc.pid)  # stragglers of the group, or the whole command on timeout
        end_escaped(mark, proc.pid, notes)  # unsandboxed: what left the group for a session of its own
        if pipes.open:  # the rest of the output, or a pipe an escaped process holds (a cancel scope costs ~7 us)
            with trio.move_on_after(DRAIN_GRACE_S) as drained:
                while pipes.open:
                    await pipes.wake()
            if drained.cancelled_caught:
                notes.append("output pipes still held open after the command ended; stopped reading")
        if not pipes.exited:  # timed out: the SIGKILL above ends it; its exit is awaited (then reaped at once)
            await trio.lowlevel.wait_readable(pidfd)
        proc.wait()  # the leader has exited: reaps at once
        return out, err, timed_out, notes
    finally:
        if proc.returncode is None:  # cancelled, or an error escaped: never leave the command behind
            with trio.CancelScope(shield=True):
                await kill_tree(proc.pid)
            end_escaped(mark, proc.pid, notes)
            with contextlib.suppress(Exception):
                proc.wait(timeout=REAP_LIMIT_S)
        if pipes is not None:
            pipes.close()
        os.close(pidfd)
        proc.stdout.close()
        proc.stderr.close()


async def run_async(command: Sequence[str], *, mode: SandboxMode, workspace: str, allow_network: bool = False,
                    timeout: float = 60, env: Mapping[str, str] | None = None, probe: Probe | None = None,
                    extra_ro: tuple[str, ...] = (), output_limit: int = OUTPUT_LIMIT,
                    network: NetworkPolicy | None = None, leased_root: str | None = None,
                    data_dir: str | None = None) -> Result:
    """:func:`.sandbox.run`, awaited in trio (same arguments, same result, same refusals before anything runs)."""
    p = plan(command, mode=mode, workspace=workspace, allow_network=allow_network, timeout=timeout, env=env,
             probe=probe, extra_ro=extra_ro, network=network, leased_root=leased_root, data_dir=data_dir)
    try:
        started = time.monotonic()
        proc = p.spawn()
        out, err, timed_out, notes = await supervise_async(proc, timeout, output_limit, p.command_mark)
    finally:
        p.close()
    return p.result(proc, out, err, timed_out, notes, started)


__all__ = ["descendants", "kill_tree", "run_async", "supervise_async"]
