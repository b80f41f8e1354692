"""The shell tool against the real sandbox: output, exit status, caps, timeouts, and cancellation by pid."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
import trio

from ouroactors.faults.world import World
from ouroactors.runtime.execution.model import ToolCall
from ouroactors.runtime.execution.tools import ToolOutcome, parse_call
from ouroactors.runtime.sandbox import SandboxMode

from ..sandbox.helpers import marker, needs_bwrap, pids_with
from .tools_support import call, context, lease

MODES = [pytest.param(SandboxMode.BWRAP, marks=needs_bwrap, id="bwrap"), pytest.param(SandboxMode.NONE, id="none")]


def alive(pid: int) -> bool:
    """A live (not zombie) process with this pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def ancestors(pid: int) -> list[int]:
    """``pid`` and its parents up to (not including) this test process."""
    chain, me = [], os.getpid()
    while pid not in (0, 1, me):
        chain.append(pid)
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                pid = int(fh.read().rsplit(b")", 1)[1].split()[1])
        except OSError:
            break
    return chain


@pytest.fixture
def no_leftovers() -> list[str]:
    """Markers used by a test; any process still running one at teardown is killed and fails the test."""
    marks: list[str] = []
    yield marks
    leaked = [pid for mark in marks for pid in pids_with(mark)]
    for pid in leaked:
        os.kill(pid, 9)
    assert not leaked, f"processes left behind: {leaked}"


@pytest.mark.parametrize("mode", MODES)
def test_runs_in_the_lease_root_and_reports_the_boundary(tmp_path: Path, mode: SandboxMode) -> None:
    root, _ = lease(tmp_path)
    out = call("shell", context(root, sandbox_mode=mode), command="pwd; echo made > f.txt; echo oops >&2")
    assert out.status == "ok" and out.evidence["exit_code"] == 0
    assert out.output == f"{root}\n[stderr]\noops\n"
    assert Path(root, "f.txt").read_text() == "made\n"
    assert out.boundary is not None and out.boundary.mode == mode.value
    if mode is SandboxMode.BWRAP:
        assert out.boundary.read_only_root and out.boundary.writable == (root,) and not out.boundary.network


@needs_bwrap
def test_bwrap_keeps_writes_inside_the_lease_and_hides_the_data_dir(tmp_path: Path) -> None:
    root, outside = lease(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    (data / "ledger.mdb").write_text("durable")
    ctx = context(root, sandbox_mode=SandboxMode.BWRAP, data_dir=str(data))
    out = call("shell", ctx, command=f"touch {outside}/x; cat {data}/ledger.mdb; touch ok; echo done")
    assert "done" in out.output and "durable" not in out.output
    assert not Path(outside, "x").exists() and Path(root, "ok").exists()
    assert out.boundary is not None and out.boundary.leased_root == root and out.boundary.network_policy == "none"


@needs_bwrap
def test_a_data_dir_inside_the_lease_is_refused_and_nothing_runs(tmp_path: Path) -> None:
    root, _ = lease(tmp_path)
    os.makedirs(f"{root}/data")
    out = call("shell", context(root, sandbox_mode=SandboxMode.BWRAP, data_dir=f"{root}/data"), command="touch ran")
    assert out.status == "failed" and out.error_kind == "sandbox_refused" and out.evidence == {"ran": False}
    assert not Path(root, "ran").exists()


@pytest.mark.parametrize("mode", MODES)
def test_exit_status_fails_and_keeps_the_output(tmp_path: Path, mode: SandboxMode) -> None:
    root, _ = lease(tmp_path)
    out = call("shell", context(root, sandbox_mode=mode), command="echo partial; exit 3")
    assert out.status == "failed" and out.error_kind == "exit_status" and out.evidence["exit_code"] == 3
    assert out.output == "partial\n" and "exit status 3" in out.for_model()


@pytest.mark.parametrize("mode", MODES)
def test_output_cap_is_reported(tmp_path: Path, mode: SandboxMode) -> None:
    root, _ = lease(tmp_path)
    out = call("shell", context(root, sandbox_mode=mode, output_cap_bytes=1000),
               command="head -c 200000 /dev/zero | tr '\\0' a; echo tail >&2")
    assert out.status == "ok" and out.truncated and out.output_cap_bytes == 1000
    assert out.output == "a" * 1000 and out.evidence["stdout_truncated"] is True
    assert "[output truncated at 1000 bytes]" in out.for_model()


@pytest.mark.parametrize("mode", MODES)
def test_timeout_kills_the_group(tmp_path: Path, mode: SandboxMode, no_leftovers: list[str]) -> None:
    root, _ = lease(tmp_path)
    a, b = marker(), marker()
    no_leftovers += [a, b]
    started = time.monotonic()
    out = call("shell", context(root, sandbox_mode=mode, timeout_s=30), command=f"sleep {a} & sleep {b}",
               timeout_s=0.5)
    assert time.monotonic() - started < 5
    assert out.status == "failed" and out.error_kind == "timeout" and out.evidence["timed_out"] is True
    assert pids_with(a) == [] and pids_with(b) == []


async def _cancel_when_running(ctx_mode: SandboxMode, root: str, mark: str) -> tuple[float, list[int]]:
    """Start ``sleep mark`` (plus a background child), cancel once it runs; (cancel latency, pids seen)."""
    tool, args = parse_call(ToolCall(id="c", name="shell", arguments={"command": f"sleep {mark} & sleep {mark}"}))
    ctx = context(root, sandbox_mode=ctx_mode, timeout_s=60)
    seen: list[int] = []
    result: list[ToolOutcome] = []
    latency = -1.0
    async with trio.open_nursery() as nursery:
        scope = trio.CancelScope()

        async def runner() -> None:
            with scope:
                result.append(await tool.run(args, ctx))

        nursery.start_soon(runner)
        deadline = trio.current_time() + 15
        while len(pids_with(mark)) < 2:  # both sleeps are running
            assert trio.current_time() < deadline, "the command never started"
            await trio.sleep(0.005)
        seen = sorted({p for pid in pids_with(mark) for p in ancestors(pid)})
        t0 = time.monotonic()
        scope.cancel()
    latency = time.monotonic() - t0
    assert result == [] and scope.cancelled_caught
    return latency, seen


@pytest.mark.parametrize("mode", MODES)
def test_cancel_kills_the_process_group_within_100ms(tmp_path: Path, mode: SandboxMode,
                                                     no_leftovers: list[str]) -> None:
    root, _ = lease(tmp_path)
    mark = marker()
    no_leftovers.append(mark)
    latency, seen = trio.run(_cancel_when_running, mode, root, mark)
    assert latency < 0.1, f"cancel took {latency * 1000:.1f} ms"
    assert seen and [pid for pid in seen if alive(pid)] == []  # every process of the call, by pid: gone
    assert pids_with(mark) == []


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("after", [0.0, 0.001, 0.01, 0.03])
def test_a_cancel_racing_the_spawn_leaves_nothing(tmp_path: Path, mode: SandboxMode, after: float,
                                                  no_leftovers: list[str]) -> None:
    root, _ = lease(tmp_path)
    mark = marker()
    no_leftovers.append(mark)
    tool, args = parse_call(ToolCall(id="c", name="shell", arguments={"command": f"sleep {mark}"}))

    async def main() -> None:
        with trio.move_on_after(after):
            await tool.run(args, context(root, sandbox_mode=mode))

    trio.run(main)
    assert pids_with(mark) == []  # at once: the cancel returned only after the group was dead


@needs_bwrap
@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_granted_domains_go_through_the_proxy_which_refuses_loopback(tmp_path: Path) -> None:
    root, _ = lease(tmp_path)
    with World() as world:
        ctx = context(root, sandbox_mode=SandboxMode.BWRAP, network_domains=("127.0.0.1",))
        out = call("shell", ctx, command=f"curl -sS -m 5 -X POST {world.url}/items -d '{{\"key\": \"shell-1\"}}'")
        with world.client() as client:
            assert client.log(prefix="shell-1") == []  # the host's loopback is not reachable from the sandbox
    assert out.boundary is not None and out.boundary.network_policy == "proxy(127.0.0.1)"
    assert any("loopback" in r for r in out.evidence["network_refusals"])
    none = call("shell", context(root, sandbox_mode=SandboxMode.BWRAP), command="env | grep -ci proxy || true")
    assert none.boundary is not None and none.boundary.network_policy == "none" and none.output.strip() == "0"


def test_an_unexpected_sandbox_failure_is_unknown_not_a_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, _ = lease(tmp_path)

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("proxy socket vanished")

    monkeypatch.setattr("ouroactors.runtime.execution.tools.shell._sandbox_run", broken)
    out = call("shell", context(root), command="true")
    assert out.status == "unknown" and out.error_kind == "sandbox_error"
    assert "proxy socket vanished" in (out.error or "")


@pytest.mark.parametrize("mode", MODES)
def test_the_trio_runner_runs_the_sandbox_plan_of_the_blocking_one(tmp_path: Path, mode: SandboxMode) -> None:
    """One set of containment decisions: the runner the tool uses (trio) and sandbox.run give the same argv, the
    same boundary and the same output for the same command."""
    from ouroactors.runtime import sandbox, sandbox_trio

    root, _ = lease(tmp_path)
    command = ["/bin/sh", "-c", "pwd; echo err >&2; exit 3"]
    blocking = sandbox.run(command, mode=mode, workspace=root, leased_root=root, timeout=30)
    awaited = trio.run(lambda: sandbox_trio.run_async(command, mode=mode, workspace=root, leased_root=root,
                                                      timeout=30))
    assert awaited.argv == blocking.argv and awaited.boundary == blocking.boundary
    assert (awaited.returncode, awaited.stdout, awaited.stderr) == (blocking.returncode, blocking.stdout,
                                                                    blocking.stderr)
    assert awaited.returncode == 3 and awaited.stderr == b"err\n" and awaited.stdout.strip()


def test_warm_plans_at_open_and_runs_nothing(tmp_path, monkeypatch) -> None:
    """A session's first shell call no longer pays the per-process work of the sandbox's plan (the homes it hides,
    read from the account database): the runtime warms it at open — planning only, never spawning."""
    import subprocess

    from ouroactors.runtime import sandbox_fs
    from ouroactors.runtime.execution.tools import shell

    root, _ = lease(tmp_path)

    def no_spawn(*args, **kwargs):
        raise AssertionError(f"warm spawned {args!r}")

    monkeypatch.setattr(subprocess, "Popen", no_spawn)
    monkeypatch.setattr(sandbox_fs, "_homes_cache", None)
    shell.warm(root, SandboxMode.NONE, str(tmp_path / "data"))
    assert sandbox_fs._homes_cache is not None  # the account database was read here, not in the first call
    shell.warm(str(Path(root) / "missing"), SandboxMode.NONE, None)  # a refusal is the real call's to report
    shell.warm(root, SandboxMode.NONE, root)  # the data dir as the workspace: refused by the plan, not raised
