"""Shared helpers for the tool tests (test_tools_*.py): a lease root in a tmp dir, a context, a trio runner."""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import trio

from ouroactors.runtime.execution.model import ToolCall
from ouroactors.runtime.execution.tools import ToolContext, ToolOutcome, parse_call
from ouroactors.runtime.sandbox import SandboxMode

T = TypeVar("T")


def lease(tmp_path: Path) -> tuple[str, str]:
    """(root, outside): a canonical lease root and a sibling directory outside it, both real directories."""
    root = tmp_path / "lease"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret\n")
    return os.path.realpath(root), os.path.realpath(outside)


def context(root: str, **overrides: Any) -> ToolContext:
    fields: dict[str, Any] = {"session_id": "s1", "root": root, "call_id": "call-1",
                              "sandbox_mode": SandboxMode.NONE}
    fields.update(overrides)
    return ToolContext(**fields)


def arun(fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    return trio.run(fn, *args)


def call(name: str, ctx: ToolContext, **arguments: Any) -> ToolOutcome:
    """Parse and run one call the way the loop does (parse, grant request, run)."""
    tool, args = parse_call(ToolCall(id="call-1", name=name, arguments=arguments))
    tool.grant_request(args, ctx)
    return trio.run(tool.run, args, ctx)


def run_only(name: str, ctx: ToolContext, **arguments: Any) -> ToolOutcome:
    """Parse and run, skipping the grant request (to reach ``run``'s own checks)."""
    tool, args = parse_call(ToolCall(id="call-1", name=name, arguments=arguments))
    return trio.run(tool.run, args, ctx)


def wait_until(predicate: Callable[[], object], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for: {what}")
        time.sleep(0.005)  # bounded poll of a condition, not synchronisation by sleeping
