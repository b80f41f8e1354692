"""Storage and ledger authorities on real processes and real LMDB: lifecycle, storage death and
reopen (generations and fencing), storage fault outcomes reaching the caller, bad input."""

from __future__ import annotations

import threading
from typing import Any

import lmdb
import pytest

from ouroactors import StaleGeneration
from ouroactors.authorities.asking import ask_authority
from ouroactors.authorities.grants.operators import read_credentials
from ouroactors.authorities.ledger.actor import (
    GetEntry,
    LedgerAnswer,
    ListEntries,
    OperatorSettle,
    RecordBatch,
    RecordDenied,
    RecordSettled,
    RecordStarted,
)
from ouroactors.authorities.ledger.domain import (
    AlreadySettled,
    LedgerError,
    Status,
    UnknownEffect,
    UnknownEffectKind,
)
from ouroactors.authorities.storage.actor import Backup, Reopen
from ouroactors.authorities.storage.env import StorageError
from ouroactors.core.errors import BadRequest, CommitOutcomeUnknown, CommitRejected
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule
from ouroactors.supervision.protocol import Stamped

from .ledger_support import (
    CONSUMER_PATH,
    LEDGER_PATH,
    STORAGE_PATH,
    agent_tree,
    all_entries,
    counts,
    get_entry,
    kill_and_wait,
    pids,
    settled,
    stamped,
    start_request,
    started,
)

pytestmark = pytest.mark.multiproc

COMMIT = "ouroactors.authorities.storage.commit"


def plan(point: str, exception: str, **rule: Any) -> FaultPlan:
    return FaultPlan((FaultRule(point, FaultAction.RAISE, exception=f"{COMMIT}:{exception}", **rule),))


# -- lifecycle --------------------------------------------------------------------------------------


def test_lifecycle_created_existing_settled_and_status(actor_system):
    actor_system.start_tree(agent_tree())
    generation = actor_system.child_info(LEDGER_PATH).generation
    ledger = actor_system.ref(LEDGER_PATH)

    first = ledger.ask(stamp=generation, message=started("e1"))
    assert isinstance(first, LedgerAnswer) and first.answer == "created"
    assert first.entry.status is Status.STARTED and first.entry.seq == 1 and first.entry.settled_ns is None
    again = ledger.ask(stamp=generation, message=started("e1"))
    assert again.answer == "existing" and again.entry == first.entry  # idempotent, nothing rewritten

    ok = ledger.ask(stamp=generation, message=settled("e1", evidence={"exit": 0}))
    assert ok.answer == "created" and ok.entry.status is Status.OK
    assert ok.entry.evidence == {"exit": 0} and ok.entry.settled_by == "runner" and ok.entry.seq == 1
    assert ledger.ask(stamp=generation, message=settled("e1")).answer == "existing"  # same settlement again: idempotent

    assert ledger.ask(stamp=generation, message=started("e2")).entry.seq == 2
    denied = ledger.ask(stamp=generation, message=RecordDenied(start_request("e3"), "plan mode refuses writes"))
    assert denied.answer == "created" and denied.entry.status is Status.DENIED and denied.entry.seq == 3
    batch = RecordBatch((started("e4"), settled("e4", "failed", reason="exit 2")))
    failed = ledger.ask(stamp=generation, message=batch)
    assert [a.answer for a in failed] == ["created", "created"] and failed[1].entry.status is Status.FAILED

    status = ledger.ask(stamp=generation, message="status")
    assert status["counts"] == {"ok": 1, "started": 1, "denied": 1, "failed": 1}
    assert status["recovered_ambiguous"] == 0 and status["quarantined"] == 0
    assert status["generation"] == actor_system.child_info(LEDGER_PATH).generation
    assert status["storage_generation"] == actor_system.child_info(STORAGE_PATH).generation
    assert ledger.ask(stamp=generation, message=GetEntry("e1")).status is Status.OK


def test_same_id_with_another_fingerprint_is_a_conflict(actor_system):
    actor_system.start_tree(agent_tree())
    ask_authority(actor_system, LEDGER_PATH, started("e1"))
    with pytest.raises(LedgerError, match="another fingerprint"):
        ask_authority(actor_system, LEDGER_PATH, started("e1", args={"other": True}))
    assert get_entry(actor_system, "e1").fingerprint == start_request("e1").fingerprint
    assert counts(actor_system) == {"started": 1}


# -- storage death: a new generation, every writer after it restarted --------------------------------


def test_storage_sigkill_restarts_all_writers_under_a_new_generation(actor_system):
    actor_system.start_tree(agent_tree())
    for i in range(20):
        ask_authority(actor_system, LEDGER_PATH, started(f"e{i}"))
        if i % 2 == 0:
            ask_authority(actor_system, LEDGER_PATH, settled(f"e{i}"))
    before_entries = all_entries(actor_system)
    before_pids = pids(actor_system)
    old_generation = actor_system.child_info(STORAGE_PATH).generation

    kill_and_wait(actor_system, STORAGE_PATH)

    after_pids = pids(actor_system)
    assert all(after_pids[name] != before_pids[name] for name in ("storage", "ledger", "consumer"))
    new_generation = actor_system.child_info(STORAGE_PATH).generation
    assert new_generation > old_generation
    assert ask_authority(actor_system, STORAGE_PATH, "status")["generation"] == new_generation
    status = ask_authority(actor_system, LEDGER_PATH, "status")
    assert status["storage_generation"] == new_generation
    assert actor_system.ask(CONSUMER_PATH, "whoami")["authorities"]["storage"] == new_generation
    # The ledger fences every write on its storage generation inside the transaction: a commit
    # succeeding now proves the new generation is what meta holds.
    assert ask_authority(actor_system, LEDGER_PATH, started("after")).answer == "created"

    after = all_entries(actor_system)
    for effect_id, entry in before_entries.items():
        now = after[effect_id]
        assert now.seq == entry.seq
        if entry.status is Status.OK:
            assert now == entry
        else:  # started when the ledger was restarted: ambiguous, never failed
            assert now.status is Status.AMBIGUOUS
    assert status["recovered_ambiguous"] == 10
    assert after["after"].seq == 21
    with pytest.raises(StaleGeneration):
        actor_system.ask(STORAGE_PATH, "status", stamp=old_generation)


# -- storage fault outcomes reach the caller as themselves --------------------------------------------


def test_injected_rejection_is_commit_rejected_and_nothing_written(actor_system):
    actor_system.start_tree(agent_tree())
    ask_authority(actor_system, LEDGER_PATH, started("before"))
    pid = actor_system.child_info(LEDGER_PATH).pid
    actor_system.arm_faults(LEDGER_PATH, plan("storage.before_commit", "InjectedRejected"))

    with pytest.raises(CommitRejected, match="injected"):
        ask_authority(actor_system, LEDGER_PATH, started("r1"))
    with pytest.raises(CommitRejected):
        ask_authority(actor_system, LEDGER_PATH, settled("before"))
    batch = ask_authority(actor_system, LEDGER_PATH, RecordBatch((started("r2"), started("r3"))))
    assert [type(answer) for answer in batch] == [CommitRejected, CommitRejected]
    assert get_entry(actor_system, "r1") is None and get_entry(actor_system, "r2") is None

    actor_system.arm_faults(LEDGER_PATH, None)
    assert counts(actor_system) == {"started": 1}
    assert get_entry(actor_system, "before").status is Status.STARTED
    assert ask_authority(actor_system, LEDGER_PATH, started("r1")).answer == "created"  # a rejection is final: retry
    assert actor_system.child_info(LEDGER_PATH).pid == pid  # a rejected commit is not a crash


def test_unknown_outcome_after_commit_is_unknown_and_reconciles_by_reading_back(actor_system):
    actor_system.start_tree(agent_tree())
    actor_system.arm_faults(LEDGER_PATH, plan("storage.after_commit", "InjectedUnknown", nth=1))
    with pytest.raises(CommitOutcomeUnknown, match="after commit"):
        ask_authority(actor_system, LEDGER_PATH, started("u1"))
    actor_system.arm_faults(LEDGER_PATH, None)
    found = get_entry(actor_system, "u1")  # reconcile: read back
    assert found is not None and found.status is Status.STARTED
    again = ask_authority(actor_system, LEDGER_PATH, started("u1"))
    assert again.answer == "existing" and again.entry == found


def test_unknown_outcome_before_commit_reads_back_absent(actor_system):
    actor_system.start_tree(agent_tree())
    actor_system.arm_faults(LEDGER_PATH, plan("storage.before_commit", "InjectedUnknown", nth=1))
    with pytest.raises(CommitOutcomeUnknown, match="before commit"):
        ask_authority(actor_system, LEDGER_PATH, started("u1"))
    actor_system.arm_faults(LEDGER_PATH, None)
    assert get_entry(actor_system, "u1") is None
    assert ask_authority(actor_system, LEDGER_PATH, started("u1")).answer == "created"


def test_map_full_is_a_rejection_that_names_it(actor_system):
    actor_system.start_tree(agent_tree())
    actor_system.arm_faults(LEDGER_PATH, plan("storage.before_commit", "InjectedMapFull"))
    with pytest.raises(CommitRejected, match="map full"):
        ask_authority(actor_system, LEDGER_PATH, started("m1"))
    actor_system.arm_faults(LEDGER_PATH, None)
    assert get_entry(actor_system, "m1") is None and counts(actor_system) == {}


def test_real_map_full_is_rejected_and_the_ledger_keeps_serving(actor_system):
    small = {"map_size": 1 << 20}  # 1 MiB: every process opens with the same map size
    actor_system.start_tree(agent_tree(ledger_kwargs=small, storage_kwargs=small))
    pid = actor_system.child_info(LEDGER_PATH).pid
    evidence = {"blob": "x" * 1500}
    committed: list[str] = []
    rejection = None
    for round_ in range(200):
        ids = [f"m{round_}-{i}" for i in range(20)]
        items = tuple(item for effect_id in ids for item in (started(effect_id), settled(effect_id, evidence=evidence)))
        answers = ask_authority(actor_system, LEDGER_PATH, RecordBatch(items), timeout=10.0)
        if isinstance(answers[0], CommitRejected):
            assert all(isinstance(answer, CommitRejected) for answer in answers)  # one transaction
            rejection = answers[0]
            break
        committed.extend(ids)
    assert rejection is not None, "the 1 MiB map never filled"
    assert "map full" in rejection.reason
    entries = all_entries(actor_system)
    assert set(entries) == set(committed) and all(entry.status is Status.OK for entry in entries.values())
    assert actor_system.child_info(LEDGER_PATH).pid == pid


# -- generations --------------------------------------------------------------------------------------


def test_stale_ledger_stamp_is_refused_and_nothing_written(actor_system):
    actor_system.start_tree(agent_tree())
    generation = actor_system.child_info(LEDGER_PATH).generation
    assert actor_system.ask(LEDGER_PATH, started("e1"), stamp=generation).answer == "created"
    for message in (started("e2"), settled("e1"), RecordBatch((started("e3"),))):
        with pytest.raises(StaleGeneration) as caught:
            actor_system.ask(LEDGER_PATH, message, stamp=generation - 1)
        assert caught.value.expected == generation and caught.value.got == generation - 1
    assert counts(actor_system) == {"started": 1}
    assert get_entry(actor_system, "e1").status is Status.STARTED


def test_storage_reopen_restarts_writers_without_a_storage_crash(actor_system):
    actor_system.start_tree(agent_tree())
    ask_authority(actor_system, LEDGER_PATH, started("e1"))
    ask_authority(actor_system, LEDGER_PATH, settled("e1"))
    before = {child.id: (child.pid, child.generation) for child in actor_system.which_children("agent")}
    mark = actor_system.mark()

    assert ask_authority(actor_system, STORAGE_PATH, Reopen("restore")) == "reopening"
    changed = actor_system.wait_for("generation_changed", STORAGE_PATH, after=mark)
    actor_system.wait_for("started", CONSUMER_PATH, after=mark)

    after = {child.id: (child.pid, child.generation) for child in actor_system.which_children("agent")}
    assert after["storage"][0] == before["storage"][0]  # same process ...
    assert after["storage"][1] == changed.generation > before["storage"][1]  # ... new generation
    assert after["ledger"][0] != before["ledger"][0] and after["consumer"][0] != before["consumer"][0]
    assert ask_authority(actor_system, STORAGE_PATH, "status")["generation"] == changed.generation
    status = ask_authority(actor_system, LEDGER_PATH, "status")
    assert status["storage_generation"] == changed.generation
    assert status["counts"] == {"ok": 1}
    assert ask_authority(actor_system, LEDGER_PATH, started("e2")).answer == "created"  # fence matches meta
    with pytest.raises(StaleGeneration):
        actor_system.ask(LEDGER_PATH, started("e3"), stamp=before["ledger"][1])
    assert get_entry(actor_system, "e3") is None
    assert not any(event.kind == "escalated" for event in actor_system.events.all())


def test_a_write_in_flight_across_a_storage_generation_change_is_fenced_by_the_transaction(actor_system):
    """The old ledger is held inside a commit while storage moves on: its transaction is refused."""
    actor_system.start_tree(agent_tree())
    address = actor_system.resolve(LEDGER_PATH)
    actor_system.arm_faults(LEDGER_PATH, FaultPlan((
        FaultRule("storage.before_commit", FaultAction.DELAY, nth=1, delay_s=2.0),
    )))
    answers: list[Any] = []

    request = stamped(actor_system, LEDGER_PATH, started("inflight"))

    def record() -> None:
        with actor_system._thespian.private() as context:
            answers.append(context.ask(address, request, 15.0))

    writer = threading.Thread(target=record)
    writer.start()
    with actor_system._thespian.private() as probe:  # busy once a quick ask goes unanswered
        for _ in range(100):
            if probe.ask(address, "status", 0.1) is None:
                break
        else:
            pytest.fail("the ledger never got busy with the delayed write")
    mark = actor_system.mark()
    ask_authority(actor_system, STORAGE_PATH, Reopen("restore"))
    actor_system.wait_for("generation_changed", STORAGE_PATH, after=mark)
    writer.join(20.0)
    assert len(answers) == 1
    assert isinstance(answers[0], CommitRejected) and "stale storage generation" in answers[0].reason
    actor_system.wait_for("started", CONSUMER_PATH, after=mark)
    assert get_entry(actor_system, "inflight") is None


# -- bad input: a clear error, nothing durable changes -------------------------------------------------


def test_bad_input_is_refused_clearly_and_changes_nothing(actor_system):
    actor_system.start_tree(agent_tree())
    ask_authority(actor_system, LEDGER_PATH, started("ok1"))
    ask_authority(actor_system, LEDGER_PATH, settled("ok1"))
    ask_authority(actor_system, LEDGER_PATH, started("open"))
    pid = actor_system.child_info(LEDGER_PATH).pid
    snapshot = all_entries(actor_system)
    baseline = counts(actor_system)
    operator, token = read_credentials(actor_system.data_dir)

    cases: list[tuple[Any, type[Exception], str]] = [
        (started("k1", kind="teleport"), UnknownEffectKind, "unknown effect kind 'teleport'"),
        (settled("open", evidence={"blob": "x" * 5000}), BadRequest, "over the limit"),
        (settled("open", evidence={"blob": "x" * 1990}), LedgerError, "over the inline limit"),
        (settled("ghost"), UnknownEffect, "no effect 'ghost'"),
        (settled("ok1", "failed"), AlreadySettled, "already ok, cannot settle failed"),
        (settled("open", "done"), LedgerError, "'done' is not one of: ok, failed"),
        (settled("open", "ambiguous"), LedgerError, "'ambiguous' is not one of: ok, failed"),
        (settled("open", "started"), LedgerError, "'started' is not one of: ok, failed"),
        (OperatorSettle("ghost", "ok", "checked by hand", operator, token), UnknownEffect, "no effect 'ghost'"),
        (OperatorSettle("open", "ok", "checked by hand", operator, "forged"), LedgerError, "not verified"),
        # refused at the door, without taking the ledger (and the callers whose requests it holds) down
        (settled("x" * 600), BadRequest, "RecordSettled.effect_id"),
        (settled("open", evidence={"values": {1, 2}}), BadRequest, "set is not encodable"),
        (settled("open", evidence=["not", "a", "dict"]), BadRequest, "evidence"),
        (settled("open", by="operator:mallory"), BadRequest, "RecordSettled.by"),
        (RecordStarted({"effect_id": "d1"}), BadRequest, "StartRequest"),  # type: ignore[arg-type]
        (RecordDenied(start_request("d2"), None), BadRequest, "reason"),  # type: ignore[arg-type]
        (RecordBatch(("junk",)), BadRequest, "items[0]"),  # type: ignore[arg-type]
        (RecordBatch((started("d3"), "junk")), BadRequest, "items[1]"),  # type: ignore[arg-type]
        (GetEntry("z" * 600), BadRequest, "effect_id"),
        (ListEntries(limit="all"), BadRequest, "limit"),  # type: ignore[arg-type]
        (ListEntries(since_seq=2**70), BadRequest, "since_seq"),
    ]
    for message, error, text in cases:
        with pytest.raises(error) as caught:
            ask_authority(actor_system, LEDGER_PATH, message)
        assert text in str(caught.value), (message, caught.value)

    batch = ask_authority(actor_system, LEDGER_PATH, RecordBatch((settled("ghost"), started("k2", kind="teleport"))))
    assert [type(answer) for answer in batch] == [UnknownEffect, UnknownEffectKind]

    assert actor_system.child_info(LEDGER_PATH).pid == pid  # refused, not crashed
    assert counts(actor_system) == baseline
    assert all_entries(actor_system) == snapshot
    assert ask_authority(actor_system, LEDGER_PATH, started("next")).entry.seq == 3  # no sequence number was used up


def test_a_bad_request_in_a_group_commit_does_not_fail_the_others(actor_system):
    """Requests that arrive together are committed together; a refused one is refused alone."""
    actor_system.start_tree(agent_tree())
    address = actor_system.resolve(LEDGER_PATH)
    generation = actor_system.child_info(LEDGER_PATH).generation
    good = [started(f"g{i}") for i in range(8)]
    bad = [settled("ghost"), started("k", kind="teleport"), settled("y" * 600)]
    results: dict[int, Any] = {}

    def send(index: int, message: Any) -> None:
        with actor_system._thespian.private() as context:
            results[index] = context.ask(address, Stamped(generation, message), 10.0)

    messages = [m for pair in zip(good, bad + [None] * len(good), strict=False) for m in pair if m is not None]
    threads = [threading.Thread(target=send, args=(i, m)) for i, m in enumerate(messages)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(15.0)
    assert len(results) == len(messages)
    for index, message in enumerate(messages):
        if isinstance(message, RecordStarted) and message.request.kind == "tool_call":
            assert isinstance(results[index], LedgerAnswer) and results[index].answer == "created"
        else:
            assert isinstance(results[index], LedgerError | BadRequest), results[index]
    assert counts(actor_system) == {"started": 8}
    assert sorted(e.seq for e in all_entries(actor_system).values()) == list(range(1, 9))


def test_ambiguous_needs_evidence_or_an_operator(actor_system):
    actor_system.start_tree(agent_tree())
    ask_authority(actor_system, LEDGER_PATH, started("a1"))
    ask_authority(actor_system, LEDGER_PATH, started("a2"))
    kill_and_wait(actor_system, LEDGER_PATH)
    assert counts(actor_system) == {"ambiguous": 2}
    with pytest.raises(LedgerError, match="only a verified operator"):
        ask_authority(actor_system, LEDGER_PATH, settled("a1"))
    with pytest.raises(LedgerError, match="only a verified operator"):  # a writer's evidence proves nothing
        ask_authority(actor_system, LEDGER_PATH, RecordSettled("a2", "ok", evidence={"pr": 7}, by="runner"))
    with pytest.raises(LedgerError, match="not verified"):  # a name asserted without its token
        ask_authority(actor_system, LEDGER_PATH, OperatorSettle("a1", "failed", "checked", "mallory", "guess"))
    assert counts(actor_system) == {"ambiguous": 2}
    operator, token = read_credentials(actor_system.data_dir)
    by_operator = ask_authority(actor_system, LEDGER_PATH,
                                OperatorSettle("a1", "failed", "checked: never ran", operator, token))
    assert by_operator.entry.status is Status.FAILED and by_operator.entry.settled_by == f"operator:{operator}"
    assert counts(actor_system) == {"ambiguous": 1, "failed": 1}



# -- storage requests ------------------------------------------------------------------------------------


def test_backup_is_a_consistent_copy_and_a_bad_target_is_refused(actor_system, tmp_path):
    actor_system.start_tree(agent_tree())
    for i in range(5):
        ask_authority(actor_system, LEDGER_PATH, started(f"e{i}"))
    before = pids(actor_system)
    target = tmp_path / "backup"
    assert ask_authority(actor_system, STORAGE_PATH, Backup(str(target)), timeout=10.0) == str(target)
    copy = lmdb.open(str(target), readonly=True, lock=False, max_dbs=32)
    try:
        with copy.begin() as txn:
            assert txn.stat(copy.open_db(b"ledger", txn=txn, create=False))["entries"] == 5
    finally:
        copy.close()

    with pytest.raises(StorageError, match="not empty"):
        ask_authority(actor_system, STORAGE_PATH, Backup(str(target)))
    blocker = tmp_path / "a-file"
    blocker.write_text("in the way")
    with pytest.raises(StorageError, match="cannot back up"):
        ask_authority(actor_system, STORAGE_PATH, Backup(str(blocker / "sub")))
    assert pids(actor_system) == before  # refused, not crashed: no writer was restarted
    assert ask_authority(actor_system, LEDGER_PATH, started("after")).answer == "created"
