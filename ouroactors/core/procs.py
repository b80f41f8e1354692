"""Facts about local processes, read from ``/proc`` (Linux)."""

from __future__ import annotations

import functools


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
