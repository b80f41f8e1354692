"""bench_effect_path measures the path a live runtime runs: each call is decided, started and settled in the ledger,
and its model turn's records and its result ride in the journal (which verifies); the raw baseline commits."""

from __future__ import annotations

from pathlib import Path

import trio

from benchmarks import bench_effect_path
from ouroactors.authorities.ledger.domain import Status
from ouroactors.runtime.execution import reading


def test_each_call_is_recorded_as_the_runtime_records_it(tmp_path: Path) -> None:
    path = bench_effect_path._Path(tmp_path)
    try:
        async def calls() -> list[float]:
            return [await path.one(bench_effect_path._NoopShell()), await path.one(bench_effect_path.ShellTool())]

        took = trio.run(calls)
        assert all(t > 0 for t in took)
        env = path.journal.env
        for call in ("c1", "c2"):
            entry = path.store.get(f"{bench_effect_path.SESSION}/t1/{call}")
            assert entry is not None and entry.status is Status.OK
            assert entry.grant is not None and entry.grant.startswith("permission-")  # the decision rode with it
        kinds = [r.kind for r in reading.records(env, bench_effect_path.SESSION)]
        assert kinds == ["model_result", "tool_call", "tool_result"] * 2
        assert reading.verify(env, bench_effect_path.SESSION).ok
    finally:
        path.close()


def test_the_raw_baseline_commits_two_records_per_sample(tmp_path: Path) -> None:
    raw = bench_effect_path._Raw(tmp_path / "raw")
    try:
        raw.two()
        raw.two()
        with raw.env.begin() as txn:
            assert txn.stat()["entries"] == 4
    finally:
        raw.close()


def test_parts_time_the_path_and_put_every_function_back(tmp_path: Path) -> None:
    """``--parts``: every part is timed on the path (each call decides once, submits twice, commits twice), and the
    wrapped functions are the originals again once the pass is over."""
    from benchmarks import _effect_parts as parts
    from ouroactors.authorities.ledger import store
    from ouroactors.authorities.storage import commit

    originals = [getattr(owner, name) for owner, name, _ in parts.PARTS] + [store.write, commit.write]
    path = bench_effect_path._Path(tmp_path)
    try:
        async def calls() -> None:
            for _ in range(3):
                await path.one(bench_effect_path._NoopShell())

        with parts.timed_parts() as spent:
            trio.run(calls)
        found = {label: count for label, _, count in parts.means_us(spent, 3)}
        assert found[parts.COMMIT] == 6 and len(found) == len(parts.PARTS) + 1, found
        assert found["inline grants decision (policy read, rules evaluated)"] == 3
        assert found["ledger submit: start or settlement, commit included"] == 6
    finally:
        path.close()
    assert [getattr(owner, name) for owner, name, _ in parts.PARTS] + [store.write, commit.write] == originals
