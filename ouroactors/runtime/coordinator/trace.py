"""Publication trace marks, off unless ``OUROACTORS_PUBTRACE`` names a file (a benchmark's diagnosis only).

Each mark appends one line ``<perf_counter_ns> <pid> <name> <detail>`` to that file. ``perf_counter_ns`` is
CLOCK_MONOTONIC on Linux, one clock for every process of the machine, so the marks of the runtime, the
coordinator and a subscriber line up. With the variable unset a mark is one global read and a return.
"""

from __future__ import annotations

import os
import time

_PATH = os.environ.get("OUROACTORS_PUBTRACE") or None


def mark(name: str, detail: object = "") -> None:
    if _PATH is None:
        return
    line = f"{time.perf_counter_ns()} {os.getpid()} {name} {detail}\n".encode()
    fd = os.open(_PATH, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


__all__ = ["mark"]
