"""Journal benchmark: appends (LMDB vs a file per session vs a raw synced put), riding in another writer's
transaction, verify records/s, and replay of a 100-turn scripted session.

    python -m benchmarks.bench_journal [--quick] [--json FILE]

Everything on the data dir's filesystem (ext4 here; never tmpfs), LMDB with sync=True. Rows:

* **append p50**, one ~300-byte ``tool_result`` record per synced commit: ``Journal.append`` (stage + one commit:
  the head read, the record, its witness, the head) against one raw synced LMDB put of the same stored bytes, and
  against a file per session (``O_APPEND`` write + ``fdatasync``: the alternative design). The three are sampled
  interleaved in one loop, so drift hits all equally;
* **riding in a ledger transaction**: a transaction that puts one ~500-byte "ledger" record, with and without the
  journal's two records of that step (``tool_call`` + ``tool_result`` staged, then ``put_staged`` inside it) — the
  marginal cost of journaling when it costs no commit of its own (the choice that keeps a tool call at two synced
  commits);
* **verify** records/s over a session of 50k (20k with --quick) records (goal ≥ 200k/s);
* **replay** of a 100-turn scripted session (a tool call and an answer per turn: 200 model calls) through the
  loop (goal ≤ 1 s).

Why LMDB and not a file: an append costs about the same either way (one synced commit ≈ one or two flushes), but
only LMDB lets the records ride inside the ledger's transactions, adding no flush at all to a tool call; a file
adds its own ``fdatasync`` per flush point and cannot be atomic with the ledger.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import lmdb
import trio

from ouroactors.authorities.storage import commit
from ouroactors.authorities.storage.env import StorageConfig, close_env, db, open_env
from ouroactors.core.codec import encode
from ouroactors.runtime.execution import chain, reading
from ouroactors.runtime.execution.chain import JournalEntry
from ouroactors.runtime.execution.journal import Journal
from ouroactors.runtime.execution.replay import replay

from ._common import Row, Stat, bench_main, progress

FIELDS = {"call_id": "call_0001", "name": "read", "status": "ok", "output": "x" * 180, "truncated": False,
          "error": None, "error_kind": None, "evidence": {"sha256": "ab" * 16}, "boundary": None}


def _record_bytes() -> bytes:
    body = encode(JournalEntry(at=time.time_ns(), turn=1, kind="tool_result", fields=FIELDS))
    return chain.seal(bytes(32), 1, body)[1]


def appends(root: Path, n: int) -> list[Row]:
    config = StorageConfig.under(root / "append")
    env = open_env(config)
    try:
        journal = Journal(env, "bench")
        raw = env.open_db(b"raw_bench")
        value = _record_bytes()
        fd = os.open(root / "session.journal", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        ours, base, file_ = Stat(), Stat(), Stat()
        for i in range(n):
            t0 = time.perf_counter()
            result = journal.append("tool_result", FIELDS, turn=1, at=i)
            t1 = time.perf_counter()
            with env.begin(write=True, db=raw) as txn:
                txn.put(i.to_bytes(8, "big"), value, append=True)
            t2 = time.perf_counter()
            os.write(fd, value)
            os.fdatasync(fd)
            t3 = time.perf_counter()
            assert result.committed
            ours.samples.append((t1 - t0) * 1e3)
            base.samples.append((t2 - t1) * 1e3)
            file_.samples.append((t3 - t2) * 1e3)
        os.close(fd)
        # riding: a "ledger" transaction with and without the journal's records of the step
        ledger = db(env, b"ledger")
        entry = os.urandom(500)
        with_journal, without = Stat(), Stat()
        for i in range(n):
            journal.stage("tool_call", {"call_id": f"c{i}", "name": "read", "arguments": {"path": "x"},
                                        "valid": True}, turn=2, at=i)
            journal.stage("tool_result", FIELDS, turn=2, at=i)
            holder: list[object] = []

            def put_both(txn: lmdb.Transaction, i: int = i, holder: list[object] = holder) -> None:
                txn.put(f"effect-{i:08d}".encode(), entry, db=ledger)
                holder.append(journal.put_staged(txn))

            def put_ledger(txn: lmdb.Transaction, i: int = i) -> None:
                txn.put(f"effect-x{i:08d}".encode(), entry, db=ledger)

            t0 = time.perf_counter()
            outcome = commit.write(env, put_both)
            t1 = time.perf_counter()
            commit.write(env, put_ledger)
            t2 = time.perf_counter()
            journal.settle_staged(holder[0], outcome)  # type: ignore[arg-type]
            with_journal.samples.append((t1 - t0) * 1e3)
            without.samples.append((t2 - t1) * 1e3)
        assert reading.verify(env, "bench").ok
    finally:
        close_env(config)
    return [
        Row("append", "journal append (1 record, 1 synced commit) vs raw synced put", "ms", ours, base,
            goal="≤ 1.5×", check=lambda _p50, ratio: ratio <= 1.5,
            note="LMDB journal: head read + record + witness + head in one txn; raw: one put of the same bytes"),
        Row("append", "file per session (O_APPEND write + fdatasync) vs raw synced put", "ms", file_, base,
            note="the alternative design, for the record"),
        Row("append", "ledger txn + journal's 2 records vs ledger txn alone", "ms", with_journal, without,
            goal="≤ 1.25×", check=lambda _p50, ratio: ratio <= 1.25,
            note="the records ride in the ledger's transaction: no commit of their own"),
    ]


def verify_rate(root: Path, n: int) -> list[Row]:
    config = StorageConfig.under(root / "verify")
    env = open_env(config)
    try:
        journal = Journal(env, "bench")
        for i in range(n):
            journal.stage("tool_result", FIELDS, turn=i // 10, at=i)
            if i % 1000 == 999:
                journal.flush()
        journal.flush()
        rates = []
        for _ in range(3):
            t0 = time.perf_counter()
            verdict = reading.verify(env, "bench")
            rates.append(verdict.records / (time.perf_counter() - t0))
            assert verdict.ok and verdict.records == n
    finally:
        close_env(config)
    rates.sort()
    return [Row("verify", f"verify records/s ({n} records, median of 3)", "rec/s", rates[1], None,
                goal="≥ 200,000", check=lambda p50, _r: p50 >= 200_000)]


def replay_time(root: Path) -> list[Row]:
    from tests.execution.loop_support import call, make_session, text, usage  # the suite's scripted harness

    config = StorageConfig.under(root / "replay")
    env = open_env(config)
    try:
        turns = []
        for i in range(100):
            turns.append([call(f"r{i}", "read", path=f"f{i}.txt"), usage(10, 5)])
            turns.append([text(f"answer {i}"), usage(10, 5)])
        h = make_session(env, "bench", turns, config='[sandbox]\nmode = "none"\n[limits]\nmax_tokens = 100000000')
        t0 = time.perf_counter()
        for i in range(100):
            trio.run(h.loop.run_turn, f"question {i}")
        recorded = time.perf_counter() - t0
        samples = Stat()
        for _ in range(3):
            t0 = time.perf_counter()
            report = replay(env, "bench")
            samples.samples.append(time.perf_counter() - t0)
            assert report.ok and report.verified_turns == 100
    finally:
        close_env(config)
    return [Row("replay", "replay of a 100-turn scripted session vs recording it live", "s", samples, recorded,
                goal="≤ 1 s", check=lambda p50, _r: p50 <= 1.0,
                note="live: scripted model, fake effects, real journal (3 synced commits per turn)")]


def restore_time(root: Path, n: int) -> list[Row]:
    """What a session's open pays to rebuild its loop (``Runtime._restore``) once the session has ``n`` turns: from a
    conversation snapshot :data:`~.snapshots.REPLAY_BEFORE_SNAPSHOT` turns back (checked against the journal, then
    those turns replayed: the most an open replays) vs the whole journal replayed (no snapshot)."""
    from functools import partial

    from ouroactors.runtime.execution import snapshot_rider, snapshots
    from ouroactors.runtime.execution.replay import replay_session
    from tests.execution.loop_support import call, make_session, text, usage

    config = StorageConfig.under(root / "restore")
    env = open_env(config)
    back = snapshots.REPLAY_BEFORE_SNAPSHOT
    try:
        turns = []
        for i in range(n):
            turns.append([call(f"r{i}", "read", path=f"f{i}.txt"), usage(10, 5)])
            turns.append([text(f"answer {i}"), usage(10, 5)])
        h = make_session(env, "bench", turns, config='[sandbox]\nmode = "none"\n[limits]\nmax_tokens = 100000000')
        for i in range(n):
            if i == n - back:  # the snapshot an open leaves, `back` turns before the head
                report = replay(env, "bench")
                assert report.state is not None and report.settled_at is not None
                assert snapshot_rider.save(env, "bench", *report.settled_at, report.state,
                                           report.opened or {}) is None
            trio.run(h.loop.run_turn, f"question {i}")
        whole, snapped = Stat(), Stat()
        for _ in range(3):
            t0 = time.perf_counter()
            report = trio.run(partial(replay_session, env, "bench"))
            whole.samples.append((time.perf_counter() - t0) * 1e3)
            assert report.ok and report.verified_turns == n
            t0 = time.perf_counter()
            start, refused = snapshots.offered(env, "bench", 0)
            report = trio.run(partial(replay_session, env, "bench", start=start))
            snapped.samples.append((time.perf_counter() - t0) * 1e3)
            assert refused is None and report.snapshot_refused is None and report.verified_turns == back
    finally:
        close_env(config)
    return [Row("restore", f"an open's restore of a {n}-turn session: from a snapshot {back} turns back vs the whole "
                "journal replayed", "ms", snapped, whole, note="1 tool call + answer per turn; the snapshot is "
                "checked against the chain and the settled turn's conversation digest")]


def run(quick: bool) -> list[Row]:
    root = Path(tempfile.mkdtemp(prefix=".bench-journal-", dir="."))
    try:
        progress("appends")
        rows = appends(root, 300 if quick else 2000)
        progress("verify")
        rows += verify_rate(root, 20_000 if quick else 50_000)
        progress("replay")
        rows += replay_time(root)
        progress("restore")
        rows += restore_time(root, 200 if quick else 400)
        return rows
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    bench_main(run, "journal: appends, verify, replay", __doc__)
