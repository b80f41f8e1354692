"""Ledger benchmark: durable effects against the substrate's floors, measured in the same run.

    python -m benchmarks.bench_ledger [--quick] [--json FILE]

Two topologies record the same entries (all on multiprocTCPBase, LMDB with sync=True on the data
dir's filesystem): a **direct writer** (``LedgerWriter``: the caller's own process writes into the
node's environment) and the **ledger actor** (one thespian ask per message). Rows:

* durable effect latency (record_started + record_settled, one session), direct writer and via the
  ledger actor, vs two floors: two raw thespian asks plus two raw synced LMDB commits (goal ≤ 1.3×
  for the direct writer), and two raw synced commits alone (the physical floor; reported). The four
  are sampled interleaved in one loop, so drift hits all equally;
* records/s with 1, 8 and 32 concurrent sessions (threads: sharing one direct writer, or each asking
  the ledger actor) vs the rate at which the same number of senders get asks answered by one raw
  thespian actor (goal ≥ 0.8× for the direct writer; the actor's rows are reported), also vs raw
  asks carrying a ledger record, vs one-commit-per-record LMDB, and sqlite WAL synchronous=FULL as a
  reference line. Direct, raw and actor runs are measured alternately several times (3 with
  --quick, else 5; the order reverses every repetition); the rows show the medians and the label
  the spread of the per-pair ratios — on a shared 2-core box single runs drift by ±30 %;
* records per synced commit (group commit) with 1, 8 and 32 sessions, from the direct writer's
  counters and from the ledger's status;
* batching several records into one thespian message (``RecordBatch``) against one per message;
* 8 sessions as 8 spawned processes, each with its own direct writer (watched), recording starts
  after a shared barrier (start-up not timed), vs raw asks from 8 sender threads (reported). There
  is no group commit across processes: LMDB runs their transactions one at a time.

Why the direct shape is the chosen one for the effect path: an ask between processes costs more
than the synced commit behind it, so the actor's hop is most of an effect's latency. DESIGN.md's
third storage shape removes it — the consumer writes from its own process and is fenced by the
transaction (the storage and ledger generations are checked inside each write transaction), not by
a message — which leaves a durable effect with the physical floor's shape: two synced commits, no
hop (each a little dearer than the floor's one-put commit: the entry, its index and the fence), and
threads sharing a writer share commits. The ledger actor stays for remote callers and
``RecordBatch``; its rows are kept for them.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import queue
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
from ouroactors.authorities.asking import StampedRef
from ouroactors.authorities.ledger.actor import RecordBatch, RecordSettled, RecordStarted
from ouroactors.authorities.ledger.direct import LedgerWriter
from ouroactors.authorities.ledger.domain import StartRequest, fingerprint
from ouroactors.authorities.ledger.messages import LedgerAnswer
from ouroactors.authorities.storage.env import StorageConfig, close_env
from ouroactors.supervision.protocol import Stamped
from ouroactors.system import _patches

from ._actors import RawEcho
from ._common import Row, Stat, bench_main, free_port, progress
from ._direct_children import record_starts

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
            system._thespian, ledger.ref.address,
            lambda i: Stamped(ledger.generation, RecordStarted(request(f"{tag}-{k}", i))), contexts),
            senders, count)
    return run


def echo_run(raw: Any, echo: Any, senders: int, count: int, contexts: list[Any],
             payload: Callable[[int], Any] = lambda i: i) -> Callable[[], float]:
    """Asks/s answered by one raw thespian actor, with the same senders (asking ``payload(i)``)."""
    def run() -> float:
        return concurrent_rate(lambda k: private_asker(raw, echo, payload, contexts), senders, count)
    return run


# -- the direct writer ---------------------------------------------------------------------------------


def answered(answer: Any) -> None:
    """A direct writer returns its errors (as the actor answers them): make them fail the run."""
    if not (isinstance(answer, LedgerAnswer) and answer.answer == "created"):
        raise RuntimeError(f"bad answer {answer!r}")


def direct_effect(writer: LedgerWriter, req: StartRequest) -> tuple[Any, Any]:
    return writer.record_started(req), writer.record_settled(req.effect_id, "ok")


def direct_run(writer: LedgerWriter, tag: str, senders: int, count: int) -> Callable[[], float]:
    """Records/s when ``senders`` threads sharing ``writer`` each record ``count`` effects."""
    def sender(k: int) -> Callable[[int], None]:
        return lambda i: answered(writer.record_started(request(f"{tag}-{k}", i)))

    def run() -> float:
        return concurrent_rate(sender, senders, count)
    return run


class WriterProcesses:
    """``n`` spawned processes, each with its own direct writer, recording ``count`` starts per round.

    Spawned, not forked: this process has the environment open. Each round starts when the children
    and this process pass one barrier (so start-up is not timed) and ends when all have reported.
    """

    START_TIMEOUT_S = 120.0  # the first round waits for 8 interpreters to start on 2 cores

    def __init__(self, data_dir: str, n: int, count: int, rounds: int, tag: str) -> None:
        context = multiprocessing.get_context("spawn")
        self.n, self.count = n, count
        self.barrier = context.Barrier(n + 1)
        self.done = context.Queue()
        self.procs = [context.Process(target=record_starts, name=f"ledger-writer-{k}", daemon=True,
                                      args=(data_dir, k, tag, count, rounds, self.barrier, self.done))
                      for k in range(n)]
        self.started: list[Any] = []
        try:
            for proc in self.procs:
                proc.start()
                self.started.append(proc)
        except BaseException:
            self.close()
            raise

    def run(self) -> float:
        try:
            self.barrier.wait(self.START_TIMEOUT_S)
        except threading.BrokenBarrierError:  # a child failed (it says why) or start-up timed out
            try:
                error = self.done.get(timeout=5)[2]
            except queue.Empty:
                raise RuntimeError(f"the writer processes did not start within {self.START_TIMEOUT_S:.0f} s") from None
            raise RuntimeError(error) from None
        start = time.perf_counter()
        for _ in range(self.n):
            _index, _round, error, _transactions, _records = self.done.get(timeout=self.START_TIMEOUT_S)
            if error is not None:
                raise RuntimeError(error)
        return self.n * self.count / (time.perf_counter() - start)

    def close(self) -> None:
        self.barrier.abort()  # children still waiting for a round (this run failed) stop
        for proc in self.started:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join(5)
        self.done.close()
        self.done.cancel_join_thread()


# -- the run -----------------------------------------------------------------------------------------


def run(quick: bool) -> list[Row]:
    rows: list[Row] = []
    n_latency = 100 if quick else 400
    per_sender = {1: 100, 8: 25, 32: 8} if quick else {1: 400, 8: 100, 32: 40}
    repeats = 3 if quick else 5
    per_process = 25 if quick else 100
    commits: list[Row] = []
    work = Path(tempfile.mkdtemp(prefix="bench-ledger-"))
    _patches.install()
    os.environ["OUROACTORS_BIND_HOST"] = os.environ["THESPIAN_BASE_IPADDR"] = "127.0.0.1"
    os.environ.setdefault("THESPLOG_FILE", str(work / "thespian.log"))

    raw = ThespianSystem("multiprocTCPBase", {"Admin Port": free_port()}, transientUnique=True)
    system = ActorSystem.start("multiproc", work / "data")
    data_dir = system.context.data_dir
    env, commit = raw_lmdb(work / "raw-lmdb")
    try:
        echo = raw.createActor(RawEcho)
        raw.ask(echo, "warm", 10)
        system.start_tree(TREE)
        ledger = StampedRef(system, "agent/ledger")
        writer = LedgerWriter(data_dir)  # after the tree: the ledger's recovery wrote the generation it binds to
        for i in range(20):  # warm-up
            ledger.ask(RecordStarted(request("warm", i)))
            ledger.ask(RecordSettled(f"warm-{i}", "ok"))
            direct_effect(writer, request("dwarm", i))

        progress("durable effect latency")
        ours, direct, floor, physical = Stat(), Stat(), Stat(), Stat()
        answers: list[tuple[Any, Any]] = []
        for i in range(n_latency):
            req = request("lat", i)
            ours.samples.append(timed(lambda req=req, i=i: (ledger.ask(RecordStarted(req)),
                                                               ledger.ask(RecordSettled(f"lat-{i}", "ok")))))
            req = request("dlat", i)
            direct.samples.append(timed(lambda req=req: answers.append(direct_effect(writer, req))))
            floor.samples.append(timed(lambda i=i: (raw.ask(echo, i, 10), commit(2 * i),
                                                    raw.ask(echo, i, 10), commit(2 * i + 1))))
            physical.samples.append(timed(lambda i=i: (commit(10**6 + 2 * i), commit(10**6 + 2 * i + 1))))
        for started, settled in answers:  # checked after the loop, not timed (a settlement "created" its entry)
            answered(started)
            answered(settled)
        floor_note = "floor: 2 raw asks + 2 raw synced commits"
        physical_note = "floor: 2 raw synced commits, no actor hop"
        rows.append(Row("effect", "direct writer: started+settled, 1 session", "ms", direct, floor, "≤ 1.3×",
                        lambda _o, r: r <= 1.3, floor_note))
        rows.append(Row("effect", "direct writer: vs physical floor", "ms", direct, physical, "report", None,
                        physical_note))
        rows.append(Row("effect", "via the ledger actor (one hop): started+settled, 1 session", "ms", ours, floor,
                        "report", None, floor_note))
        rows.append(Row("effect", "via the ledger actor (one hop): vs physical floor", "ms", ours, physical,
                        "report", None, physical_note))

        progress("throughput")
        lmdb_rate = 300 / (sum(timed(lambda i=i: commit(2 * 10**6 + i)) for i in range(300)) / 1000)
        sqlite = sqlite_rate(work / "ref.sqlite", 300)
        pairs_note = "baseline: same senders asking a raw actor, same run; medians of alternating runs"
        for senders, count in per_sender.items():
            ours_rates: list[float] = []
            direct_rates: list[float] = []
            raw_rates: list[float] = []
            same_payload: list[float] = []
            per_commit: list[float] = []
            direct_per_commit: list[float] = []
            for rep in range(repeats):  # direct, raw and the actor alternate, the order reversed every time
                contexts: list[Any] = []
                runs = {
                    "direct": direct_run(writer, f"d{senders}r{rep}", senders, count),
                    "raw": echo_run(raw, echo, senders, count, contexts),
                    "ours": ledger_run(system, ledger, f"s{senders}r{rep}", senders, count, contexts),
                }
                rates = {"direct": direct_rates, "raw": raw_rates, "ours": ours_rates}
                record_run = echo_run(raw, echo, senders, count, contexts,
                                      lambda i, rep=rep: RecordStarted(request(f"echo{rep}", i)))
                before = ledger.ask("status").get("group_commit")
                transactions, records = writer.transactions, writer.records
                for name in (("direct", "raw", "ours") if rep % 2 == 0 else ("ours", "raw", "direct")):
                    rates[name].append(runs[name]())
                    if name == "direct":
                        direct_per_commit.append((writer.records - records)
                                                 / max(1, writer.transactions - transactions))
                same_payload.append(record_run())
                after = ledger.ask("status").get("group_commit")
                if before and after:  # (a ledger that does not count its commits: not shown)
                    per_commit.append((after["records"] - before["records"])
                                      / max(1, after["transactions"] - before["transactions"]))
                for context in contexts:
                    context.__exit__(None, None, None)
            ours_rate, direct_rate = statistics.median(ours_rates), statistics.median(direct_rates)
            raw_rate = statistics.median(raw_rates)
            rows.append(Row("records/s", f"direct writer: {senders} session(s) vs raw asks "
                            f"({spread(direct_rates, raw_rates)})", "rec/s", direct_rate, raw_rate, "≥ 0.8×",
                            lambda _o, r: r >= 0.8, pairs_note))
            rows.append(Row("records/s", f"via the ledger actor (one hop): {senders} session(s) vs raw asks "
                            f"({spread(ours_rates, raw_rates)})", "rec/s", ours_rate, raw_rate, "report", None,
                            pairs_note))
            rows.append(Row("records/s", f"via the ledger actor (one hop): {senders} session(s) vs raw asks of a "
                            "ledger record", "rec/s", ours_rate, statistics.median(same_payload), "report", None,
                            "baseline: the raw actor echoes the same RecordStarted: what storage and the ledger add"))
            rows.append(Row("records/s", f"via the ledger actor (one hop): {senders} session(s) vs 1 commit/record",
                            "rec/s", ours_rate, lmdb_rate, "report", None,
                            "baseline: raw LMDB, one synced commit per record"))
            commits.append(Row("batching", f"direct writer: records per commit, {senders} session(s)", "rec/txn",
                               statistics.median(direct_per_commit), None, "report", None,
                               "group commit: records per synced transaction (median of the runs)"))
            commits.append(Row("batching", f"via the ledger actor (one hop): records per commit, {senders} session(s)",
                               "rec/txn", statistics.median(per_commit) if per_commit else math.nan, None, "report",
                               None, "group commit: records per synced transaction (median of the runs)"))
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
        rows.append(Row("batching", f"via the ledger actor (one hop): {batch} records per message vs 1", "rec/s",
                        batched, single, "report", None, "RecordBatch: one thespian message, one commit"))

        # Last: when the children exit, the ledger turns their unsettled starts ambiguous (watched writers).
        progress("processes")
        rows.append(processes_row(data_dir, raw, echo, 8, per_process, repeats))
    finally:
        env.close()
        system.shutdown()
        raw.shutdown()
        close_env(StorageConfig.under(data_dir))  # the direct writer's handle, after the system is down
    return rows


def spread(ours: list[float], base: list[float]) -> str:
    ratios = sorted(o / b for o, b in zip(ours, base, strict=True))
    return f"{len(ratios)} runs, ratio {ratios[0]:.2f}–{ratios[-1]:.2f}"


def processes_row(data_dir: str, raw: Any, echo: Any, n: int, count: int, repeats: int) -> Row:
    """``n`` processes with a direct writer each vs ``n`` threads asking a raw actor, alternating."""
    metric = f"{n} processes, a direct writer each, vs raw asks from {n} threads"
    note = (f"each process records {count} starts per run after a shared barrier (start-up not timed); "
            f"baseline: {n} threads asking a raw actor; medians of alternating runs")
    procs = WriterProcesses(data_dir, n, count, repeats, "proc")
    ours: list[float] = []
    base: list[float] = []
    try:
        for rep in range(repeats):
            contexts: list[Any] = []
            raw_run = echo_run(raw, echo, n, count, contexts)
            if rep % 2 == 0:
                ours.append(procs.run())
                base.append(raw_run())
            else:
                base.append(raw_run())
                ours.append(procs.run())
            for context in contexts:
                context.__exit__(None, None, None)
    except Exception as exc:  # shown as FAILED; the rest of the table stands
        return Row("processes", metric, "rec/s", None, None, "report", None, note, error=repr(exc))
    finally:
        procs.close()
    return Row("processes", f"{metric} ({spread(ours, base)})", "rec/s", statistics.median(ours),
               statistics.median(base), "report", None, note)


def main() -> None:
    bench_main(run, "ouroactors ledger vs thespian + LMDB floors (same run, multiprocTCPBase)", __doc__)


if __name__ == "__main__":
    main()
