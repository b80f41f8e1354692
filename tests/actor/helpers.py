"""Shared helpers for tests that run real actor systems."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from ouroactors.core.procs import pid_alive as pid_alive

ECHO = "ouroactors.examples.workers:Echo"
COUNTER = "ouroactors.examples.workers:Counter"
RECORDER = "ouroactors.examples.workers:Recorder"
SLOW_STOP = "ouroactors.examples.workers:SlowStop"
AUTHORITY = "ouroactors.examples.workers:Authority"
FAILING_START = "ouroactors.examples.workers:FailingStart"
FLAGGED = "ouroactors.examples.workers:FailsWhenFlagged"


def wait_until(condition: Any, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.005)  # bounded polling of an external fact, not synchronisation


def read_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def children_pids_of(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append(int(entry))
    return out
