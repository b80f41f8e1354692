"""The effect ledger's LMDB store (``LedgerStore``) on a real environment: decisions, durability,
recovery to ambiguous, list filters, sequences, corrupt records failing closed, and fencing."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import lmdb
import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ouroactors.authorities.ledger.domain import (
    DEFAULT_KINDS,
    RESTARTED_BEFORE_SETTLEMENT,
    AlreadySettled,
    Created,
    EffectConflict,
    Entry,
    Existing,
    LedgerError,
    Status,
    UnknownEffect,
    UnknownEffectKind,
)
from ouroactors.authorities.ledger.store import NEXT_SEQ_KEY, LedgerStore, Settle, Start
from ouroactors.authorities.storage.commit import Committed, Rejected, write
from ouroactors.authorities.storage.env import (
    GENERATION_KEY,
    StorageConfig,
    close_env,
    db,
    encode_u64,
    ensure_schema,
    meta_db,
    open_env,
)
from ouroactors.core.codec import MAX_INLINE_BYTES, encode, str_key
from ouroactors.core.errors import CorruptRecord

from .workers import start_request


def make_store(env: lmdb.Environment, fence: int | None = None) -> LedgerStore:
    return LedgerStore(env, node="node-1", kinds=DEFAULT_KINDS, fence=fence)


@pytest.fixture
def store(env) -> LedgerStore:
    return make_store(env)


def committed(outcome) -> list:
    assert isinstance(outcome, Committed), outcome
    return outcome.value


def one(store: LedgerStore, op) -> object:
    [result] = committed(store.apply([op]))
    return result


def raw_entries(env: lmdb.Environment) -> dict[bytes, bytes]:
    with env.begin(db=db(env, b"ledger")) as txn:
        return {bytes(k): bytes(v) for k, v in txn.cursor()}


def raw_seqs(env: lmdb.Environment) -> dict[int, bytes]:
    with env.begin(db=db(env, b"ledger_seq")) as txn:
        return {int.from_bytes(k, "big"): bytes(v) for k, v in txn.cursor()}


def set_generation(env: lmdb.Environment, generation: int) -> None:
    assert isinstance(write(env, lambda txn: txn.put(GENERATION_KEY, encode_u64(generation), db=meta_db(env))),
                      Committed)


# -- start --------------------------------------------------------------------------------------


def test_first_start_is_created_with_seq_1_and_durable(env, config, store):
    result = one(store, Start(start_request("e1", session="s1")))
    assert isinstance(result, Created)
    assert result.answer == "created"
    entry = result.entry
    assert (entry.seq, entry.effect_id, entry.status, entry.node) == (1, "e1", Status.STARTED, "node-1")
    assert entry.settled_ns is None and entry.session_id == "s1"

    close_env(config)
    reopened = make_store(open_env(config))
    assert reopened.get("e1") == entry
    assert reopened.list() == [entry]


def test_identical_start_answers_the_existing_entry_and_consumes_no_seq(store):
    first = one(store, Start(start_request("e1")))
    again = one(store, Start(start_request("e1")))
    assert isinstance(again, Existing)
    assert again.answer == "existing"
    assert again.entry == first.entry
    assert one(store, Start(start_request("e2"))).entry.seq == 2


def test_conflicting_start_is_refused_alone_while_the_rest_of_the_batch_commits(env, store):
    original = one(store, Start(start_request("e1", args={"path": "/a"}))).entry
    before = raw_entries(env)[b"e1"]
    results = committed(store.apply([
        Start(start_request("e1", args={"path": "/b"})),  # same id, other fingerprint
        Start(start_request("e2")),
        Settle("e1", "ok"),
    ]))
    assert isinstance(results[0], EffectConflict)
    assert "e1" in str(results[0]) and "another fingerprint" in str(results[0])
    assert isinstance(results[1], Created) and results[1].entry.seq == 2  # the conflict took no seq
    assert isinstance(results[2], Created) and results[2].entry.status is Status.OK
    stored = store.get("e1")
    assert stored.fingerprint == original.fingerprint
    assert stored.status is Status.OK
    assert raw_entries(env)[b"e1"] != before  # settled, still with the original fingerprint
    assert sorted(raw_seqs(env)) == [1, 2]


def test_a_start_of_an_unknown_kind_is_refused_listing_the_known_kinds(env, store):
    result = one(store, Start(start_request("e1", kind="rm_rf")))
    assert isinstance(result, UnknownEffectKind)
    message = str(result)
    assert "'rm_rf'" in message
    for kind in DEFAULT_KINDS:
        assert kind in message
    assert raw_entries(env) == {} and raw_seqs(env) == {}


def test_a_store_with_extra_kinds_accepts_them(env):
    store = LedgerStore(env, node="n", kinds=DEFAULT_KINDS | {"deploy"}, fence=None)
    assert isinstance(one(store, Start(start_request("e1", kind="deploy"))), Created)


# -- settle -------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", ["ok", "failed"])
def test_settle_started_entry(env, config, store, status):
    one(store, Start(start_request("e1")))
    result = one(store, Settle("e1", status, reason="done", evidence={"exit": 0}, by="runner-7"))
    assert isinstance(result, Created)
    entry = result.entry
    assert entry.status is Status(status)
    assert entry.settled_ns is not None and entry.settled_ns >= entry.started_ns
    assert (entry.reason, entry.evidence, entry.settled_by, entry.seq) == ("done", {"exit": 0}, "runner-7", 1)
    close_env(config)
    assert make_store(open_env(config)).get("e1") == entry


def test_settle_an_unknown_effect(env, store):
    result = one(store, Settle("ghost", "ok"))
    assert isinstance(result, UnknownEffect)
    assert "ghost" in str(result)
    assert raw_entries(env) == {}


@pytest.mark.parametrize("status", ["maybe", "denied", "started", "ambiguous", "OK"])
def test_settle_with_a_status_outside_the_vocabulary_is_refused(env, store, status):
    one(store, Start(start_request("e1")))
    before = raw_entries(env)
    result = one(store, Settle("e1", status))
    assert isinstance(result, LedgerError)
    assert "ok, failed" in str(result) and repr(status) in str(result)
    assert raw_entries(env) == before


@pytest.mark.parametrize(("first", "second"), [("ok", "failed"), ("failed", "ok")])
def test_settling_again_is_idempotent_with_the_same_status_and_refused_with_another(env, store, first, second):
    one(store, Start(start_request("e1")))
    settled = one(store, Settle("e1", first)).entry
    before = raw_entries(env)
    same = one(store, Settle("e1", first, reason="retry"))
    assert isinstance(same, Existing) and same.entry == settled
    other = one(store, Settle("e1", second))
    assert isinstance(other, AlreadySettled)
    assert f"already {first}" in str(other)
    assert raw_entries(env) == before


def test_record_denied_is_terminal(env, store):
    result = one(store, Start(start_request("e1"), Status.DENIED, "policy forbids it"))
    assert isinstance(result, Created)
    denied = result.entry
    assert denied.status is Status.DENIED and denied.terminal
    assert denied.reason == "policy forbids it" and denied.settled_ns == denied.started_ns
    for status in ("ok", "failed"):
        assert isinstance(one(store, Settle("e1", status, evidence={"x": 1})), AlreadySettled)
    assert committed(store.recover()) == 0
    assert store.get("e1") == denied


def test_an_ambiguous_entry_needs_evidence_or_an_operator_reason(env, store):
    one(store, Start(start_request("e1")))
    one(store, Start(start_request("e2")))
    one(store, Start(start_request("e3")))
    assert committed(store.recover()) == 3
    before = raw_entries(env)

    for refused in (Settle("e1", "ok"), Settle("e1", "ok", reason="I think so"),
                    Settle("e1", "ok", evidence={}), Settle("e1", "failed", operator=True),
                    Settle("e1", "ok", evidence={"pr": 12}, by="runner")):  # a writer's evidence proves nothing
        result = one(store, refused)
        assert isinstance(result, LedgerError), refused
        assert "ambiguous" in str(result) and "only a verified operator" in str(result)
    assert raw_entries(env) == before

    by_evidence = one(store, Settle("e1", "ok", reason="reconciled", evidence={"pr": 12},
                                    by=f"reconciler:{store.get('e1').kind}", reconciler=True))
    assert isinstance(by_evidence, Created) and by_evidence.entry.status is Status.OK
    by_operator = one(store, Settle("e2", "failed", reason="checked by hand", by="operator:ann", operator=True))
    assert isinstance(by_operator, Created) and by_operator.entry.status is Status.FAILED
    assert by_operator.entry.settled_by == "operator:ann"
    assert store.get("e3").status is Status.AMBIGUOUS


def test_oversized_evidence_is_refused_naming_the_limit(env, store):
    one(store, Start(start_request("e1")))
    one(store, Start(start_request("e2")))
    before = raw_entries(env)[b"e1"]
    results = committed(store.apply([Settle("e1", "ok", evidence={"blob": "x" * 3000}), Settle("e2", "ok")]))
    assert isinstance(results[0], LedgerError)
    assert str(MAX_INLINE_BYTES) in str(results[0]) and "limit" in str(results[0])
    assert isinstance(results[1], Created)
    assert raw_entries(env)[b"e1"] == before
    assert store.get("e1").status is Status.STARTED
    assert store.get("e2").status is Status.OK


@pytest.mark.parametrize("evidence", [{"x": {1, 2}}, {"x": float("nan")}, {1: "int key"}, {"x": {2: "nested"}}],
                         ids=["set", "nan", "int-key", "nested-int-key"])
def test_unencodable_evidence_is_refused_alone_not_the_whole_batch(env, store, evidence):
    one(store, Start(start_request("e1")))
    one(store, Start(start_request("e2")))
    before = raw_entries(env)[b"e1"]
    results = committed(store.apply([Settle("e1", "ok", evidence=evidence), Settle("e2", "ok")]))
    assert isinstance(results[0], LedgerError)
    assert "evidence" in str(results[0])
    assert isinstance(results[1], Created)
    assert raw_entries(env)[b"e1"] == before
    assert store.get("e2").status is Status.OK


def test_an_effect_id_too_long_for_a_key_is_refused_alone(env, store):
    too_long = "€" * 200  # 200 characters pass the request's length check, but 600 bytes of UTF-8
    fits = "é" * 200  # 400 bytes
    results = committed(store.apply([Start(start_request(too_long)), Settle("ü" * 300, "ok"),
                                     Start(start_request(fits)), Start(start_request("e2"))]))
    assert isinstance(results[0], LedgerError) and "500 bytes" in str(results[0])
    assert isinstance(results[1], LedgerError) and "500 bytes" in str(results[1])
    assert isinstance(results[2], Created) and results[2].entry.seq == 1
    assert isinstance(results[3], Created) and results[3].entry.seq == 2
    assert store.get(fits).seq == 1
    assert len(raw_entries(env)) == 2


# -- recovery -----------------------------------------------------------------------------------


@contextmanager
def fresh_store() -> Iterator[tuple[lmdb.Environment, LedgerStore]]:
    with tempfile.TemporaryDirectory() as tmp:
        config = StorageConfig.under(tmp)
        env = open_env(config)
        try:
            ensure_schema(env, config.path)
            yield env, make_store(env)
        finally:
            close_env(config)


FINAL_STATES = ["started", "ok", "failed", "denied", "ambiguous", "ambiguous->ok", "ambiguous->failed"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(FINAL_STATES), min_size=0, max_size=12))
def test_recover_turns_every_started_entry_ambiguous_and_nothing_else(states):
    with fresh_store() as (_env, store):
        # entries that must be ambiguous (or settled from ambiguous) go through one earlier recovery
        early = [(f"e{i}", s) for i, s in enumerate(states) if s.startswith("ambiguous")]
        late = [(f"e{i}", s) for i, s in enumerate(states) if not s.startswith("ambiguous")]
        committed(store.apply([Start(start_request(eid)) for eid, _ in early]))
        assert committed(store.recover()) == len(early)
        ops: list = []
        for eid, state in early:
            if "->" in state:
                ops.append(Settle(eid, state.split("->")[1], evidence={"looked": "up"},
                                  by=f"reconciler:{store.get(eid).kind}", reconciler=True))
        for eid, state in late:
            ops.append(Start(start_request(eid), Status.DENIED, "no") if state == "denied"
                       else Start(start_request(eid)))
            if state in ("ok", "failed"):
                ops.append(Settle(eid, state))
        assert all(not isinstance(r, LedgerError) for r in committed(store.apply(ops)))

        before = {entry.effect_id: entry for entry in store.list(limit=1000)}
        assert len(before) == len(states)
        started = {eid for eid, entry in before.items() if entry.status is Status.STARTED}
        assert started == {eid for eid, state in late if state == "started"}

        assert committed(store.recover()) == len(started)
        after = {entry.effect_id: entry for entry in store.list(limit=1000)}
        assert after.keys() == before.keys()
        for eid, old in before.items():
            new = after[eid]
            if eid in started:
                assert new.status is Status.AMBIGUOUS
                assert new.reason == RESTARTED_BEFORE_SETTLEMENT
                assert new.settled_ns is not None
                assert new.model_copy(update={"status": Status.STARTED, "reason": None,
                                              "settled_ns": None}) == old
            else:
                assert new == old
            assert new.status is not Status.FAILED or old.status is Status.FAILED
        assert committed(store.recover()) == 0
        assert {e.effect_id: e for e in store.list(limit=1000)} == after


def test_recover_survives_reopen(env, config, store):
    one(store, Start(start_request("e1")))
    assert committed(store.recover()) == 1
    close_env(config)
    entry = make_store(open_env(config)).get("e1")
    assert entry.status is Status.AMBIGUOUS and entry.reason == RESTARTED_BEFORE_SETTLEMENT


# -- reads --------------------------------------------------------------------------------------


@pytest.fixture
def populated(store) -> LedgerStore:
    #        id    session kind      final
    rows = [("zz", "s1", "example", "ok"),
            ("aa", "s2", "shell", "started"),
            ("mm", "s1", "shell", "failed"),
            ("bb", "s1", "example", "started"),
            ("yy", "s2", "example", "denied"),
            ("cc", "s1", "shell", "ok")]
    for eid, session, kind, final in rows:
        status = Status.DENIED if final == "denied" else Status.STARTED
        one(store, Start(start_request(eid, session=session, kind=kind), status, "no" if final == "denied" else None))
        if final in ("ok", "failed"):
            one(store, Settle(eid, final))
    return store


def ids(entries: list[Entry]) -> list[str]:
    return [entry.effect_id for entry in entries]


def test_list_is_in_seq_order_not_key_order(populated):
    entries = populated.list()
    assert ids(entries) == ["zz", "aa", "mm", "bb", "yy", "cc"]
    assert [entry.seq for entry in entries] == [1, 2, 3, 4, 5, 6]


def test_list_filters(populated):
    assert ids(populated.list(status="started")) == ["aa", "bb"]
    assert ids(populated.list(status="ok")) == ["zz", "cc"]
    assert ids(populated.list(session="s1")) == ["zz", "mm", "bb", "cc"]
    assert ids(populated.list(kind="shell")) == ["aa", "mm", "cc"]
    assert ids(populated.list(session="s1", kind="shell")) == ["mm", "cc"]
    assert ids(populated.list(session="s2", status="denied")) == ["yy"]
    assert populated.list(session="nobody") == []


def test_list_since_seq_is_inclusive_and_limit_applies_after_filters(populated):
    assert ids(populated.list(since_seq=3)) == ["mm", "bb", "yy", "cc"]
    assert ids(populated.list(since_seq=7)) == []
    assert ids(populated.list(limit=2)) == ["zz", "aa"]
    assert ids(populated.list(session="s1", limit=3)) == ["zz", "mm", "bb"]
    assert ids(populated.list(session="s1", since_seq=2, limit=2)) == ["mm", "bb"]
    assert populated.list(limit=0) == []


def test_counts(populated):
    assert populated.counts() == {"ok": 2, "started": 2, "failed": 1, "denied": 1}


def test_sequences_only_grow_across_reopen(env, config, store):
    seqs = [one(store, Start(start_request(f"a{i}"))).entry.seq for i in range(3)]
    assert seqs == [1, 2, 3]
    close_env(config)
    env = open_env(config)
    store = make_store(env)
    more = [one(store, Start(start_request(f"b{i}"))).entry.seq for i in range(2)]
    assert more == [4, 5]
    with env.begin(db=meta_db(env)) as txn:
        assert txn.get(NEXT_SEQ_KEY) is None  # derived from the seq index: no page of meta in a start's commit
    assert sorted(raw_seqs(env)) == [1, 2, 3, 4, 5]


def test_a_next_seq_kept_by_an_older_data_dir_is_honoured(env, store):
    one(store, Start(start_request("a0")))
    with env.begin(write=True, db=meta_db(env)) as txn:  # an older build kept the next number here, past the index
        txn.put(NEXT_SEQ_KEY, encode_u64(10))
    assert [one(store, Start(start_request(f"b{i}"))).entry.seq for i in range(2)] == [10, 11]


# -- corrupt records fail closed ----------------------------------------------------------------

GARBAGE = {
    "not-msgpack": b"\xc1\xc1garbage",
    "wrong-shape": msgpack.packb(["ledger.entry", 1, "too few fields"]),
    "newer-version": msgpack.packb(["ledger.entry", 99]),
    "other-schema": encode(start_request("e1")),
}


@pytest.mark.parametrize("garbage", list(GARBAGE.values()), ids=list(GARBAGE))
def test_a_corrupt_entry_fails_closed_and_is_quarantined(env, store, garbage):
    one(store, Start(start_request("e1", session="s1")))
    good = one(store, Start(start_request("e2", session="s1"))).entry
    assert isinstance(write(env, lambda txn: txn.put(str_key("e1"), garbage, db=db(env, b"ledger"))), Committed)

    store = make_store(env)  # a fresh store: nothing in memory about it
    with pytest.raises(CorruptRecord) as raised:
        store.get("e1")
    assert "e1" in str(raised.value)

    assert store.list() == [good]
    assert store.quarantined == {b"e1"}
    assert store.counts() == {"started": 1}

    assert committed(store.save_quarantine()) == 1
    with env.begin(db=db(env, b"quarantine")) as txn:
        assert txn.get(b"ledger/e1") == garbage
    assert raw_entries(env)[b"e1"] == garbage  # the original stays, failing closed
    assert store.quarantined == set()

    # the same id is never recorded (and its effect run) again, nor settled
    results = committed(store.apply([Start(start_request("e1", session="s1")), Settle("e1", "ok"),
                                     Start(start_request("e3"))]))
    assert isinstance(results[0], LedgerError) and "corrupt" in str(results[0])
    assert isinstance(results[1], LedgerError) and "corrupt" in str(results[1])
    assert isinstance(results[2], Created) and results[2].entry.seq == 3
    assert raw_entries(env)[b"e1"] == garbage
    assert committed(store.recover()) == 2  # e2 and e3; the corrupt one is skipped, not rewritten
    assert raw_entries(env)[b"e1"] == garbage
    with pytest.raises(CorruptRecord):
        store.get("e1")


# -- fencing ------------------------------------------------------------------------------------


def test_a_fenced_store_writes_only_while_its_generation_is_current(env):
    set_generation(env, 4)
    store = make_store(env, fence=4)
    assert isinstance(one(store, Start(start_request("e1"))), Created)
    assert isinstance(one(store, Start(start_request("e2"))), Created)
    committed(store.recover())  # e1, e2 ambiguous

    one(store, Start(start_request("e3")))
    write(env, lambda txn: txn.put(str_key("bad"), b"\xc1", db=db(env, b"ledger")))
    with pytest.raises(CorruptRecord):
        store.get("bad")
    assert store.quarantined == {b"bad"}
    before = raw_entries(env)

    set_generation(env, 5)
    for outcome in (store.apply([Start(start_request("e4"))]),
                    store.apply([Settle("e3", "ok")]),
                    store.apply([Settle("e1", "ok", evidence={"x": 1})]),
                    store.recover(),
                    store.save_quarantine()):
        assert isinstance(outcome, Rejected), outcome
        assert "4" in outcome.reason and "5" in outcome.reason
    assert raw_entries(env) == before
    with env.begin(db=db(env, b"quarantine")) as txn:
        assert txn.get(b"ledger/bad") is None

    assert isinstance(one(make_store(env, fence=5), Settle("e3", "ok")), Created)
