"""The journal on a real LMDB environment: chain, anchor, gaps, blobs, budget — and the tamper corpus."""

from __future__ import annotations

import itertools

import lmdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ouroactors.authorities.storage import commit
from ouroactors.authorities.storage.env import db
from ouroactors.core import faults
from ouroactors.core.codec import encode
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule
from ouroactors.runtime.execution import blobs, chain, reading
from ouroactors.runtime.execution.chain import JournalEntry
from ouroactors.runtime.execution.journal import (
    ANCHOR_DB,
    JOURNAL_DB,
    Journal,
    JournalError,
    head_key,
    record_key,
)

from .conftest import each_record_stored_or_counted_once

SID = b"s1"


pytestmark = pytest.mark.usefixtures("faults_disarmed")


def _fill(env: lmdb.Environment, n: int = 20) -> Journal:
    journal = Journal(env, "s1")
    journal.stage("session_opened", {"version": 1}, at=1)
    for i in range(1, n):
        journal.stage("prompt", {"text": f"record {i}"}, turn=i // 5, at=i)
    assert journal.flush().committed
    return journal


def _raw(env: lmdb.Environment, seq: int) -> bytes:
    with env.begin(db=db(env, JOURNAL_DB)) as txn:
        return bytes(txn.get(record_key(SID, seq)))


def _put(env: lmdb.Environment, seq: int, value: bytes | None, *, witness: bytes | None = None) -> None:
    with env.begin(write=True) as txn:
        if value is None:
            txn.delete(record_key(SID, seq), db=db(env, JOURNAL_DB))
        else:
            txn.put(record_key(SID, seq), value, db=db(env, JOURNAL_DB))
        if witness is not None:
            txn.put(record_key(SID, seq), witness, db=db(env, ANCHOR_DB))


def test_records_chain_and_verify(env):
    _fill(env)
    verdict = reading.verify(env, "s1")
    assert verdict.ok and verdict.records == 20 and verdict.verified_through == 19 and verdict.head_seq == 19
    recs = reading.records(env, "s1")
    assert [r.seq for r in recs] == list(range(20))
    assert recs[0].prev == chain.SEED and all(b.prev == a.hash for a, b in itertools.pairwise(recs))
    assert recs[3].kind == "prompt" and recs[3].fields == {"text": "record 3"} and recs[3].turn == 0


def test_bad_session_id_and_kind_are_typed_errors(env):
    with pytest.raises(JournalError, match="session id"):
        Journal(env, "a/b")
    with pytest.raises(JournalError, match="session id"):
        Journal(env, "")
    with pytest.raises(JournalError, match="kind"):
        Journal(env, "s1").stage("bogus", {}, at=0)
    with pytest.raises(JournalError, match="kind"):
        Journal(env, "s1").stage("gap", {}, at=0)  # reserved: only the journal writes gaps


# -- the tamper corpus: each found at its exact seq ------------------------------------------------------


def _flip(value: bytes, at: int) -> bytes:
    return value[:at] + bytes([value[at] ^ 0x01]) + value[at + 1:]


@pytest.mark.parametrize("where", [0, 40, 70, -1], ids=["hash", "prev", "seq", "body"])
def test_flipped_byte_found_at_its_seq(env, where):
    _fill(env)
    value = _raw(env, 7)
    _put(env, 7, _flip(value, where if where >= 0 else len(value) - 1))
    verdict = reading.verify(env, "s1")
    assert verdict.broken_seq == 7 and verdict.verified_through == 6, verdict


def test_dropped_record_found_at_its_seq(env):
    _fill(env)
    _put(env, 9, None)
    verdict = reading.verify(env, "s1")
    assert verdict.broken_seq == 9 and "missing" in verdict.reason


def test_dropped_first_record_found(env):
    _fill(env)
    _put(env, 0, None)
    assert reading.verify(env, "s1").broken_seq == 0


def test_reordered_records_found_at_first_moved_seq(env):
    _fill(env)
    a, b = _raw(env, 4), _raw(env, 5)
    _put(env, 4, b)
    _put(env, 5, a)
    verdict = reading.verify(env, "s1")
    assert verdict.broken_seq == 4 and "names seq 5" in verdict.reason


def test_duplicated_record_found_at_the_copy(env):
    _fill(env)
    values = [_raw(env, s) for s in range(20)]
    shifted = [*values[:12], values[11], *values[12:]]  # record 11 twice, the rest moved up by one
    for seq, value in enumerate(shifted):
        _put(env, seq, value)
    verdict = reading.verify(env, "s1")
    assert verdict.broken_seq == 12, verdict


def test_truncated_record_bytes_found(env):
    _fill(env)
    _put(env, 13, _raw(env, 13)[:-3])
    assert reading.verify(env, "s1").broken_seq == 13
    _put(env, 13, _raw(env, 13)[:50])
    assert reading.verify(env, "s1").broken_seq == 13


def test_cut_tail_found_at_first_missing_seq(env):
    _fill(env)
    for seq in (17, 18, 19):
        _put(env, seq, None)
    verdict = reading.verify(env, "s1")
    assert verdict.broken_seq == 17 and verdict.verified_through == 16 and "missing" in verdict.reason


def _forge_from(env: lmdb.Environment, k: int, *, rewrite_head: bool, rewrite_witness: bool = False) -> None:
    """Rewrite record k's body and recompute every hash after it, as a forger with the records db would."""
    values = [_raw(env, s) for s in range(20)]
    prev = chain.split(values[k - 1])[0]
    for seq in range(k, 20):
        _h, _p, _s, body = chain.split(values[seq])
        if seq == k:
            body = encode(JournalEntry(at=k, turn=k // 5, kind="prompt", fields={"text": "FORGED"}))
        digest, value = chain.seal(prev, seq, body)
        _put(env, seq, value, witness=digest if rewrite_witness else None)
        prev = digest
    if rewrite_head:
        with env.begin(write=True, db=db(env, ANCHOR_DB)) as txn:
            from ouroactors.core.codec import decode
            from ouroactors.runtime.execution.journal import JournalHead
            head = decode(bytes(txn.get(head_key(SID))), JournalHead)
            txn.put(head_key(SID), encode(head.model_copy(update={"head_hash": prev})))


@pytest.mark.parametrize("rewrite_head", [False, True])
def test_chain_recomputed_from_the_middle_found_at_its_seq(env, rewrite_head):
    _fill(env)
    _forge_from(env, 8, rewrite_head=rewrite_head)
    verdict = reading.verify(env, "s1")
    assert verdict.broken_seq == 8 and "witness" in verdict.reason, verdict


def test_forger_who_rewrites_witness_too_is_caught_by_the_head_only_if_head_kept(env):
    """Honest limit: a forger with the whole anchor database (witnesses and head) is not detectable here."""
    _fill(env)
    _forge_from(env, 8, rewrite_head=False, rewrite_witness=True)
    verdict = reading.verify(env, "s1")
    assert verdict.broken_seq == 19 and "anchored head" in verdict.reason


# -- a failed append never raises; the next successful one writes a gap ------------------------------------


def _arm(action: FaultAction, point: str = "storage.before_commit", nth: int = 1) -> None:
    faults.arm(FaultPlan((FaultRule(point, action, nth=nth, times=1),)))


def test_rejected_append_becomes_a_gap_record(env):
    journal = _fill(env, 5)
    _arm(FaultAction.COMMIT_REJECTED)
    journal.stage("tool_call", {"id": "c1"}, turn=1, at=100)
    journal.stage("tool_result", {"id": "c1"}, turn=1, at=101)
    result = journal.flush()
    assert not result.committed and "rejected" in result.reason and journal.degraded
    faults.disarm()
    assert journal.append("turn_settled", {"status": "completed"}, turn=1, at=102).committed
    recs = reading.records(env, "s1")
    gap = recs[5]
    assert gap.kind == "gap" and gap.seq == 5
    assert gap.fields["lost_records"] == 2 and gap.fields["lost_kinds"] == {"tool_call": 1, "tool_result": 1}
    assert gap.fields["first_lost_at"] == 100 and gap.fields["last_lost_at"] == 101
    assert recs[6].kind == "turn_settled" and reading.verify(env, "s1").ok and not journal.degraded


def test_unknown_outcome_that_did_not_land_becomes_a_gap(env):
    journal = _fill(env, 3)
    _arm(FaultAction.COMMIT_UNKNOWN, "storage.before_commit")
    assert not journal.append("prompt", {"text": "x"}, at=5).committed
    faults.disarm()
    assert journal.append("prompt", {"text": "y"}, at=6).committed
    kinds = [r.kind for r in reading.records(env, "s1")]
    assert kinds[3:] == ["gap", "prompt"]


def test_unknown_outcome_that_landed_is_no_gap(env):
    journal = _fill(env, 3)
    _arm(FaultAction.COMMIT_UNKNOWN, "storage.after_commit")
    assert not journal.append("prompt", {"text": "x"}, at=5).committed
    faults.disarm()
    assert journal.append("prompt", {"text": "y"}, at=6).committed
    recs = reading.records(env, "s1")
    assert [r.kind for r in recs[3:]] == ["prompt", "prompt"] and reading.verify(env, "s1").ok


def test_unencodable_record_is_lost_not_raised(env):
    journal = _fill(env, 2)
    journal.stage("prompt", {"text": {1, 2}}, at=9)  # a set is not encodable
    journal.flush()
    journal.append("prompt", {"text": "ok"}, at=10)
    recs = reading.records(env, "s1")
    assert recs[2].kind == "gap" and "unencodable" in recs[2].fields["reason"]


def test_records_ride_in_another_writers_transaction(env):
    journal = _fill(env, 2)
    journal.stage("tool_call", {"id": "c1"}, turn=1, at=3)
    other = db(env, b"ledger")

    def ledger_txn(txn: lmdb.Transaction) -> object:
        txn.put(b"effect-1", b"started", db=other)
        return journal.put_staged(txn)

    outcome = commit.write(env, ledger_txn)
    assert isinstance(outcome, commit.Committed)
    journal.settle_staged(outcome.value, outcome)
    assert [r.kind for r in reading.records(env, "s1")] == ["session_opened", "prompt", "tool_call"]


def test_aborted_outer_transaction_leaves_a_gap(env):
    journal = _fill(env, 2)
    journal.stage("tool_call", {"id": "c1"}, turn=1, at=3)
    batch_holder: list[object] = []

    def failing(txn: lmdb.Transaction) -> None:
        batch_holder.append(journal.put_staged(txn))
        raise RuntimeError("the ledger refused")

    with pytest.raises(RuntimeError):
        commit.write(env, failing)
    journal.settle_staged(batch_holder[0], commit.Rejected("the ledger refused"))  # type: ignore[arg-type]
    journal.append("tool_result", {"id": "c1"}, turn=1, at=4)
    recs = reading.records(env, "s1")
    assert [r.kind for r in recs[2:]] == ["gap", "tool_result"] and recs[2].fields["lost_kinds"] == {"tool_call": 1}


def test_failure_inside_put_never_spoils_the_outer_transaction(env):
    journal = _fill(env, 2)
    journal.stage("tool_call", {"id": "c1"}, turn=1, at=3)
    other = db(env, b"ledger")
    journal._anchor = "not a database"  # type: ignore[assignment]  (the witness put fails after the record put)

    def ledger_txn(txn: lmdb.Transaction) -> object:
        txn.put(b"effect-1", b"started", db=other)
        return journal.put_staged(txn, isolate=True)

    outcome = commit.write(env, ledger_txn)
    assert isinstance(outcome, commit.Committed) and outcome.value is None and journal.degraded
    with env.begin(db=other) as txn:
        assert txn.get(b"effect-1") == b"started"
    with env.begin(db=db(env, JOURNAL_DB)) as txn:
        assert txn.get(record_key(SID, 2)) is None  # the nested transaction took our record back


# -- blobs and the budget ---------------------------------------------------------------------------------


def test_a_journal_that_cannot_plan_writes_nothing_into_the_outer_transaction(env):
    journal = _fill(env, 2)
    with env.begin(write=True, db=db(env, ANCHOR_DB)) as txn:
        txn.put(head_key(SID), b"\xc1 not a head")  # a corrupt head: planning fails before any put
    journal.stage("tool_call", {"id": "c1"}, turn=1, at=3)
    other = db(env, b"ledger")

    def ledger_txn(txn: lmdb.Transaction) -> object:
        txn.put(b"effect-1", b"started", db=other)
        return journal.put_staged(txn)

    outcome = commit.write(env, ledger_txn)
    assert isinstance(outcome, commit.Committed) and outcome.value is None and journal.degraded
    with env.begin(db=db(env, JOURNAL_DB)) as txn:
        assert txn.get(record_key(SID, 2)) is None


def test_large_fields_go_to_blobs(env):
    journal = Journal(env, "s1")
    big = "x" * 10_000
    journal.append("session_opened", {"small": "s", "big": big}, at=1)
    rec = reading.records(env, "s1")[0]
    assert rec.fields["small"] == "s" and blobs.is_reference(rec.fields["big"])
    assert blobs.resolve(env, rec.fields["big"]) == (True, big)
    with env.begin(write=True, db=db(env, b"journal_blobs")) as txn:
        txn.delete(bytes.fromhex(rec.fields["big"]["$blob"]))
    assert blobs.resolve(env, rec.fields["big"])[0] is False
    assert reading.verify(env, "s1").ok  # the chain covers the reference, not the blob


def test_a_blob_already_stored_is_not_written_again_unless_it_is_wrong(env):
    """Blobs are content-addressed: every open's session_opened spills the same tool specs, and rewriting them would
    dirty their pages in each message's first commit. A blob already under the address with the right bytes is
    left as it is (nothing is written: test_replay_attacks' empty commit); one whose bytes do not hash to the
    address (a stand-in put there) is replaced by the next append that spills the real bytes."""
    big = "y" * 10_000
    first = Journal(env, "s1")
    first.append("session_opened", {"big": big}, at=1)
    address = reading.records(env, "s1")[0].fields["big"]["$blob"]
    with env.begin(db=db(env, b"journal_blobs")) as txn:
        right = bytes(txn.get(bytes.fromhex(address)))
    with env.begin(write=True, db=db(env, b"journal_blobs")) as txn:
        txn.put(bytes.fromhex(address), b"stand-in")
    assert blobs.get(env, address) is None  # a wrong blob reads as missing, never as other bytes
    again = Journal(env, "s2")
    assert again.append("session_opened", {"big": big}, at=2).committed
    with env.begin(db=db(env, b"journal_blobs")) as txn:
        assert bytes(txn.get(bytes.fromhex(address))) == right
    assert reading.records(env, "s2")[0].fields["big"]["$blob"] == address and reading.verify(env, "s2").ok


def test_budget_drops_whole_old_turns_and_leaves_a_truncated_head(env):
    journal = Journal(env, "s1", budget_bytes=4000)
    journal.append("session_opened", {"version": 1}, at=0)
    for turn in range(1, 30):
        journal.stage("turn_started", {}, turn=turn, at=turn)
        journal.stage("prompt", {"text": "p" * 100}, turn=turn, at=turn)
        journal.stage("turn_settled", {"status": "completed"}, turn=turn, at=turn)
        assert journal.flush().committed
    verdict = reading.verify(env, "s1")
    assert verdict.ok, verdict
    recs = reading.records(env, "s1")
    first = recs[0]
    assert first.kind == "truncated" and first.seq == verdict.first_seq > 0
    assert first.fields["dropped_through_seq"] == first.seq
    assert recs[1].kind == "turn_started"  # whole turns only
    head = reading.head(env, "s1")
    assert head is not None and head.bytes <= 4000 and head.head_seq == 29 * 3


# -- properties and threads -------------------------------------------------------------------------------

@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seq=st.integers(0, 19), where=st.integers(0, 10_000), bit=st.integers(0, 7))
def test_any_flipped_bit_is_found_at_its_seq(env, seq, where, bit):
    with env.begin(write=True) as txn:  # a fresh session per example
        txn.drop(db(env, JOURNAL_DB), delete=False)
        txn.drop(db(env, ANCHOR_DB), delete=False)
    _fill(env)
    value = _raw(env, seq)
    at = where % len(value)
    _put(env, seq, value[:at] + bytes([value[at] ^ (1 << bit)]) + value[at + 1:])
    assert reading.verify(env, "s1").broken_seq == seq


def test_threads_staging_while_others_commit_lose_nothing(env):
    import threading

    journal = _fill(env, 1)
    per_thread, threads = 200, 4

    def work(t: int) -> None:
        for i in range(per_thread):
            journal.stage("prompt", {"text": f"{t}:{i}"}, at=i)
            if i % 7 == 0:
                assert journal.flush().committed

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert journal.flush().committed
    texts = [r.fields["text"] for r in reading.records(env, "s1")[1:]]
    assert sorted(texts) == sorted(f"{t}:{i}" for t in range(threads) for i in range(per_thread))
    for t in range(threads):  # each thread's records in its own order
        mine = [x for x in texts if x.startswith(f"{t}:")]
        assert mine == [f"{t}:{i}" for i in range(per_thread)]
    assert reading.verify(env, "s1").ok


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(["ok", "ok", "ok", "rejected", "unknown_before", "unknown_after", "batch"]),
                min_size=1, max_size=25))
def test_every_record_is_present_or_counted_in_a_gap(env, plan):
    """Whatever fails in between: the chain verifies, records keep their order, and each one staged is either
    stored or counted by a gap record — never silently lost."""
    with env.begin(write=True) as txn:
        txn.drop(db(env, JOURNAL_DB), delete=False)
        txn.drop(db(env, ANCHOR_DB), delete=False)
    journal = Journal(env, "s1")
    staged: list[str] = []
    for step, action in enumerate(plan):
        faults.disarm()
        if action == "rejected":
            _arm(FaultAction.COMMIT_REJECTED)
        elif action == "unknown_before":
            _arm(FaultAction.COMMIT_UNKNOWN)
        elif action == "unknown_after":
            _arm(FaultAction.COMMIT_UNKNOWN, "storage.after_commit")
        for n in range(3 if action == "batch" else 1):
            journal.stage("prompt", {"text": f"{step}.{n}"}, at=step)
            staged.append(f"{step}.{n}")
        journal.flush()
    faults.disarm()
    each_record_stored_or_counted_once(env, journal, staged)


def test_a_forger_with_the_whole_anchor_database_is_caught_by_the_ledgers_evidence(env):
    """The journal's head hash rides in the ledger's settled evidence (``anchor_evidence``); verify with
    ``ledger_anchors`` names the first anchored record at or after the forged one."""
    from ouroactors.authorities.ledger.domain import DEFAULT_KINDS, StartRequest, fingerprint
    from ouroactors.authorities.ledger.store import LedgerStore, Settle, Start

    journal = _fill(env, 13)  # seqs 0..12 committed
    evidence = journal.anchor_evidence()
    assert evidence == {"journal": {"seq": 12, "hash": _raw(env, 12)[:32].hex()}}
    for i in range(13, 20):
        journal.append("prompt", {"text": f"record {i}"}, turn=i // 5, at=i)
    store = LedgerStore(env, node="test", kinds=DEFAULT_KINDS, fence=None)
    kind = sorted(DEFAULT_KINDS)[0]
    request = StartRequest(effect_id="e1", kind=kind, idempotency_key="k1", fingerprint=fingerprint(kind, {}),
                           principal="s1", session_id="s1")
    assert isinstance(store.apply([Start(request), Settle("e1", "ok", evidence=evidence)]), commit.Committed)
    anchors = reading.ledger_anchors(env, "s1")
    assert anchors == {12: _raw(env, 12)[:32]} and reading.verify(env, "s1", anchors).ok
    _forge_from(env, 8, rewrite_head=True, rewrite_witness=True)
    assert reading.verify(env, "s1").ok  # the journal's own anchor was rewritten too: undetectable alone
    verdict = reading.verify(env, "s1", reading.ledger_anchors(env, "s1"))
    assert verdict.broken_seq == 12 and "ledger" in verdict.reason


def test_verify_reads_one_snapshot_so_a_concurrent_append_is_no_false_alarm(env, monkeypatch):
    """An append lands while verify runs — right after the head is read, or as the records are read."""
    journal = _fill(env, 5)
    real_items, real_head = reading._items, reading.head
    appended: list[bool] = []

    def append_once() -> None:
        if not appended:
            appended.append(True)
            journal.append("prompt", {"text": "appended while verifying"}, at=99)

    def head_then_append(env_, session):
        found = real_head(env_, session)
        append_once()
        return found

    def append_then_items(txn, env_, sid, first):
        append_once()
        return real_items(txn, env_, sid, first)

    monkeypatch.setattr(reading, "head", head_then_append)
    monkeypatch.setattr(reading, "_items", append_then_items)
    verdict = reading.verify(env, "s1")
    assert verdict.ok and verdict.head_seq == 4 and appended
    monkeypatch.setattr(reading, "_items", real_items)
    assert reading.verify(env, "s1").head_seq == 5


def test_two_writers_of_one_session_still_make_one_chain(env):
    """A stale runtime and its replacement both appending: each write chains from the durable head."""
    first, second = _fill(env, 3), Journal(env, "s1")
    for i in range(10):
        (first if i % 2 else second).append("prompt", {"text": f"w{i}"}, at=i)
    verdict = reading.verify(env, "s1")
    assert verdict.ok and verdict.records == 13
    assert [r.fields["text"] for r in reading.records(env, "s1")[3:]] == [f"w{i}" for i in range(10)]


def test_a_writer_rereads_the_head_only_when_someone_else_wrote_it(env, monkeypatch):
    """The head bytes a writer put last are not decoded again by its next write; a head another writer put since (or
    a transaction of its own that did not commit left behind) is decoded — the durable head still decides seq."""
    from ouroactors.runtime.execution import journal as journal_module

    decoded: list[int] = []
    real = journal_module._decode_head

    def counting(raw: bytes, sid: bytes) -> journal_module.JournalHead:
        head = real(raw, sid)
        decoded.append(head.head_seq)
        return head

    monkeypatch.setattr(journal_module, "_decode_head", counting)
    first = _fill(env, 3)
    decoded.clear()
    first.append("prompt", {"text": "mine"}, at=10)
    assert decoded == []  # its own head
    Journal(env, "s1").append("prompt", {"text": "theirs"}, at=11)  # a new writer reads the head: decoded once
    assert decoded == [3]
    first.append("prompt", {"text": "mine again"}, at=12)
    assert decoded == [3, 4]  # the other writer's head
    verdict = reading.verify(env, "s1")
    assert verdict.ok and verdict.head_seq == 5
    assert [r.fields["text"] for r in reading.records(env, "s1")[3:]] == ["mine", "theirs", "mine again"]


def test_a_flush_with_nothing_staged_settles_a_doubt_from_the_durable_head(env):
    """What a steer's acceptance needs: whether the record it committed with an unknown outcome is journaled, known
    before the steer is answered (one more flush: the head says), not at some later write."""
    journal = _fill(env, 3)
    _arm(FaultAction.COMMIT_UNKNOWN, "storage.after_commit")  # it lands, and its writer is told "unknown"
    assert not journal.append("steer_received", {"id": "a", "text": "x"}, turn=1, at=5).committed
    faults.disarm()
    assert journal.in_doubt and journal.degraded
    assert journal.flush().committed
    assert not journal.in_doubt and not journal.degraded  # it had landed: nothing is missing
    _arm(FaultAction.COMMIT_UNKNOWN, "storage.before_commit")  # told "unknown", and it did not land
    assert not journal.append("steer_received", {"id": "b", "text": "y"}, turn=1, at=6).committed
    faults.disarm()
    assert journal.flush().committed and not journal.in_doubt and journal.degraded is False
    kinds = [r.kind for r in reading.records(env, "s1")]
    assert kinds[3:] == ["steer_received", "gap"] and reading.verify(env, "s1").ok  # the loss named at once
