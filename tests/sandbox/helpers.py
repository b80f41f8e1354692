"""Shared helpers for the sandbox tests: find processes by a unique marker, poll with a deadline."""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Callable

import pytest

BWRAP = shutil.which("bwrap")
needs_bwrap = pytest.mark.skipif(BWRAP is None,
                                 reason="bubblewrap (bwrap) is not installed: apt-get install bubblewrap")


def marker() -> str:
    """A unique ``sleep`` argument (``300.<digits>``) that identifies one process in the host's /proc."""
    return f"300.{uuid.uuid4().int % 10**12:012d}"


def pids_with(mark: str) -> list[int]:
    """Live (non-zombie) host processes running ``sleep <mark>`` itself (not bwrap or sh naming it)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
            if len(argv) >= 2 and os.path.basename(argv[0]) == b"sleep" and argv[1] == mark.encode():
                found.append(int(entry))
        except OSError:
            continue
    return found


def wait_until(predicate: Callable[[], object], what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for: {what}")
        time.sleep(0.01)
