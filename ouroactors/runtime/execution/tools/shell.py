"""The ``shell`` tool: one command line, run by ``/bin/sh -c`` in the sandbox over the session's leased root.

**How it runs.** Through :func:`ouroactors.runtime.sandbox_trio.run_async`: the sandbox's own plan (the probe, the
bwrap argv, the boundary it reports, the lease root, the network proxy — decided once, in :func:`~ouroactors.
runtime.sandbox.plan`, for the blocking :func:`~ouroactors.runtime.sandbox.run` and for this) spawned from the
runtime's trio loop and awaited there: no worker thread, no thread hand-off per call (which cost as much as the
spawn of a small command). **Cancellation** (interrupt, deadline, runtime stop) kills every process of the run —
the leader, its process group and every descendant, pinned by pidfds first — and returns only once each has exited
(under bwrap: bwrap, its namespace init and the command). The test suite holds it under 100 ms.

Network: the command reaches only the session's granted domains (``ToolContext.network_domains``), through the
sandbox's domain-enforcing proxy; with no domains granted it has no network at all. The data dir is passed to the
sandbox, which keeps it invisible and refuses a workspace overlapping it (a ``sandbox_refused`` outcome).
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import Field

from ....authorities.grants.rules import Effect, Request
from ... import sandbox
from ...sandbox_netpolicy import NetworkPolicyError
from ...sandbox_trio import run_async
from .. import timing
from ._paths import PathRefused, resolve_dir
from .base import BoundaryRecord, Tool, ToolArgs, ToolContext, ToolOutcome, ToolRefused, cap_bytes

SHELL = "/bin/sh"


class ShellArgs(ToolArgs):
    command: str = Field(min_length=1, max_length=64 * 1024, description="a shell command line (run by /bin/sh -c)")
    timeout_s: float | None = Field(None, gt=0, le=24 * 3600,
                                    description="seconds before the command is killed (at most the session's limit)")


async def _sandbox_run(command: list[str], ctx: ToolContext, *, timeout: float) -> sandbox.Result:
    """The one call into the sandbox: the workspace is the lease root (proven: ``leased_root``), the data dir is
    kept invisible by the sandbox, and the network is the session's granted domains through the sandbox's proxy
    (none when nothing is granted)."""
    network = (sandbox.NetworkPolicy(domains=ctx.network_domains, private=ctx.network_private)
               if ctx.network_domains else None)
    return await run_async(command, mode=ctx.sandbox_mode, workspace=ctx.root, leased_root=ctx.root,
                           data_dir=ctx.data_dir, network=network, timeout=timeout,
                           output_limit=ctx.output_cap_bytes)


def warm(root: str, mode: sandbox.SandboxMode, data_dir: str | None) -> None:
    """Plan, never run, a command for a session that may call ``shell``: once, when the session opens.

    A runtime is a fresh process forked from its supervisor, and its first sandbox plan paid for everything done
    once per process — the account database read for the homes the sandbox hides (``pwd.getpwall``), the probe
    (under bwrap), the first touch of the code and objects it shares copy-on-write with its parent: ~1.4 ms of a
    first ``shell`` call's ~3.3 ms in a fresh process here, against ~1.2 ms for each later call. Paid at open,
    the first tool call of the first turn costs what the others do. Nothing is spawned; a plan the sandbox refuses
    here is refused again, and reported, by the call that meets it.
    """
    try:
        resolve_dir(".", root, "shell")
        sandbox.plan([SHELL, "-c", "true"], mode=mode, workspace=root, leased_root=root, data_dir=data_dir).close()
    except Exception:  # the call that runs reports it
        return


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
        try:
            resolve_dir(".", ctx.root, self.name)
            timing.mark("tool.spawn")
            result = await _sandbox_run([SHELL, "-c", args.command], ctx, timeout=timeout)
            timing.mark("tool.done")
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
