"""The trio runner's reading of a command's output (one epoll set for both pipes and the pidfd), against the
blocking runner on real processes: more output than a pipe holds on both streams, the cap, and a pipe an escaped
process keeps open after the command ended."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import trio

from ouroactors.runtime import sandbox, sandbox_trio
from ouroactors.runtime.sandbox import SandboxMode

from .helpers import marker, pids_with

HELD = "output pipes still held open after the command ended; stopped reading"


def _root(tmp_path: Path) -> str:
    root = tmp_path / "ws"
    root.mkdir()
    return os.path.realpath(root)


def _both(command: list[str], root: str, **kwargs: object) -> tuple[sandbox.Result, sandbox.Result]:
    blocking = sandbox.run(command, mode=SandboxMode.NONE, workspace=root, leased_root=root, timeout=30,
                           **kwargs)  # type: ignore[arg-type]
    awaited = trio.run(lambda: sandbox_trio.run_async(command, mode=SandboxMode.NONE, workspace=root,
                                                      leased_root=root, timeout=30, **kwargs))  # type: ignore[arg-type]
    return blocking, awaited


def _same(a: sandbox.Result, b: sandbox.Result) -> None:
    assert (a.returncode, a.stdout, a.stderr, a.stdout_truncated, a.stderr_truncated, a.timed_out, a.notes) == (
        b.returncode, b.stdout, b.stderr, b.stdout_truncated, b.stderr_truncated, b.timed_out, b.notes)


# Each stream gets ~1 MB, interleaved: far more than a pipe holds, so a runner that stopped reading either one
# while waiting for the exit would never see it.
FLOOD = ("i=0; while [ $i -lt 64 ]; do head -c 16384 /dev/zero | tr '\\0' o; "
         "head -c 16384 /dev/zero | tr '\\0' e >&2; i=$((i+1)); done; exit 4")


def test_more_output_than_a_pipe_holds_on_both_streams_is_read_whole(tmp_path: Path) -> None:
    blocking, awaited = _both(["/bin/sh", "-c", FLOOD], _root(tmp_path))
    _same(blocking, awaited)
    assert awaited.returncode == 4 and awaited.stdout == b"o" * (1 << 20) and awaited.stderr == b"e" * (1 << 20)


def test_the_cap_keeps_the_head_of_each_stream_and_says_so(tmp_path: Path) -> None:
    blocking, awaited = _both(["/bin/sh", "-c", FLOOD], _root(tmp_path), output_limit=100_000)
    _same(blocking, awaited)
    assert awaited.stdout == b"o" * 100_000 and awaited.stdout_truncated and awaited.stderr_truncated


def _escaping(mark: str, root: str, clear_env: bool) -> list[str]:
    """A command whose background shell ``setsid``s out of its process group (``env -i``: with a cleared
    environment, the command's mark gone too) and keeps stdout open; the leader ends once it has (a fifo says)."""
    os.mkfifo(Path(root) / "ready")
    escape = "env -i /usr/bin/setsid" if clear_env else "setsid"
    return ["/bin/sh", "-c", f"echo before; {escape} /bin/sh -c 'echo > ready; exec sleep {mark}' & "
                             "read x < ready; echo after >&2"]


@pytest.mark.parametrize("runner", ["trio", "blocking"])
def test_what_left_for_a_session_of_its_own_ends_with_the_command(tmp_path: Path, runner: str) -> None:
    """``setsid`` takes the sleep out of the command's process group, where the runner's kill at the command's end
    does not reach; the command's mark in its environment does: it is ended with the command (as under bwrap's
    pid namespace), which also releases the pipe it held at once, and the result says so."""
    mark, root = marker(), _root(tmp_path)
    command = _escaping(mark, root, clear_env=False)
    try:
        if runner == "trio":
            result = trio.run(lambda: sandbox_trio.run_async(command, mode=SandboxMode.NONE, workspace=root,
                                                             timeout=30))
        else:
            result = sandbox.run(command, mode=SandboxMode.NONE, workspace=root, timeout=30)
        assert not pids_with(mark), "the escaped sleep outlived its command"
    finally:
        for pid in pids_with(mark):
            os.kill(pid, signal.SIGKILL)
    assert result.returncode == 0 and result.stdout == b"before\n" and result.stderr == b"after\n"
    assert HELD not in result.notes and not result.timed_out, result.notes
    [ended] = result.notes
    assert ended.startswith("ended 1 process(es) the command left running in a session of its own"), ended


def test_a_pipe_held_by_an_escaped_process_is_given_up_after_the_grace(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """An escaped process that also cleared its environment (``env -i``) is beyond the command's mark (the
    unsandboxed boundary's known gap): it keeps stdout open after the command exited. The runner reads what came,
    gives up after the grace, says so."""
    monkeypatch.setattr(sandbox_trio, "DRAIN_GRACE_S", 0.2)
    mark, root = marker(), _root(tmp_path)
    command = _escaping(mark, root, clear_env=True)
    try:
        result = trio.run(lambda: sandbox_trio.run_async(command, mode=SandboxMode.NONE, workspace=root, timeout=30))
    finally:
        for pid in pids_with(mark):
            os.kill(pid, signal.SIGKILL)
    assert result.returncode == 0 and result.stdout == b"before\n" and result.stderr == b"after\n"
    assert result.notes == (HELD,) and not result.timed_out
