"""The runtime's opt-in timing marks: a turn's line carries its marks and, per thread, the scheduling figures."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from ouroactors.runtime.execution import timing

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc schedstats")


@pytest.fixture
def timing_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Timing on in this process only (never through the environment: a forked system would inherit that)."""
    path = tmp_path / "marks.jsonl"
    monkeypatch.setattr(timing, "_PATH", str(path))
    monkeypatch.setattr(timing, "ENABLED", True)
    monkeypatch.setattr(timing, "_marks", [])
    monkeypatch.setattr(timing, "_sched_at", None)
    return path


def test_a_turn_line_carries_its_marks_and_the_turn_threads_time_on_a_cpu(timing_file: Path):
    timing.turn_begins()
    until = time.thread_time() + 0.02
    while time.thread_time() < until:  # 20 ms of this thread's CPU
        pass
    timing.mark("turn.flushed")
    timing.dump()
    [line] = [json.loads(x) for x in timing_file.read_text().splitlines()]
    assert [name for name, *_ in line["marks"]] == ["turn.begin", "turn.flushed"]
    (_, began_at, began_cpu), (_, ended_at, ended_cpu) = line["marks"]
    # CPU within wall, give or take the moment between a mark's two clock reads (CI saw CPU 1.2 µs over wall)
    assert ended_cpu - began_cpu >= 15_000_000 and ended_at - began_at >= ended_cpu - began_cpu - 1_000_000
    assert line["turn_thread"] == str(threading.get_native_id())
    run_ns, wait_ns = line["sched"][line["turn_thread"]]
    assert run_ns >= 15_000_000 and wait_ns >= 0  # what the loop above spent on a CPU, give or take the tick
    assert isinstance(line["minflt"], int) and line["minflt"] >= 0


def test_a_dump_without_a_turn_begin_has_marks_only(timing_file: Path):
    timing.mark("model.begin")
    timing.dump()
    [line] = [json.loads(x) for x in timing_file.read_text().splitlines()]
    assert "sched" not in line and [name for name, *_ in line["marks"]] == ["model.begin"]


def test_off_nothing_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(timing, "_PATH", str(tmp_path / "never"))
    monkeypatch.setattr(timing, "ENABLED", False)
    timing.turn_begins()
    timing.dump()
    assert not (tmp_path / "never").exists()


def _busy_turn_work() -> int:
    return sum(i * i for i in range(20_000))


def test_profiling_writes_one_profile_per_turn_of_the_turns_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import pstats

    monkeypatch.setattr(timing, "ENABLED", False)
    monkeypatch.setattr(timing, "_PROFILE_DIR", str(tmp_path))
    monkeypatch.setattr(timing, "_profile", None)
    monkeypatch.setattr(timing, "_profiled", 0)
    for _ in range(2):
        timing.turn_begins()
        _busy_turn_work()
        timing.dump()
    _busy_turn_work()  # between turns: not profiled
    files = sorted(p.name for p in tmp_path.iterdir())
    assert [name.split(".", 1)[1] for name in files] == ["1.prof", "2.prof"]
    for name in files:
        calls = {func[2]: stat[0] for func, stat in pstats.Stats(str(tmp_path / name)).stats.items()}
        assert calls["_busy_turn_work"] == 1


def test_the_turn_begins_after_the_snapshot_of_its_scheduling_figures(timing_file: Path,
                                                                       monkeypatch: pytest.MonkeyPatch):
    """Reading every thread's schedstat takes about 0.5 ms with a runtime's threads: taken after ``turn.begin`` it
    was charged to the turn's first records (the breakdown showed a turn start 0.5-1 ms slower than it is)."""
    read = timing._sched

    def slow_sched() -> dict[str, tuple[int, int]]:
        timing.mark("sched.read")
        return read()

    monkeypatch.setattr(timing, "_sched", slow_sched)
    timing.turn_begins()
    timing.mark("turn.staged")
    timing.dump()
    [line] = [json.loads(x) for x in timing_file.read_text().splitlines()]
    assert [name for name, *_ in line["marks"]] == ["sched.read", "turn.begin", "turn.staged"]
