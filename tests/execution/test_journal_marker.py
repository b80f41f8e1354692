"""A journal's losses outlive its writer: the durable gap marker (``journal_loss``), on a real LMDB environment.

Each test ends the writer that lost records (the object is dropped, as its process would be) and lets a *new*
writer of the session — the next runtime, or the coordinator — write: the gap must be in what it writes.
"""

from __future__ import annotations

import lmdb
import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ouroactors.authorities.storage import commit
from ouroactors.authorities.storage.env import db
from ouroactors.core import faults
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule
from ouroactors.runtime.execution import reading
from ouroactors.runtime.execution.journal import ANCHOR_DB, Journal
from ouroactors.runtime.execution.journal_loss import Lost, decode_marker, encode_marker, marker_key

from .conftest import each_record_stored_or_counted_once

SID = b"s1"


pytestmark = pytest.mark.usefixtures("faults_disarmed")


def _opened(env: lmdb.Environment) -> Journal:
    journal = Journal(env, "s1")
    journal.stage("session_opened", {"version": 1}, at=1)
    assert journal.flush().committed
    return journal


def _marker(env: lmdb.Environment) -> bytes | None:
    with env.begin(db=db(env, ANCHOR_DB)) as txn:
        raw = txn.get(marker_key(SID))
        return None if raw is None else bytes(raw)


def _ledger_start(env: lmdb.Environment, journal: Journal) -> commit.Committed[object]:
    """A ledger transaction that commits its own entry, the journal's records riding in a nested transaction."""
    ledger = db(env, b"ledger")

    def txn_fn(txn: lmdb.Transaction) -> object:
        txn.put(b"effect-1", b"started", db=ledger)
        return journal.put_staged(txn, isolate=True)

    outcome = commit.write(env, txn_fn)
    assert isinstance(outcome, commit.Committed)
    journal.settle_staged(outcome.value, outcome)  # type: ignore[arg-type]
    return outcome


def _gaps(env: lmdb.Environment) -> list[dict[str, object]]:
    return [r.fields for r in reading.records(env, "s1") if r.kind == "gap"]


def test_a_writer_dead_after_its_puts_failed_in_a_committed_ledger_txn_is_named_by_the_next_writer(env):
    first = _opened(env)
    faults.arm(FaultPlan((FaultRule("journal.put", FaultAction.RAISE, nth=1, times=1),)))
    first.stage("model_result", {"index": 0}, turn=1, at=10)
    first.stage("tool_call", {"call_id": "c1"}, turn=1, at=11)
    outcome = _ledger_start(env, first)
    faults.disarm()
    assert outcome.value is None and first.degraded  # the ledger's entry committed, the journal's records did not
    with env.begin(db=db(env, b"ledger")) as txn:
        assert txn.get(b"effect-1") == b"started"
    assert _marker(env) is not None  # committed with the ledger's entry
    del first  # its process is gone: what it remembered with it

    second = Journal(env, "s1")
    assert second.append("turn_started", {}, turn=1, at=20).committed
    recs = reading.records(env, "s1")
    assert [r.kind for r in recs] == ["session_opened", "gap", "turn_started"]
    assert recs[1].fields["lost_records"] == 2
    assert recs[1].fields["lost_kinds"] == {"model_result": 1, "tool_call": 1}
    assert "InjectedFault" in str(recs[1].fields["reason"]) or "journal write failed" in str(recs[1].fields["reason"])
    assert _marker(env) is None and reading.verify(env, "s1").ok
    assert second.append("prompt", {"text": "again"}, at=21).committed
    assert len(_gaps(env)) == 1  # named once


def test_a_writer_dead_after_its_transaction_was_rejected_is_named_by_the_next_writer(env):
    first = _opened(env)
    faults.arm(FaultPlan((FaultRule("storage.before_commit", FaultAction.COMMIT_REJECTED, nth=1, times=1),)))
    assert not first.append("model_call", {"index": 0}, turn=1, at=10).committed
    faults.disarm()
    assert _marker(env) is not None  # its own commit, right after the refusal
    del first

    second = Journal(env, "s1")
    assert second.append("prompt", {"text": "x"}, at=20).committed
    gaps = _gaps(env)
    assert len(gaps) == 1 and gaps[0]["lost_kinds"] == {"model_call": 1} and "rejected" in str(gaps[0]["reason"])
    assert _marker(env) is None


def test_the_writer_that_lost_names_its_loss_once_and_clears_its_marker(env):
    journal = _opened(env)
    faults.arm(FaultPlan((FaultRule("journal.put", FaultAction.RAISE, nth=1, times=1),)))
    journal.stage("tool_call", {"call_id": "c1"}, turn=1, at=10)
    _ledger_start(env, journal)
    faults.disarm()
    assert _marker(env) is not None
    assert journal.append("tool_result", {"call_id": "c1"}, turn=1, at=11).committed
    assert journal.append("prompt", {"text": "x"}, at=12).committed
    gaps = _gaps(env)
    assert len(gaps) == 1 and gaps[0]["lost_records"] == 1 and _marker(env) is None


@pytest.mark.parametrize("failure", [("journal.put", FaultAction.RAISE),
                                     ("storage.before_commit", FaultAction.COMMIT_REJECTED)])
def test_a_marker_merged_by_a_write_that_failed_is_still_named_exactly_once(env, failure):
    first = _opened(env)
    faults.arm(FaultPlan((FaultRule("journal.put", FaultAction.RAISE, nth=1, times=1),)))
    first.stage("tool_call", {"call_id": "c1"}, turn=1, at=10)
    _ledger_start(env, first)
    del first
    # the next writer reads the marker in a write that then fails (its puts, or its whole transaction), and writes
    # again: the first writer's loss must be counted once, not once per read
    second = Journal(env, "s1")
    faults.arm(FaultPlan((FaultRule(failure[0], failure[1], nth=1, times=1),)))
    assert not second.append("prompt", {"text": "refused"}, at=20).committed
    faults.disarm()
    assert second.append("prompt", {"text": "kept"}, at=21).committed
    assert second.append("prompt", {"text": "later"}, at=22).committed
    gaps = _gaps(env)
    assert len(gaps) == 1 and gaps[0]["lost_kinds"] == {"tool_call": 1, "prompt": 1}
    assert _marker(env) is None and reading.verify(env, "s1").ok


def test_a_marker_that_does_not_decode_is_a_gap_of_unknown_records(env):
    journal = _opened(env)
    with env.begin(write=True, db=db(env, ANCHOR_DB)) as txn:
        txn.put(marker_key(SID), b"\xc1 not a marker")
    del journal
    assert Journal(env, "s1").append("prompt", {"text": "x"}, at=5).committed
    gaps = _gaps(env)
    assert len(gaps) == 1 and gaps[0]["lost_kinds"] == {"(unknown)": 1} and "does not decode" in str(gaps[0]["reason"])
    assert _marker(env) is None and reading.verify(env, "s1").ok


def test_a_marker_round_trips():
    lost = Lost()
    lost.add("tool_call", 5, "why")
    lost.add("tool_call", 9, "why")
    lost.add("model_result", 7, "why")
    token, back = decode_marker(encode_marker(lost, b"12345678"))
    assert token == b"12345678" and back.count == 3 and dict(back.kinds) == {"tool_call": 2, "model_result": 1}
    assert (back.first_at, back.last_at, back.reason) == (5, 9, "why")


@settings(deadline=None)
@given(st.one_of(st.binary(max_size=64), st.builds(lambda v: msgpack.packb(v), st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=8) | st.binary(max_size=8),
    lambda inner: st.lists(inner, max_size=7) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=12))))
def test_any_bytes_in_the_marker_decode_to_a_loss_never_an_exception(raw):
    _token, lost = decode_marker(raw)
    assert lost.count >= 1


@settings(deadline=None, max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(["ok", "ok", "rejected", "puts_fail", "puts_fail", "die", "batch"]), min_size=1,
                max_size=20))
def test_whatever_fails_and_whoever_dies_every_record_is_stored_or_counted_by_exactly_one_gap(env, plan):
    """Writers die (their object dropped, as a process's) after any failure; each next writer goes on. Each record
    staged is then stored, or counted by a gap record, once: never silent, never twice, the chain verifying."""
    with env.begin(write=True) as txn:
        for name in (b"journal", ANCHOR_DB, b"ledger"):
            txn.drop(db(env, name), delete=False)
    journal = Journal(env, "s1")
    staged: list[str] = []
    for step, action in enumerate(plan):
        if action == "die":
            journal = Journal(env, "s1")
            continue
        for n in range(3 if action == "batch" else 1):
            journal.stage("prompt", {"text": f"{step}.{n}"}, at=step)
            staged.append(f"{step}.{n}")
        if action == "rejected":
            faults.arm(FaultPlan((FaultRule("storage.before_commit", FaultAction.COMMIT_REJECTED, nth=1),)))
            journal.flush()
        elif action == "puts_fail":
            faults.arm(FaultPlan((FaultRule("journal.put", FaultAction.RAISE, nth=1),)))
            _ledger_start(env, journal)
        else:
            journal.flush()
        faults.disarm()
    each_record_stored_or_counted_once(env, journal, staged)
    assert _marker(env) is None  # the last write named whatever was left


def test_an_oversized_marker_is_named_in_a_bounded_gap_record(env):
    """Attack: a marker of another writer (or anyone who can write the data dir) with 50,000 kinds, 1 MB names and
    reason. The next write names the loss — every record counted — in a gap record of bounded size."""
    journal = _opened(env)
    kinds = {f"k{i}" + "x" * (1_000_000 if i == 0 else 0): 1 for i in range(50_000)}
    raw = msgpack.packb([1, b"other-wr", kinds, 1, 2, "r" * 1_000_000], use_bin_type=True)
    with env.begin(write=True, db=db(env, ANCHOR_DB)) as txn:
        txn.put(marker_key(SID), raw)
    del journal
    assert Journal(env, "s1").append("prompt", {"text": "x"}, at=5).committed
    [gap] = _gaps(env)
    assert gap["lost_records"] == 50_000 and len(gap["lost_kinds"]) <= 33  # type: ignore[arg-type]
    reason, kinds = gap["reason"], gap["lost_kinds"]  # inline (a field too big would be a blob reference instead)
    assert isinstance(reason, str) and len(reason) <= 500, str(reason)[:200]
    assert isinstance(kinds, dict) and max(len(k) for k in kinds) <= 500
    assert _marker(env) is None and reading.verify(env, "s1").ok
