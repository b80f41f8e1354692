"""Direct ledger writers (``LedgerWriter``) on a real LMDB environment, without thespian: the same
answers as the ledger actor, fencing on both generations inside the transaction, group commit across
threads, commit outcomes reaching the caller as themselves, and watched writers whose process dies."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from typing import Any

import lmdb
import pytest

from ouroactors.authorities.ledger.actor import WRITER_EXITED
from ouroactors.authorities.ledger.direct import LedgerWriter, NoLedger
from ouroactors.authorities.ledger.domain import (
    DEFAULT_KINDS,
    EffectConflict,
    LedgerError,
    Status,
    UnknownEffectKind,
)
from ouroactors.authorities.ledger.messages import RecordSettled, RecordStarted
from ouroactors.authorities.ledger.store import LedgerStore, Stamp, Start
from ouroactors.authorities.storage.commit import Committed, EnvironmentDead
from ouroactors.authorities.storage.env import GENERATION_KEY, StorageConfig, encode_u64, meta_db
from ouroactors.core import faults
from ouroactors.core.codec import MAX_INLINE_BYTES
from ouroactors.core.errors import CommitOutcomeUnknown, CommitRejected, StaleGeneration
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule

from .workers import direct_writer_child, start_request

STORAGE_GEN, LEDGER_GEN = 7, 11
COMMIT = "ouroactors.authorities.storage.commit"


def set_storage_generation(env: lmdb.Environment, generation: int) -> None:
    with env.begin(write=True) as txn:
        txn.put(GENERATION_KEY, encode_u64(generation), db=meta_db(env))


def ledger_store(env: lmdb.Environment) -> LedgerStore:
    """The ledger's own store, as the ledger actor holds it (fenced on the storage generation)."""
    return LedgerStore(env, node="node-1", kinds=DEFAULT_KINDS, fence=STORAGE_GEN)


@pytest.fixture
def ledger(env: lmdb.Environment) -> LedgerStore:
    """A data dir as the agent tree leaves it: storage and ledger generations recorded."""
    set_storage_generation(env, STORAGE_GEN)
    store = ledger_store(env)
    assert isinstance(store.recover(LEDGER_GEN), Committed)
    return store


def data_dir(config: StorageConfig) -> str:
    return os.path.dirname(config.path)


# -- the ledger's answers, from this process ---------------------------------------------------------


def test_a_writer_records_what_the_ledger_reads_with_the_ledgers_answers(ledger, config):
    writer = LedgerWriter(data_dir(config), node="node-1")
    assert writer.stamp == Stamp(STORAGE_GEN, LEDGER_GEN)
    first = writer.record_started(start_request("e1", session="s"))
    assert (first.answer, first.entry.status, first.entry.seq) == ("created", Status.STARTED, 1)
    assert writer.record_started(start_request("e1", session="s")).answer == "existing"
    assert isinstance(writer.record_started(start_request("e1", args={"other": 1})), EffectConflict)
    settled = writer.record_settled("e1", "ok", evidence={"exit": 0})
    assert (settled.answer, settled.entry.status) == ("created", Status.OK)
    assert writer.record_settled("e1", "ok").answer == "existing"
    denied = writer.record_denied(start_request("e2"), "no grant")
    assert (denied.entry.status, denied.entry.reason) == (Status.DENIED, "no grant")
    stored = ledger.get("e1")
    assert stored is not None and stored.status is Status.OK and stored.node == "node-1"
    assert ledger.get("e2").seq == 2


def test_bad_input_is_refused_by_name_and_changes_nothing(ledger, config):
    writer = LedgerWriter(data_dir(config))
    bad: list[Any] = [
        RecordStarted({"effect_id": "x"}),  # not a StartRequest
        RecordStarted(start_request("k1", kind="launch_missiles")),  # unknown kind
        RecordSettled("nobody", "ok"),  # unknown id
        RecordSettled("k0", "maybe"),  # a status outside the vocabulary
        "record this",
    ]
    before = ledger.counts()
    answers = writer.submit(bad)
    assert all(isinstance(answer, LedgerError) for answer in answers), answers
    assert "StartRequest" in str(answers[0]) and isinstance(answers[1], UnknownEffectKind)
    assert "launch_missiles" in str(answers[1]) and "nobody" in str(answers[2]) and "maybe" in str(answers[3])
    assert ledger.counts() == before
    writer.record_started(start_request("k0"))
    huge = writer.record_settled("k0", "failed", evidence={"blob": "x" * (MAX_INLINE_BYTES + 1)})
    assert isinstance(huge, LedgerError) and str(MAX_INLINE_BYTES) in str(huge)
    assert ledger.get("k0").status is Status.STARTED  # the refused settlement wrote nothing


def test_a_data_dir_without_a_recovered_ledger_has_nothing_to_bind_to(env, config):
    set_storage_generation(env, STORAGE_GEN)
    with pytest.raises(NoLedger, match="no ledger has recovered"):
        LedgerWriter(data_dir(config))


# -- fencing inside the transaction -------------------------------------------------------------------


def test_a_ledger_restart_fences_off_writers_of_the_gone_generation(ledger, config):
    writer = LedgerWriter(data_dir(config), watch=False)
    writer.record_started(start_request("before"))
    assert ledger.recover(LEDGER_GEN + 1).value == 1  # the ledger restarted: one start is ambiguous

    refused = writer.record_started(start_request("after"))
    assert isinstance(refused, StaleGeneration)
    assert (refused.authority, refused.expected, refused.got) == ("ledger", LEDGER_GEN + 1, LEDGER_GEN)
    late = writer.record_settled("before", "ok")
    assert isinstance(late, StaleGeneration)
    assert ledger.get("after") is None
    assert ledger.get("before").status is Status.AMBIGUOUS  # not settled by the stale writer
    fresh = LedgerWriter(data_dir(config), watch=False)
    assert fresh.record_started(start_request("after")).answer == "created"


def test_a_storage_generation_change_fences_off_writers_too(ledger, env, config):
    writer = LedgerWriter(data_dir(config), watch=False)
    set_storage_generation(env, STORAGE_GEN + 1)
    refused = writer.record_started(start_request("e"))
    assert isinstance(refused, StaleGeneration) and refused.authority == "storage"
    assert ledger.get("e") is None


def test_a_writer_stamped_by_its_supervisor_is_refused_once_that_stamp_is_gone(ledger, config):
    with pytest.raises(StaleGeneration):  # watching registers in a fenced transaction too
        LedgerWriter(data_dir(config), stamp=Stamp(STORAGE_GEN, LEDGER_GEN - 1))
    writer = LedgerWriter(data_dir(config), stamp=Stamp(STORAGE_GEN, LEDGER_GEN - 1), watch=False)
    assert isinstance(writer.record_started(start_request("e")), StaleGeneration)


# -- commit outcomes ----------------------------------------------------------------------------------


def raising(point: str, exception: str) -> FaultPlan:
    return FaultPlan((FaultRule(point, FaultAction.RAISE, exception=f"{COMMIT}:{exception}"),))


def test_each_commit_outcome_reaches_the_caller_as_itself(ledger, config):
    writer = LedgerWriter(data_dir(config), watch=False)
    faults.arm(raising("storage.before_commit", "InjectedRejected"))
    assert isinstance(writer.record_started(start_request("rejected")), CommitRejected)
    faults.arm(raising("storage.before_commit", "InjectedMapFull"))
    full = writer.record_started(start_request("full"))
    assert isinstance(full, CommitRejected) and "map full" in str(full)
    faults.arm(raising("storage.after_commit", "InjectedUnknown"))
    assert isinstance(writer.record_started(start_request("unknown")), CommitOutcomeUnknown)
    faults.disarm()
    assert ledger.get("rejected") is None and ledger.get("full") is None
    assert ledger.get("unknown").status is Status.STARTED  # reconciled by reading back: it did commit
    assert writer.record_started(start_request("unknown")).answer == "existing"


def test_a_panicked_environment_leaves_the_writer_dead(ledger, config, monkeypatch):
    writer = LedgerWriter(data_dir(config), watch=False)
    monkeypatch.setattr("ouroactors.authorities.ledger.direct.env_panicked", lambda env: True)
    faults.arm(raising("storage.after_commit", "InjectedUnknown"))
    assert isinstance(writer.record_started(start_request("e")), CommitOutcomeUnknown)
    with pytest.raises(EnvironmentDead, match="must exit"):
        writer.record_started(start_request("f"))


def test_a_settlement_reads_what_is_stored_not_what_the_writer_remembers(ledger, config, monkeypatch):
    """The writer's store keeps the bytes it wrote and their entry, so the settle of its own start does not decode
    it again — but only bytes equal to the stored ones count: an entry another writer changed since (an operator,
    the ledger marking it ambiguous) or a start that never committed is read as it is stored."""
    writer = LedgerWriter(data_dir(config), watch=False)
    decoded: list[bytes] = []
    real_decode = LedgerStore._decode

    def counting(self: LedgerStore, txn: Any, key: Any, raw: Any) -> Any:
        decoded.append(bytes(key))
        return real_decode(self, txn, key, raw)

    monkeypatch.setattr(LedgerStore, "_decode", counting)
    assert writer.record_started(start_request("mine")).answer == "created"
    assert writer.record_settled("mine", "ok").entry.status is Status.OK
    assert decoded == []  # the start's own bytes: not decoded again

    writer.record_started(start_request("lost"))
    assert ledger.mark_ambiguous(["lost"], "its runner died").value == 1  # another writer changes the entry
    refused = writer.record_settled("lost", "ok")
    assert isinstance(refused, LedgerError) and "ambiguous" in str(refused)  # what is stored, not what it wrote
    assert b"lost" in decoded

    faults.arm(raising("storage.before_commit", "InjectedRejected"))
    assert isinstance(writer.record_started(start_request("never")), CommitRejected)
    faults.disarm()
    assert isinstance(writer.record_settled("never", "ok"), LedgerError)  # the start never committed: no entry
    assert writer.record_started(start_request("never")).answer == "created"  # and it can be recorded now


# -- group commit across threads -----------------------------------------------------------------------


def test_threads_sharing_a_writer_share_transactions_and_get_their_own_answers(ledger, config):
    writer = LedgerWriter(data_dir(config))
    threads, per_thread = 8, 30
    answers: dict[int, list[Any]] = {}
    start = threading.Barrier(threads)

    def session(k: int) -> None:
        start.wait()
        answers[k] = [writer.record_started(start_request(f"t{k}-{i}", session=f"s{k}")) for i in range(per_thread)]
        answers[k] += [writer.record_settled(f"t{k}-{i}", "ok") for i in range(0, per_thread, 2)]

    workers = [threading.Thread(target=session, args=(k,)) for k in range(threads)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    for k, mine in answers.items():
        assert all(answer.answer == "created" for answer in mine), mine
        assert {answer.entry.effect_id for answer in mine} == {f"t{k}-{i}" for i in range(per_thread)}
    seqs = sorted(ledger.get(f"t{k}-{i}").seq for k in range(threads) for i in range(per_thread))
    assert seqs == list(range(1, threads * per_thread + 1))
    assert ledger.counts() == {"ok": threads * per_thread // 2, "started": threads * per_thread // 2}
    assert writer.records == threads * per_thread * 3 // 2
    assert writer.transactions < writer.records  # some callers shared a commit


# -- watched writers ----------------------------------------------------------------------------------


def test_watched_starts_are_indexed_until_settled_and_recovery_forgets_writers(ledger, config):
    writer = LedgerWriter(data_dir(config))
    unwatched = LedgerWriter(data_dir(config), watch=False)
    writer.record_started(start_request("w1"))
    writer.record_started(start_request("w2"))
    unwatched.record_started(start_request("u1"))
    with ledger.env.begin() as txn:
        assert {bytes(k): bytes(v) for k, v in txn.cursor(db=ledger.runs)} == {b"w1": writer.writer_id,
                                                                                 b"w2": writer.writer_id}
    unwatched.record_settled("w1", "ok")  # settled by anyone: no longer anyone's concern
    assert list(ledger.watched_writers()) == [writer.writer_id]
    assert ledger.gone_writers() == set()  # this very process is alive
    assert ledger.forget_writers({writer.writer_id}, WRITER_EXITED).value == ["w2"]
    assert ledger.get("w2").status is Status.AMBIGUOUS and ledger.get("w2").reason == WRITER_EXITED
    assert ledger.get("w1").status is Status.OK and ledger.get("u1").status is Status.STARTED
    assert ledger.watched_writers() == {}

    again = LedgerWriter(data_dir(config))
    again.record_started(start_request("w3"))
    ledger.recover(LEDGER_GEN + 1)
    assert ledger.watched_writers() == {}
    with ledger.env.begin() as txn:
        assert list(txn.cursor(db=ledger.runs)) == []


def test_a_watched_writer_registers_in_its_first_transaction_that_commits(ledger, config):
    """Opening a writer commits nothing (a runtime opens one for every message it handles); its record rides in its
    first transaction, and in each after it until one has committed."""
    before = ledger.env.info()["last_txnid"]
    writer = LedgerWriter(data_dir(config))
    assert ledger.env.info()["last_txnid"] == before  # no transaction of its own
    assert ledger.watched_writers() == {}
    faults.arm(raising("storage.before_commit", "InjectedRejected"))
    assert isinstance(writer.record_started(start_request("r1")), CommitRejected)
    faults.disarm()
    assert ledger.watched_writers() == {}  # the rejected transaction took the record with it
    writer.record_started(start_request("r2"))
    assert ledger.env.info()["last_txnid"] == before + 1  # the start and the registration: one commit
    assert list(ledger.watched_writers()) == [writer.writer_id]
    assert ledger.forget_writers({writer.writer_id}, WRITER_EXITED).value == ["r2"]  # watched from its first start


def test_a_writers_own_settlement_leaves_its_run_key_to_its_next_start(ledger, config):
    """The settlement's commit does not touch ``ledger_runs``: the key waits for the writer's next start, which takes
    it away beside the key it puts. Meanwhile a sweep of the dead writer finds the effect settled and leaves it."""
    writer = LedgerWriter(data_dir(config))

    def runs() -> dict[bytes, bytes]:
        with ledger.env.begin() as txn:
            return {bytes(k): bytes(v) for k, v in txn.cursor(db=ledger.runs)}

    writer.record_started(start_request("a"))
    writer.record_started(start_request("b"))
    assert writer.record_settled("a", "ok").entry.status is Status.OK
    assert runs() == {b"a": writer.writer_id, b"b": writer.writer_id}  # a's key waits
    faults.arm(raising("storage.before_commit", "InjectedRejected"))
    assert isinstance(writer.record_started(start_request("c")), CommitRejected)  # did not commit: a's key stays due
    faults.disarm()
    assert runs() == {b"a": writer.writer_id, b"b": writer.writer_id}
    writer.record_started(start_request("c"))
    assert runs() == {b"b": writer.writer_id, b"c": writer.writer_id}  # gone with the next start

    assert writer.record_settled("b", "failed").entry.status is Status.FAILED
    assert ledger.forget_writers({writer.writer_id}, WRITER_EXITED).value == ["c"]  # b was settled: not lost
    assert ledger.get("b").status is Status.FAILED and ledger.get("c").status is Status.AMBIGUOUS
    assert runs() == {}


def test_a_killed_writer_process_is_found_gone_and_only_its_unsettled_starts_become_ambiguous(ledger, config):
    context = multiprocessing.get_context("spawn")  # the child opens the environment itself, never across fork
    results = context.Queue()
    child = context.Process(target=direct_writer_child, args=(data_dir(config), ["c1", "c2", "c3"], results))
    child.start()
    try:
        assert results.get(timeout=60) == ["created", "created", "created", "ok"]
        assert len(ledger.watched_writers()) == 1
        assert ledger.gone_writers() == set()
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.join(timeout=30)
    gone = ledger.gone_writers()
    assert len(gone) == 1
    assert sorted(ledger.forget_writers(gone, WRITER_EXITED).value) == ["c2", "c3"]
    assert [ledger.get(effect_id).status for effect_id in ("c1", "c2", "c3")] == [
        Status.OK, Status.AMBIGUOUS, Status.AMBIGUOUS]


# -- the authority snapshot: no new effect on a decision of a gone grants generation -------------------


def test_a_start_admitted_under_a_gone_grants_generation_is_refused(ledger, config):
    writer = LedgerWriter(data_dir(config), watch=False)
    assert isinstance(ledger.publish_generation("grants", 5), Committed)

    def admitted(effect_id: str, grants: int | None) -> Any:
        return start_request(effect_id).model_copy(
            update={"authority": {"storage": 1, **({"grants": grants} if grants is not None else {})}})

    stale = writer.record_started(admitted("e1", grants=4))
    assert isinstance(stale, StaleGeneration) and (stale.authority, stale.expected, stale.got) == ("grants", 5, 4)
    assert ledger.get("e1") is None
    assert writer.record_started(admitted("e1", grants=5)).answer == "created"
    unnamed = writer.record_started(admitted("e2", grants=None))  # a snapshot without grants: no way around it
    assert isinstance(unnamed, StaleGeneration)
    assert (unnamed.authority, unnamed.expected, unnamed.got) == ("grants", 5, None)
    assert ledger.get("e2") is None
    # The snapshot's storage entry is data here (1 ≠ 7): the writer's own stamp fences storage.
    assert isinstance(ledger.publish_generation("grants", 6), Committed)
    assert writer.record_started(admitted("e1", grants=5)).answer == "existing"  # a read-back, not a new effect
    denied = writer.record_denied(admitted("e3", grants=5), "denied before the change")
    assert denied.entry.status is Status.DENIED  # nothing runs on a denial: it is recorded as such
    assert isinstance(ledger.apply([Start(admitted("e4", grants=5))]).value[0], StaleGeneration)  # the actor's path
    assert ledger.get("e4") is None
