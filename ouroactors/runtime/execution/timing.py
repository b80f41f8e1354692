"""Opt-in timing marks for the runtime's hot path (off unless ``OUROACTORS_RUNTIME_TIMING`` names a file).

Used to find where a tool call's time goes inside the runtime process (``benchmarks/bench_runtime.py --breakdown``
sets the variable). Off, a mark costs one global lookup and a branch; on, marks are ``(name, perf_counter_ns)``
pairs kept in memory and appended to the file (one JSON line per turn) by :func:`dump`. Never left on in
production: the variable is read once, at import.
"""

from __future__ import annotations

import json
import os
import threading
import time

ENV = "OUROACTORS_RUNTIME_TIMING"
_PATH = os.environ.get(ENV) or None
ENABLED = _PATH is not None
_marks: list[tuple[str, int]] = []
_lock = threading.Lock()


def enable(path: str) -> None:
    """Turn timing on in this process and in the processes it forks from now on (a benchmark's own switch)."""
    global _PATH, ENABLED
    os.environ[ENV] = path
    _PATH, ENABLED = path, True


def mark(name: str) -> None:
    """Record that ``name`` happened now (a no-op unless timing is enabled)."""
    if ENABLED:
        with _lock:
            _marks.append((name, time.perf_counter_ns()))


def dump() -> None:
    """Append the marks taken since the last dump to the timing file, as one JSON line (no-op when off)."""
    if not ENABLED or _PATH is None:
        return
    with _lock:
        taken = list(_marks)
        _marks.clear()
    with open(_PATH, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"pid": os.getpid(), "marks": taken}) + "\n")
