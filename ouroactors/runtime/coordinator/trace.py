"""Publication trace marks, off unless ``OUROACTORS_PUBTRACE`` names a file (a benchmark's diagnosis only).

Each mark appends one line ``<perf_counter_ns> <pid> <name> <detail>`` to that file. ``perf_counter_ns`` is
CLOCK_MONOTONIC on Linux, one clock for every process of the machine, so the marks of the runtime, the
coordinator and a subscriber line up. With the variable unset a mark is one global read and a return.

Besides publication, a session's start is marked (``start.*``, in order): the directory asks for and gets the
session's coordinator (at creation, or at a command when none runs), the coordinator receives the message and its
resume event is committed, it asks for and gets a runtime, the lease is kept, the runtime receives the open and the
coordinator its answer, the runtime receives the text. ``benchmarks/bench_peers.py --breakdown`` prints the spans.
"""

from __future__ import annotations

import os
import time

_PATH = os.environ.get("OUROACTORS_PUBTRACE") or None


def enable(path: str) -> None:
    """Turn the marks on in this process and in the processes it forks or starts from now on (a benchmark's
    switch: an actor process is forked, and inherits this module as it is)."""
    global _PATH
    os.environ["OUROACTORS_PUBTRACE"] = path
    _PATH = path


def mark(name: str, detail: object = "") -> None:
    if _PATH is None:
        return
    line = f"{time.perf_counter_ns()} {os.getpid()} {name} {detail}\n".encode()
    fd = os.open(_PATH, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


__all__ = ["enable", "mark"]
