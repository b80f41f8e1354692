"""The effect path's decision table (pure): every answer of grants, the ledger and the tool, decided once.

The table is what the live runtime (LiveEffects) and the chaos workload's driver both follow, so these tests pin
the honesty rules themselves: a tool runs only on ``created``; ``existing`` never runs again; a stale grants stamp
is decided again (bounded); other stale stamps and unknown commits stop the caller; uncertainty is never settled.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ouroactors.authorities.grants.rules import Decision
from ouroactors.authorities.ledger.domain import Entry, LedgerError, Status
from ouroactors.authorities.ledger.messages import LedgerAnswer
from ouroactors.core.errors import CommitOutcomeUnknown, CommitRejected, OuroactorsError, StaleGeneration
from ouroactors.runtime.execution.honesty import (
    REDECIDE_TRIES,
    SETTLE_TRIES,
    Admission,
    RecordAction,
    StartAction,
    ToolAction,
    on_approval,
    on_denial_answer,
    on_record_answer,
    on_settle_answer,
    on_start_answer,
    on_tool_outcome,
    on_verdict,
)

AUTHORITIES = ("storage", "ledger", "grants", "workspace")


def entry(status: Status) -> Entry:
    return Entry(seq=1, effect_id="s/t1/c", kind="http_request", idempotency_key="s/t1/c", fingerprint="f",
                 principal="s", session_id="s", turn_id="t1", call_id="c", authority={"ledger": 1}, grant=None,
                 cause=None, status=status, node="n", started_ns=1)


def test_verdicts():
    assert on_verdict(Decision.ALLOW) is Admission.START
    assert on_verdict(Decision.DENY) is Admission.DENY
    assert on_verdict(Decision.ASK) is Admission.APPROVAL
    assert {on_verdict(d) for d in Decision} == set(Admission)  # every decision is covered
    with pytest.raises(ValueError, match="not a grants decision"):
        on_verdict("allow")  # type: ignore[arg-type]


def test_approvals_start_only_on_a_plain_yes():
    assert on_approval(True) is Admission.START
    assert on_approval(False) is Admission.DENY
    assert on_approval(1) is Admission.DENY  # type: ignore[arg-type]  # not a yes


def test_only_created_runs():
    assert on_start_answer(LedgerAnswer("created", entry(Status.STARTED))).action is StartAction.RUN


@pytest.mark.parametrize("status", list(Status))
def test_existing_never_runs_again_whatever_its_status(status):
    step = on_start_answer(LedgerAnswer("existing", entry(status)))
    assert step.action is StartAction.NOT_AGAIN and step.status == status.value
    assert status.value in step.why


@pytest.mark.parametrize("status", [s for s in Status if s is not Status.STARTED])
def test_created_with_another_status_is_not_a_licence(status):
    assert on_start_answer(LedgerAnswer("created", entry(status))).action is StartAction.BROKEN


def test_a_stale_grants_stamp_is_decided_again_a_bounded_number_of_times():
    stale = StaleGeneration("grants", 3, 2)
    actions = [on_start_answer(stale, n).action for n in range(1, REDECIDE_TRIES + 2)]
    assert actions[:REDECIDE_TRIES - 1] == [StartAction.REDECIDE] * (REDECIDE_TRIES - 1)
    assert set(actions[REDECIDE_TRIES - 1:]) == {StartAction.NOT_RECORDED}


@pytest.mark.parametrize("authority", [a for a in AUTHORITIES if a != "grants"])
def test_other_stale_stamps_stop_the_caller(authority):
    assert on_start_answer(StaleGeneration(authority, 2, 1)).action is StartAction.BROKEN
    assert on_record_answer(StaleGeneration(authority, 2, 1)) is RecordAction.BROKEN


def test_unknown_commits_stop_refused_commits_run_nothing():
    assert on_start_answer(CommitOutcomeUnknown("eio")).action is StartAction.BROKEN
    assert on_start_answer(CommitRejected("map full")).action is StartAction.NOT_RECORDED
    assert on_start_answer(LedgerError("bad request")).action is StartAction.NOT_RECORDED
    assert on_record_answer(CommitOutcomeUnknown("eio")) is RecordAction.BROKEN
    assert on_record_answer(CommitRejected("x")) is RecordAction.NOT_RECORDED
    assert on_record_answer(LedgerError("x")) is RecordAction.NOT_RECORDED
    assert on_record_answer(LedgerAnswer("existing", entry(Status.OK))) is RecordAction.RECORDED


@given(st.one_of(st.none(), st.integers(), st.text(), st.builds(OuroactorsError, st.text()),
                 st.builds(RuntimeError, st.text())))
def test_an_answer_the_table_does_not_know_never_runs_anything(answer):
    assert on_start_answer(answer).action is StartAction.BROKEN
    assert on_record_answer(answer) is RecordAction.BROKEN


def test_every_start_answer_runs_only_on_created():
    """Exhaustive over the answer kinds × statuses × decision counts: RUN iff created+started."""
    answers: list[object] = [LedgerAnswer(a, entry(s)) for a, s in itertools.product(("created", "existing"), Status)]
    answers += [StaleGeneration(a, 2, 1) for a in AUTHORITIES]
    answers += [CommitRejected("r"), CommitOutcomeUnknown("u"), LedgerError("e"), None]
    for answer, decisions in itertools.product(answers, range(1, REDECIDE_TRIES + 2)):
        step = on_start_answer(answer, decisions)
        runs = (isinstance(answer, LedgerAnswer) and answer.answer == "created"
                and answer.entry.status is Status.STARTED)
        assert (step.action is StartAction.RUN) is runs, (answer, decisions, step)
        assert step.why


def test_tool_outcomes():
    assert on_tool_outcome("ok") is ToolAction.SETTLE
    assert on_tool_outcome("failed") is ToolAction.SETTLE
    assert on_tool_outcome("unknown") is ToolAction.LEAVE_STARTED  # it may have happened: never settled failed
    assert on_tool_outcome("cancelled") is ToolAction.LEAVE_STARTED
    for bad in ("denied", "", "OK"):
        with pytest.raises(ValueError, match="unknown tool status"):
            on_tool_outcome(bad)


def test_a_refused_settlement_is_made_again_then_breaks_the_runner_never_left_started():
    refused = CommitRejected("map full")
    assert [on_settle_answer(refused, n) for n in range(1, SETTLE_TRIES + 1)] == \
        [RecordAction.RETRY] * (SETTLE_TRIES - 1) + [RecordAction.BROKEN]
    recorded = LedgerAnswer("created", entry(Status.OK))
    assert on_settle_answer(recorded, 1) is on_settle_answer(recorded, SETTLE_TRIES) is RecordAction.RECORDED
    assert on_settle_answer(CommitOutcomeUnknown("eio"), 1) is RecordAction.BROKEN  # never made again: unknown
    assert on_settle_answer(LedgerError("bad"), 1) is RecordAction.NOT_RECORDED  # malformed: again would not help


def test_a_refused_denial_is_made_again_then_left_unrecorded_never_breaking_the_runner():
    refused = CommitRejected("map full")
    assert [on_denial_answer(refused, n) for n in range(1, SETTLE_TRIES + 1)] == \
        [RecordAction.RETRY] * (SETTLE_TRIES - 1) + [RecordAction.NOT_RECORDED]  # nothing ran: not broken
    denied = LedgerAnswer("created", entry(Status.DENIED))
    assert on_denial_answer(denied, 1) is RecordAction.RECORDED
    assert on_denial_answer(CommitOutcomeUnknown("eio"), 1) is RecordAction.BROKEN
    assert on_denial_answer(StaleGeneration("ledger", 1, 2), 1) is RecordAction.BROKEN
    assert on_denial_answer(LedgerError("bad"), 1) is RecordAction.NOT_RECORDED
