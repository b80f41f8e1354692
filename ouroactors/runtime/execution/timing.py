"""Opt-in timing marks for the runtime's hot path (off unless ``OUROACTORS_RUNTIME_TIMING`` names a file).

Used to find where a tool call's time goes inside the runtime process (``benchmarks/bench_runtime.py --breakdown``
sets the variable). Off, a mark costs one global lookup and a branch; on, marks are ``(name, perf_counter_ns,
thread_time_ns)`` triples — when, and how much CPU the marking thread had used by then, so a part between two marks
of one thread says how much of its time was that thread's own work and how much waiting (a disk flush, a child
process, a CPU another thread held) — kept in memory and appended to the file (one JSON line per turn) by
:func:`dump`. Never left on in production: the variable is read once, at import.

**Scheduling.** A mark says when, not why a part took long: on a box with two cores, the runtime's turn thread
often waits for a CPU rather than for anything it asked. So :func:`turn_begins` also snapshots, per thread of the
process, the kernel's ``schedstat`` (ns spent on a CPU, ns spent runnable but waiting for one) and the process's
minor page faults, and :func:`dump` writes each thread's difference since then with the line (``sched``: thread
id → ``[cpu_ns, wait_ns]``; ``turn_thread``: the id of the thread that ran the turn; ``minflt``). Linux only; a
missing ``/proc`` leaves them out.

**Profiling.** ``OUROACTORS_RUNTIME_PROFILE`` naming a directory runs each turn's thread under :mod:`cProfile`
from :func:`turn_begins` to :func:`dump`, and writes the turn's statistics to ``<dir>/<pid>.<n>.prof`` (the
process's n-th turn; read them with :mod:`pstats`, which can add them up). A sampling profiler attached from
outside perturbs a 3 ms step more than it measures, and the runtime's process is forked by the actor system, out
of reach of a wrapper; this is the profile of the turn's own thread only.
"""

from __future__ import annotations

import contextlib
import cProfile
import json
import os
import resource
import threading
import time
from collections.abc import Iterator

ENV = "OUROACTORS_RUNTIME_TIMING"
_PATH = os.environ.get(ENV) or None
ENABLED = _PATH is not None
_marks: list[tuple[str, int, int]] = []
_lock = threading.Lock()
PROFILE_ENV = "OUROACTORS_RUNTIME_PROFILE"
_PROFILE_DIR = os.environ.get(PROFILE_ENV) or None
_profile: cProfile.Profile | None = None
_profiled = 0  # turns profiled in this process
_sched_at: tuple[dict[str, tuple[int, int]], int] | None = None  # per-thread schedstat and minflt at turn_begins


def enable(path: str) -> None:
    """Turn timing on in this process and in the processes it forks from now on (a benchmark's own switch)."""
    global _PATH, ENABLED
    os.environ[ENV] = path
    _PATH, ENABLED = path, True


def disable() -> None:
    """Turn timing off again in this process and in the processes it forks from now on (undoes :func:`enable`)."""
    global _PATH, ENABLED
    os.environ.pop(ENV, None)
    _PATH, ENABLED = None, False


@contextlib.contextmanager
def suspended() -> Iterator[None]:
    """No marks and no profile while the block runs: a turn that is not the session's (a spare's rehearsal)."""
    global ENABLED, _PROFILE_DIR
    saved = ENABLED, _PROFILE_DIR
    ENABLED, _PROFILE_DIR = False, None
    try:
        yield
    finally:
        ENABLED, _PROFILE_DIR = saved


def mark(name: str) -> None:
    """Record that ``name`` happened now (a no-op unless timing is enabled)."""
    if ENABLED:
        with _lock:
            _marks.append((name, time.perf_counter_ns(), time.thread_time_ns()))


def _sched() -> dict[str, tuple[int, int]]:
    """Per thread of this process: (ns on a CPU, ns runnable and waiting for one), from ``/proc``."""
    found: dict[str, tuple[int, int]] = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return found
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/schedstat", encoding="ascii") as fh:
                run_ns, wait_ns = fh.read().split()[:2]
            found[tid] = (int(run_ns), int(wait_ns))
        except (OSError, ValueError):  # the thread ended meanwhile, or no schedstats in this kernel
            continue
    return found


def turn_begins() -> None:
    """Mark ``turn.begin`` and snapshot the process's scheduling figures (see the module docstring)."""
    global _sched_at, _profile
    if _PROFILE_DIR is not None and _profile is None:
        _profile = cProfile.Profile()
        _profile.enable()
    if ENABLED:  # the snapshot first: reading every thread's schedstat takes ~0.5 ms, which is not the turn's
        _sched_at = (_sched(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt)
        mark("turn.begin")


def dump() -> None:
    """Append the marks taken since the last dump to the timing file, as one JSON line (no-op when off)."""
    global _sched_at, _profile
    if _profile is not None:
        _profile.disable()
        _add_profile(_profile)
        _profile = None
    if not ENABLED or _PATH is None:
        return
    with _lock:
        taken = list(_marks)
        _marks.clear()
    line: dict[str, object] = {"pid": os.getpid(), "marks": taken}
    if _sched_at is not None:
        before, minflt = _sched_at
        _sched_at = None
        line["sched"] = {tid: [run - before.get(tid, (0, 0))[0], wait - before.get(tid, (0, 0))[1]]
                         for tid, (run, wait) in _sched().items()}
        line["turn_thread"] = str(threading.get_native_id())
        line["minflt"] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - minflt
    with open(_PATH, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")


def _add_profile(profile: cProfile.Profile) -> None:
    """Write one turn's profile to its own file (see the module docstring)."""
    global _profiled
    assert _PROFILE_DIR is not None
    _profiled += 1
    profile.dump_stats(os.path.join(_PROFILE_DIR, f"{os.getpid()}.{_profiled}.prof"))
