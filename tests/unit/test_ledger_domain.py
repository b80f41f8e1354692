"""The effect ledger's pure decisions (ouroactors.authorities.ledger.domain): fingerprints and the
decide_start / decide_settle / decide_ambiguous tables. No LMDB, no thespian."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ouroactors.authorities.ledger.domain import (
    DEFAULT_KINDS,
    MAX_TEXT,
    RESTARTED_BEFORE_SETTLEMENT,
    AlreadySettled,
    Created,
    EffectConflict,
    Entry,
    Existing,
    LedgerError,
    StartRequest,
    Status,
    UnknownEffect,
    UnknownEffectKind,
    decide_ambiguous,
    decide_settle,
    decide_start,
    fingerprint,
)

NOW = 1_700_000_000_000_000_000
LATER = NOW + 5_000

# -- fingerprints ---------------------------------------------------------------------------------

scalars = (st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False)
           | st.text(st.characters(blacklist_categories=("Cs",)), max_size=8) | st.binary(max_size=8))
keys = st.text(st.characters(blacklist_categories=("Cs",)), max_size=6)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
                      max_leaves=12)


def reorder(value: Any, rng: random.Random) -> Any:
    """The same value with every dict's insertion order shuffled (recursively)."""
    if isinstance(value, dict):
        items = [(k, reorder(v, rng)) for k, v in value.items()]
        rng.shuffle(items)
        return dict(items)
    if isinstance(value, list):
        return [reorder(v, rng) for v in value]
    return value


@given(st.sampled_from(sorted(DEFAULT_KINDS)), values, st.randoms(use_true_random=False))
def test_fingerprint_ignores_dict_order(kind, args, rng):
    fp = fingerprint(kind, args)
    assert len(fp) == 64 and int(fp, 16) >= 0
    assert fingerprint(kind, reorder(args, rng)) == fp


@given(values, values)
def test_different_arguments_give_different_fingerprints(a, b):
    if a != b:
        assert fingerprint("shell", a) != fingerprint("shell", b)


@given(values)
def test_different_kinds_give_different_fingerprints(args):
    assert fingerprint("shell", args) != fingerprint("file_write", args)


def test_fingerprint_examples():
    a = fingerprint("file_write", {"path": "/x", "content": "hi", "mode": {"a": 1, "b": 2}})
    b = fingerprint("file_write", {"mode": {"b": 2, "a": 1}, "content": "hi", "path": "/x"})
    assert a == b
    assert a != fingerprint("file_write", {"path": "/x", "content": "hi!", "mode": {"a": 1, "b": 2}})
    assert fingerprint("shell", ["ls"]) != fingerprint("shell", [["ls"]])
    assert fingerprint("shell", 1) != fingerprint("shell", "1")


# -- decide_start ---------------------------------------------------------------------------------


def request(effect_id: str = "e1", *, kind: str = "example", args: Any = None, **extra: Any) -> StartRequest:
    return StartRequest(effect_id=effect_id, kind=kind, idempotency_key=f"idem-{effect_id}",
                        fingerprint=fingerprint(kind, {"id": effect_id} if args is None else args),
                        principal="tester", **extra)


def start(current: Entry | None = None, req: StartRequest | None = None, **kwargs: Any) -> Created | Existing:
    params: dict[str, Any] = {"seq": 7, "now_ns": NOW, "node": "n1", "kinds": DEFAULT_KINDS}
    params.update(kwargs)
    return decide_start(current, req or request(), **params)


def entry_with(status: Status, **update: Any) -> Entry:
    created = start().entry
    return created.model_copy(update={"status": status, **update})


def test_decide_start_creates_a_started_entry_binding_the_request():
    req = request(session_id="s1", turn_id="t1", call_id="c1", authority={"storage": 3, "grants": 2},
                  grant="rule:allow-ls", cause="model asked")
    decision = start(None, req)
    assert isinstance(decision, Created)
    entry = decision.entry
    assert (entry.seq, entry.node, entry.started_ns, entry.status) == (7, "n1", NOW, Status.STARTED)
    assert entry.settled_ns is None and entry.reason is None and entry.evidence is None
    for name, value in req.model_dump(exclude={"intent"}).items():
        assert getattr(entry, name) == value, name
    assert not entry.terminal


def test_decide_start_denied_is_created_terminal_with_its_reason():
    decision = start(status=Status.DENIED, reason="rule says no")
    assert isinstance(decision, Created)
    entry = decision.entry
    assert entry.status is Status.DENIED and entry.terminal
    assert entry.settled_ns == NOW and entry.reason == "rule says no"


@pytest.mark.parametrize("status", list(Status))
def test_decide_start_same_effect_answers_the_existing_entry_whatever_its_status(status):
    current = entry_with(status)
    decision = start(current, request(), seq=99, now_ns=LATER)
    assert isinstance(decision, Existing)
    assert decision.entry is current


@pytest.mark.parametrize("other", [request(args={"id": "other"}), request(kind="shell")],
                         ids=["other-arguments", "other-kind"])
def test_decide_start_same_id_other_effect_is_a_conflict(other):
    with pytest.raises(EffectConflict, match=r"'e1'.*another fingerprint"):
        start(entry_with(Status.STARTED), other)


def test_decide_start_unknown_kind_lists_the_known_kinds():
    with pytest.raises(UnknownEffectKind) as raised:
        start(None, request(kind="format_disk"))
    message = str(raised.value)
    assert "'format_disk'" in message
    assert ", ".join(sorted(DEFAULT_KINDS)) in message
    assert isinstance(raised.value, LedgerError)
    # checked before anything else, even when the id exists
    with pytest.raises(UnknownEffectKind):
        start(entry_with(Status.STARTED), request(kind="format_disk"))
    assert isinstance(start(None, request(kind="deploy"), kinds=DEFAULT_KINDS | {"deploy"}), Created)


# -- decide_settle --------------------------------------------------------------------------------


def settle(current: Entry | None, status: Any, *, reason: str | None = None,
           evidence: dict[str, Any] | None = None, by: str = "runner", operator: bool = False,
           reconciler: bool = False) -> Created | Existing:
    return decide_settle(current, "e1", status, now_ns=LATER, reason=reason, evidence=evidence, by=by,
                         operator=operator, reconciler=reconciler)


@pytest.mark.parametrize("wanted", ["ok", "failed", Status.OK, Status.FAILED])
def test_settle_started(wanted):
    current = entry_with(Status.STARTED)
    decision = settle(current, wanted, reason="done", evidence={"exit": 0}, by="runner-1")
    assert isinstance(decision, Created)
    entry = decision.entry
    assert entry.status is Status(wanted)
    assert (entry.settled_ns, entry.reason, entry.evidence, entry.settled_by) == (LATER, "done", {"exit": 0},
                                                                                  "runner-1")
    assert entry.model_copy(update={"status": Status.STARTED, "settled_ns": None, "reason": None,
                                    "evidence": None, "settled_by": None}) == current


# (current status, wanted) -> Existing | the error class
TERMINAL_TABLE = [
    (Status.OK, "ok", Existing),
    (Status.OK, "failed", AlreadySettled),
    (Status.FAILED, "failed", Existing),
    (Status.FAILED, "ok", AlreadySettled),
    (Status.DENIED, "ok", AlreadySettled),
    (Status.DENIED, "failed", AlreadySettled),
]


@pytest.mark.parametrize(("current_status", "wanted", "answer"), TERMINAL_TABLE)
def test_settle_terminal_entries(current_status, wanted, answer):
    current = entry_with(current_status, settled_ns=NOW)
    if answer is Existing:
        decision = settle(current, wanted, evidence={"again": True})
        assert isinstance(decision, Existing) and decision.entry is current
    else:
        with pytest.raises(AlreadySettled, match=f"already {current_status.value}, cannot settle {wanted}"):
            settle(current, wanted, evidence={"x": 1}, operator=True, reason="r")


# (evidence, operator, reconciler, reason) -> allowed? A writer's evidence alone proves nothing.
AMBIGUOUS_TABLE = [
    (None, False, False, None, False),
    (None, False, False, "runner thinks so", False),
    ({}, False, False, "empty evidence", False),
    ({"pr": 12}, False, False, None, False),  # any writer with "evidence": refused (issue 12 §4)
    (None, True, False, None, False),
    (None, True, False, "", False),
    ({}, False, True, "reconciled", False),
    (None, False, True, "reconciled", False),
    ({"pr": 12}, False, True, None, True),
    (None, True, False, "checked the repo by hand", True),
    ({"pr": 12}, True, False, "both", True),
]


@pytest.mark.parametrize(("evidence", "operator", "reconciler", "reason", "allowed"), AMBIGUOUS_TABLE)
@pytest.mark.parametrize("wanted", ["ok", "failed"])
def test_settle_ambiguous_needs_a_verified_operator_or_the_kinds_reconciler(evidence, operator, reconciler, reason,
                                                                            allowed, wanted):
    current = decide_ambiguous(entry_with(Status.STARTED), now_ns=NOW)
    by = f"reconciler:{current.kind}" if reconciler else "who"
    if allowed:
        decision = settle(current, wanted, evidence=evidence, operator=operator, reconciler=reconciler,
                          reason=reason, by=by)
        assert isinstance(decision, Created) and decision.entry.status is Status(wanted)
        assert decision.entry.settled_by == by
    else:
        with pytest.raises(LedgerError, match="ambiguous: only a verified operator"):
            settle(current, wanted, evidence=evidence, operator=operator, reconciler=reconciler, reason=reason,
                   by=by)


def test_only_the_reconciler_of_the_entrys_kind_may_settle_it():
    current = decide_ambiguous(entry_with(Status.STARTED), now_ns=NOW)
    with pytest.raises(LedgerError, match="is not its reconciler"):
        settle(current, "ok", evidence={"pr": 12}, reconciler=True, by="reconciler:some_other_kind")


def test_settle_unknown_effect():
    with pytest.raises(UnknownEffect, match="no effect 'e1'"):
        settle(None, "ok")


@pytest.mark.parametrize("status", ["maybe", "", "OK", "denied", "started", "ambiguous", Status.DENIED,
                                    Status.AMBIGUOUS, None, 1])
def test_settle_status_outside_the_vocabulary(status):
    for current in (None, entry_with(Status.STARTED)):  # the vocabulary is checked first
        with pytest.raises(LedgerError, match="is not one of: ok, failed") as raised:
            settle(current, status, evidence={"x": 1})
        assert type(raised.value) is LedgerError


def test_settle_with_malformed_evidence_is_a_ledger_error():
    with pytest.raises(LedgerError, match="evidence"):
        settle(entry_with(Status.STARTED), "ok", evidence={1: "int key"})  # type: ignore[dict-item]


def test_settle_truncates_a_long_reason():
    decision = settle(entry_with(Status.STARTED), "failed", reason="x" * 5000)
    assert len(decision.entry.reason) == MAX_TEXT and decision.entry.reason.endswith("…")


# -- decide_ambiguous -----------------------------------------------------------------------------


def test_decide_ambiguous_turns_started_into_ambiguous():
    current = entry_with(Status.STARTED)
    changed = decide_ambiguous(current, now_ns=LATER)
    assert changed is not None
    assert changed.status is Status.AMBIGUOUS
    assert changed.reason == RESTARTED_BEFORE_SETTLEMENT == "runtime restarted before settlement"
    assert changed.settled_ns == LATER
    assert changed.model_copy(update={"status": Status.STARTED, "reason": None, "settled_ns": None}) == current
    assert decide_ambiguous(current, now_ns=LATER, reason="operator said so").reason == "operator said so"


@pytest.mark.parametrize("status", [Status.OK, Status.FAILED, Status.DENIED, Status.AMBIGUOUS])
def test_decide_ambiguous_leaves_everything_else_alone(status):
    assert decide_ambiguous(entry_with(status, reason="kept"), now_ns=LATER) is None


@given(st.lists(st.sampled_from(list(Status)), max_size=20))
def test_recovery_never_produces_failed(statuses):
    for status in statuses:
        current = entry_with(status)
        changed = decide_ambiguous(current, now_ns=LATER)
        after = current if changed is None else changed
        assert after.status is not Status.FAILED or status is Status.FAILED
        assert (changed is not None) == (status is Status.STARTED)


def test_a_starts_intent_is_kept_in_its_evidence_for_its_reconciler_and_through_its_settlement():
    intent = {"path": "/w/out.txt", "before": None, "after": "a" * 64}
    entry = start(None, request(kind="file_write", intent=intent)).entry
    assert entry.evidence == {"intent": intent}
    settled = decide_settle(entry, entry.effect_id, "ok", now_ns=NOW + 1, reason=None,
                            evidence={"bytes_written": 1}, by="runner").entry
    assert settled.evidence == {"bytes_written": 1, "intent": intent}  # the runner's evidence, the intent kept
    lost = decide_ambiguous(entry, now_ns=NOW + 1)
    assert lost is not None and lost.evidence == {"intent": intent}  # what a reconciler reads
    found = decide_settle(lost, entry.effect_id, "ok", now_ns=NOW + 2, reason=None,
                          evidence={"finding": "written"}, by="reconciler:file_write", reconciler=True).entry
    assert found.evidence == {"finding": "written", "intent": intent}
    assert start(None, request()).entry.evidence is None  # no intent, no evidence at start (as before)


@pytest.mark.parametrize("intent", [[1], "path", {f"k{i}": i for i in range(17)}, {1: "not a str key"}])
def test_an_intent_that_is_not_a_small_table_is_refused_at_the_door(intent):
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="intent"):
        request(kind="file_write", intent=intent)
