"""Ledger benchmark: durable effects against the substrate's floors, measured in the same run.

    python -m benchmarks.bench_ledger [--quick] [--json FILE]

Rows (all on multiprocTCPBase, LMDB with sync=True on the data dir's filesystem):

* durable effect latency (record_started + record_settled, one session) vs two floors: two raw
  thespian asks plus two raw synced LMDB commits (goal ≤ 1.3×), and two raw synced commits alone
  (the physical floor; reported);
* records/s with 1, 8 and 32 concurrent sessions vs the rate at which the same number of senders
  get asks answered by one raw thespian actor (goal ≥ 0.8×), vs one-commit-per-record LMDB, and
  sqlite WAL synchronous=FULL as a reference line. Ours and raw are measured alternately several
  times (3 with --quick, else 5; which goes first alternates); the rows show the medians and the
  label the spread of the per-pair ratios — on a shared 2-core box single runs drift by ±30 %;
* records per synced commit (group commit) with 1, 8 and 32 sessions, from the ledger's status;
* batching several records into one thespian message (``RecordBatch``) against one per message.
"""

from __future__ import annotations

import math
import os
import sqlite3
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lmdb
from thespian.actors import ActorSystem as ThespianSystem

from ouroactors import ActorSystem, supervisor, worker
from ouroactors.authorities.ledger.actor import RecordBatch, RecordSettled, RecordStarted
from ouroactors.authorities.ledger.domain import StartRequest, fingerprint
from ouroactors.system import _patches

from ._actors import RawEcho
from ._common import Row, Stat, bench_main, free_port, progress

TREE = supervisor("agent", strategy="rest_for_one", children=[
    worker("storage", "ouroactors.authorities.storage.actor:Storage"),
    worker("ledger", "ouroactors.authorities.ledger.actor:Ledger"),
])
RECORD = b"x" * 400  # about the size of an encoded ledger entry


def request(tag: str, i: int) -> StartRequest:
    return StartRequest(effect_id=f"{tag}-{i}", kind="example", idempotency_key=f"{tag}-{i}",
                        fingerprint=fingerprint("example", {"i": i, "tag": tag}), principal=tag, session_id=tag)


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000.0


# -- floors ------------------------------------------------------------------------------------------


def raw_lmdb(path: Path) -> tuple[lmdb.Environment, Callable[[int], None]]:
    env = lmdb.open(str(path), map_size=1 << 30, sync=True, metasync=True, max_dbs=4)
    table = env.open_db(b"t")

    def commit(i: int) -> None:
        with env.begin(write=True, db=table) as txn:
            txn.put(i.to_bytes(8, "big"), RECORD)

    return env, commit


def sqlite_rate(path: Path, n: int) -> float:
    db = sqlite3.connect(str(path), isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v BLOB)")
    start = time.perf_counter()
    for i in range(n):
        db.execute("BEGIN")
        db.execute("INSERT INTO t VALUES (?, ?)", (i, RECORD))
        db.execute("COMMIT")
    rate = n / (time.perf_counter() - start)
    db.close()
    return rate


def concurrent_rate(make_sender: Callable[[int], Callable[[int], None]], senders: int, per_sender: int) -> float:
    """Operations per second when ``senders`` threads each run ``per_sender`` operations."""
    barrier = threading.Barrier(senders + 1)
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            op = make_sender(index)
            barrier.wait()
            for i in range(per_sender):
                op(i)
        except BaseException as exc:  # reported after the run
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(senders)]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    return senders * per_sender / elapsed


def private_asker(asys: Any, target: Any, message: Callable[[int], Any], stop: list[Any]) -> Callable[[int], None]:
    context = asys.private()
    endpoint = context.__enter__()
    stop.append(context)

    def op(i: int) -> None:
        answer = endpoint.ask(target, message(i), 30)
        if answer is None or isinstance(answer, BaseException):
            raise RuntimeError(f"bad answer {answer!r}")

    return op


def ledger_run(system: ActorSystem, ledger: Any, tag: str, senders: int, count: int,
               contexts: list[Any]) -> Callable[[], float]:
    """Records/s when ``senders`` sessions each record ``count`` effects, one ask each."""
    def run() -> float:
        return concurrent_rate(lambda k: private_asker(
            system._thespian, ledger.address, lambda i: RecordStarted(request(f"{tag}-{k}", i)), contexts),
            senders, count)
    return run


def echo_run(raw: Any, echo: Any, senders: int, count: int, contexts: list[Any],
             payload: Callable[[int], Any] = lambda i: i) -> Callable[[], float]:
    """Asks/s answered by one raw thespian actor, with the same senders (asking ``payload(i)``)."""
    def run() -> float:
        return concurrent_rate(lambda k: private_asker(raw, echo, payload, contexts), senders, count)
    return run


# -- the run -----------------------------------------------------------------------------------------


def run(quick: bool) -> list[Row]:
    rows: list[Row] = []
    n_latency = 100 if quick else 400
    per_sender = {1: 100, 8: 25, 32: 8} if quick else {1: 400, 8: 100, 32: 40}
    repeats = 3 if quick else 5
    commits: list[Row] = []
    work = Path(tempfile.mkdtemp(prefix="bench-ledger-"))
    _patches.install()
    os.environ["OUROACTORS_BIND_HOST"] = os.environ["THESPIAN_BASE_IPADDR"] = "127.0.0.1"
    os.environ.setdefault("THESPLOG_FILE", str(work / "thespian.log"))

    raw = ThespianSystem("multiprocTCPBase", {"Admin Port": free_port()}, transientUnique=True)
    system = ActorSystem.start("multiproc", work / "data")
    env, commit = raw_lmdb(work / "raw-lmdb")
    try:
        echo = raw.createActor(RawEcho)
        raw.ask(echo, "warm", 10)
        system.start_tree(TREE)
        ledger = system.ref("agent/ledger")
        for i in range(20):  # warm-up
            ledger.ask(RecordStarted(request("warm", i)))
            ledger.ask(RecordSettled(f"warm-{i}", "ok"))

        progress("durable effect latency")
        ours, floor, physical = Stat(), Stat(), Stat()
        for i in range(n_latency):
            req = request("lat", i)
            ours.samples.append(timed(lambda req=req, i=i: (ledger.ask(RecordStarted(req)),
                                                               ledger.ask(RecordSettled(f"lat-{i}", "ok")))))
            floor.samples.append(timed(lambda i=i: (raw.ask(echo, i, 10), commit(2 * i),
                                                    raw.ask(echo, i, 10), commit(2 * i + 1))))
            physical.samples.append(timed(lambda i=i: (commit(10**6 + 2 * i), commit(10**6 + 2 * i + 1))))
        rows.append(Row("effect", "started+settled, 1 session", "ms", ours, floor, "≤ 1.3×",
                        lambda _o, r: r <= 1.3, "floor: 2 raw asks + 2 raw synced commits"))
        rows.append(Row("effect", "vs physical floor", "ms", ours, physical, "report", None,
                        "floor: 2 raw synced commits, no actor hop"))

        progress("throughput")
        lmdb_rate = 300 / (sum(timed(lambda i=i: commit(2 * 10**6 + i)) for i in range(300)) / 1000)
        sqlite = sqlite_rate(work / "ref.sqlite", 300)
        for senders, count in per_sender.items():
            ours_rates: list[float] = []
            raw_rates: list[float] = []
            same_payload: list[float] = []
            per_commit: list[float] = []
            for rep in range(repeats):  # ours and raw alternate, first one then the other, against drift
                contexts: list[Any] = []
                ours_run = ledger_run(system, ledger, f"s{senders}r{rep}", senders, count, contexts)
                raw_run = echo_run(raw, echo, senders, count, contexts)
                record_run = echo_run(raw, echo, senders, count, contexts,
                                      lambda i, rep=rep: RecordStarted(request(f"echo{rep}", i)))
                before = ledger.ask("status").get("group_commit")
                if rep % 2 == 0:
                    ours_rates.append(ours_run())
                    raw_rates.append(raw_run())
                else:
                    raw_rates.append(raw_run())
                    ours_rates.append(ours_run())
                same_payload.append(record_run())
                after = ledger.ask("status").get("group_commit")
                if before and after:  # (a ledger that does not count its commits: not shown)
                    per_commit.append((after["records"] - before["records"])
                                      / max(1, after["transactions"] - before["transactions"]))
                for context in contexts:
                    context.__exit__(None, None, None)
            ours_rate, raw_rate = statistics.median(ours_rates), statistics.median(raw_rates)
            ratios = sorted(o / r for o, r in zip(ours_rates, raw_rates, strict=True))
            spread = f"{repeats} runs, ratio {ratios[0]:.2f}–{ratios[-1]:.2f}"
            rows.append(Row("records/s", f"{senders} session(s) vs raw asks ({spread})", "rec/s", ours_rate,
                            raw_rate, "≥ 0.8×", lambda _o, r: r >= 0.8,
                            "baseline: same senders asking a raw actor, same run; medians of alternating runs"))
            rows.append(Row("records/s", f"{senders} session(s) vs raw asks of a ledger record", "rec/s", ours_rate,
                            statistics.median(same_payload), "report", None,
                            "baseline: the raw actor echoes the same RecordStarted: what storage and the ledger add"))
            rows.append(Row("records/s", f"{senders} session(s) vs 1 commit/record", "rec/s", ours_rate,
                            lmdb_rate, "report", None, "baseline: raw LMDB, one synced commit per record"))
            commits.append(Row("batching", f"records per commit, {senders} session(s)", "rec/txn",
                               statistics.median(per_commit) if per_commit else math.nan, None, "report", None,
                               "group commit: records per synced transaction (median of the runs)"))
        rows.append(Row("records/s", "sqlite WAL FULL, 1 insert/commit", "rec/s", sqlite, lmdb_rate, "reference",
                        None, "ratio: sqlite / raw LMDB"))
        rows.extend(commits)

        progress("batching")
        batch = 20
        loops = 10 if quick else 40
        batched = loops * batch / (sum(
            timed(lambda j=j: ledger.ask(RecordBatch(tuple(RecordStarted(request(f"b{j}", i)) for i in range(batch)))))
            for j in range(loops)) / 1000)
        single = loops * batch / (sum(
            timed(lambda j=j, i=i: ledger.ask(RecordStarted(request(f"u{j}", i))))
            for j in range(loops) for i in range(batch)) / 1000)
        rows.append(Row("batching", f"{batch} records per message vs 1", "rec/s", batched, single, "report", None,
                        "RecordBatch: one thespian message, one commit"))
    finally:
        env.close()
        system.shutdown()
        raw.shutdown()
    return rows


def main() -> None:
    bench_main(run, "ouroactors ledger vs thespian + LMDB floors (same run, multiprocTCPBase)", __doc__)


if __name__ == "__main__":
    main()
