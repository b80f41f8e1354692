"""The ``shell`` tool: one command line, run by ``/bin/sh -c`` in the sandbox over the session's leased root.

**Why the blocking sandbox call in a worker thread, and not ``trio.run_process``.** :func:`ouroactors.runtime.
sandbox.run` is the single place that decides *how* a command is contained (the probe, the bwrap argv, the
boundary it reports, the output drain that survives escaped pipe holders, the lease root, the network proxy).
Spawning with trio ourselves would mean a second copy of those decisions that drifts. So the tool calls
``sandbox.run`` through one helper (:func:`_sandbox_run`) in ``trio.to_thread`` and adds the one thing ``run``
lacks — being cancelled from outside:

* every run carries a random **run mark** in its environment (``OUROACTORS_TOOL_RUN``). bwrap receives it as
  ``--setenv`` arguments (visible in its ``/proc/<pid>/cmdline``); in ``none`` mode it is in the child's
  ``/proc/<pid>/environ``. Only direct children of this process are looked at (the kernel's ``children``
  lists), so no other process can be picked;
* on cancel, the trio task (shielded) collects the marked child and all its descendants, pins each with a
  pidfd, SIGKILLs the child's **process group** (``run`` starts it with ``start_new_session``: the group id is
  its pid) and every descendant (under bwrap: its namespace init and the command), then waits in trio until
  every pidfd reports exit. Only then does ``trio.Cancelled`` propagate: when the cancel returns, no process of
  the call is left (measured: p50 12 ms, max 21 ms under bwrap on a 2-core machine at load 10). A cancel that
  lands before the worker thread took the call marks it abandoned, and nothing starts; one that races the spawn
  looks again every 2 ms until the child shows up or ``run`` returned. The worker thread itself finishes
  moments later (``run`` sees its child gone) and its result is dropped.

Network: the command reaches only the session's granted domains (``ToolContext.network_domains``), through the
sandbox's domain-enforcing proxy; with no domains granted it has no network at all. The data dir is passed to the
sandbox, which keeps it invisible and refuses a workspace overlapping it (a ``sandbox_refused`` outcome).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import threading
import time
from typing import Any

import trio
from pydantic import Field

from ....authorities.grants.rules import Effect, Request
from ... import sandbox
from ...sandbox_netpolicy import NetworkPolicyError
from ._paths import PathRefused, resolve_dir
from .base import BoundaryRecord, Tool, ToolArgs, ToolContext, ToolOutcome, ToolRefused, cap_bytes

MARK_ENV = "OUROACTORS_TOOL_RUN"
SHELL = "/bin/sh"
REAP_LIMIT_S = 5.0  # how long a cancel waits for the run's processes to show up and to exit


class ShellArgs(ToolArgs):
    command: str = Field(min_length=1, max_length=64 * 1024, description="a shell command line (run by /bin/sh -c)")
    timeout_s: float | None = Field(None, gt=0, le=24 * 3600,
                                    description="seconds before the command is killed (at most the session's limit)")


def _sandbox_run(command: list[str], ctx: ToolContext, *, timeout: float, env: dict[str, str]) -> sandbox.Result:
    """The one call into the sandbox: the workspace is the lease root (proven: ``leased_root``), the data dir is
    kept invisible by the sandbox, and the network is the session's granted domains through the sandbox's proxy
    (none when nothing is granted)."""
    network = (sandbox.NetworkPolicy(domains=ctx.network_domains, private=ctx.network_private)
               if ctx.network_domains else None)
    return sandbox.run(command, mode=ctx.sandbox_mode, workspace=ctx.root, leased_root=ctx.root,
                       data_dir=ctx.data_dir, network=network, timeout=timeout, env=env,
                       output_limit=ctx.output_cap_bytes)


def _children(pid: int | str) -> list[int]:
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


def _carries(pid: int, needle: bytes) -> bool:
    for what in ("cmdline", "environ"):
        try:
            with open(f"/proc/{pid}/{what}", "rb") as fh:
                if needle in fh.read():
                    return True
        except OSError:
            continue
    return False


def _run_tree(mark: str) -> tuple[list[int], list[int]]:
    """(our direct children carrying ``mark``, those and all their descendants), read from ``/proc``.

    The mark is 128 random bits given to one run only, so it names that run's child (bwrap, or the shell in
    ``none`` mode) and nothing else; the descendants (bwrap's namespace init, the command and what it started)
    are found through the kernel's children lists, before anything is killed (a killed parent's children move).
    """
    needle = mark.encode()
    roots = [pid for pid in _children("self") if _carries(pid, needle)]
    tree, stack = [], list(roots)
    while stack:
        pid = stack.pop()
        tree.append(pid)
        stack += _children(pid)
    return roots, tree


async def _kill_run(mark: str, done: threading.Event) -> None:
    """Kill the run's processes and return once each has exited (waited on pidfds, inside trio: no thread hop).

    Called only when the worker has taken the call, so its child exists or is about to: until it shows up (a
    fork not yet exec'd does not carry the mark) or ``run`` has returned, look again every 2 ms.
    """
    with trio.move_on_after(REAP_LIMIT_S):
        while True:
            roots, tree = _run_tree(mark)
            if tree or done.is_set():
                break
            await trio.sleep(0.002)  # the spawn race only: the worker took the call, its child is not exec'd yet
        fds: list[int] = []
        try:
            for pid in tree:
                with contextlib.suppress(OSError):
                    fds.append(os.pidfd_open(pid))  # pins the process: no pid reuse between here and the kill
            for pid in roots:  # run() started it with start_new_session: its pid is the group id
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
            for fd in fds:
                with contextlib.suppress(ProcessLookupError, OSError):
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
            for fd in fds:
                await trio.lowlevel.wait_readable(fd)  # readable once that process has exited
        finally:
            for fd in fds:
                os.close(fd)


class ShellTool(Tool[ShellArgs]):
    name = "shell"
    description = ("Run a shell command in the sandbox, in the workspace root. Output (stdout, then stderr) is "
                   "capped; the exit status is reported. Network only to the session's granted domains.")
    effect = Effect.EXECUTE
    Args = ShellArgs
    fingerprint_fields = ("command", "timeout_s")
    ledger_kind = "shell"

    def grant_request(self, args: ShellArgs, ctx: ToolContext) -> Request:
        # The command alone: an execute request's paths are covered by no path rule (only Tool(shell)), and where
        # it runs is the sandbox's business (the lease root, writable; nothing else).
        resolve_dir(".", ctx.root, self.name)
        return Request(principal=ctx.session_id, tool=self.name, effect=self.effect, command=args.command)

    async def run(self, args: ShellArgs, ctx: ToolContext) -> ToolOutcome:
        started = time.monotonic()
        timeout = min(args.timeout_s or ctx.timeout_s, ctx.timeout_s)
        mark = secrets.token_hex(16)
        done = threading.Event()
        lock = threading.Lock()
        state = ["pending"]  # pending -> running (the worker took it) | abandoned (cancelled before it did)

        def work() -> sandbox.Result | None:
            with lock:
                if state[0] == "abandoned":
                    return None
                state[0] = "running"
            try:
                return _sandbox_run([SHELL, "-c", args.command], ctx, timeout=timeout, env={MARK_ENV: mark})
            finally:
                done.set()

        try:
            resolve_dir(".", ctx.root, self.name)
            result = await trio.to_thread.run_sync(work, cancellable=True)
        except trio.Cancelled:
            with lock:
                running = state[0] == "running"
                state[0] = "abandoned" if not running else state[0]
            if running:  # the worker is in (or entering) run: kill what it started, wait until all of it exited
                with trio.CancelScope(shield=True):
                    await _kill_run(mark, done)
            raise
        except (sandbox.SandboxError, NetworkPolicyError, PathRefused, ToolRefused) as exc:
            kind = getattr(exc, "kind", None)
            error_kind = "sandbox_unavailable" if isinstance(exc, sandbox.SandboxUnavailable) else (
                kind if isinstance(exc, ToolRefused) else "sandbox_refused")
            return ToolOutcome(status="failed", error=str(exc), error_kind=error_kind, duration_ms=_ms(started),
                               output_cap_bytes=ctx.output_cap_bytes, evidence={"ran": False})
        except Exception as exc:  # not a refusal the sandbox names: it may have failed after the command started
            return ToolOutcome(status="unknown", error=f"{type(exc).__name__}: {exc}", error_kind="sandbox_error",
                               duration_ms=_ms(started), output_cap_bytes=ctx.output_cap_bytes,
                               evidence={"ran": "unknown"})
        assert result is not None  # None only for an abandoned worker, whose caller was cancelled
        return self._outcome(result, ctx, timeout, started)

    def _outcome(self, result: sandbox.Result, ctx: ToolContext, timeout: float, started: float) -> ToolOutcome:
        data = result.stdout
        if result.stderr:
            data += (b"\n" if data and not data.endswith(b"\n") else b"") + b"[stderr]\n" + result.stderr
        text, cut = cap_bytes(data, ctx.output_cap_bytes)
        evidence: dict[str, Any] = {
            "ran": True, "exit_code": result.returncode, "timed_out": result.timed_out,
            "stdout_bytes": len(result.stdout), "stderr_bytes": len(result.stderr),
            "stdout_truncated": result.stdout_truncated, "stderr_truncated": result.stderr_truncated,
            "sandbox": result.boundary.mode.value, "network": result.boundary.network_policy,
        }
        if result.network_refusals:
            evidence["network_refusals"] = list(result.network_refusals)
        error = error_kind = None
        if result.timed_out:
            error, error_kind = f"timed out after {timeout:g}s; the command's process group was killed", "timeout"
        elif result.returncode != 0:
            error, error_kind = f"exit status {result.returncode}", "exit_status"
        return ToolOutcome(status="ok" if error is None else "failed", output=text,
                           truncated=cut or result.stdout_truncated or result.stderr_truncated,
                           output_cap_bytes=ctx.output_cap_bytes, error=error, error_kind=error_kind,
                           evidence=evidence, boundary=BoundaryRecord.of(result.boundary), duration_ms=_ms(started))


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
