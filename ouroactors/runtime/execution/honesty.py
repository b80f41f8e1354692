"""The effect path's honesty rules as one decision table: what to do with each answer on the way to an effect.

Every tool call goes grants → ledger start → tool → settlement (DESIGN.md "Ledger"). At each step an authority or
the tool answers, and what the caller does next is decided **here**, by pure functions over the answer, so the
live runtime (:class:`~.effects.LiveEffects`) and the chaos workload's driver (:mod:`ouroactors.faults.workload`,
which plays a session against the bare authorities) follow one set of rules instead of two copies that drift:

==========================================  ===================================================================
answer                                      decision
==========================================  ===================================================================
verdict ``allow``                           :attr:`Admission.START` — record the start
verdict ``deny``                            :attr:`Admission.DENY` — ``record_denied``; the tool never runs
verdict ``ask``                             :attr:`Admission.APPROVAL` — park on a durable approval
approval answered yes / no                  ``START`` / ``DENY``
start ``created``                           :attr:`StartAction.RUN` — the only answer that lets the tool run
start ``existing`` (any status)             :attr:`StartAction.NOT_AGAIN` — never run twice; what the entry
                                            holds is reported (``ambiguous``: its reconciler owns it)
``StaleGeneration`` for ``grants``          :attr:`StartAction.REDECIDE` — decided under a gone generation:
                                            decide again, at most :data:`REDECIDE_TRIES` decisions in a row
``StaleGeneration`` for another authority,  :attr:`StartAction.BROKEN` — the authorities this caller is bound
``CommitOutcomeUnknown``                    to are gone or unsure: stop (the runtime crashes), never guess
``CommitRejected``, ``LedgerError``         :attr:`StartAction.NOT_RECORDED` — no start, so nothing runs
anything else                               ``BROKEN`` (an answer the table does not know is not a licence)
tool ``ok`` / ``failed``                    :attr:`ToolAction.SETTLE` — what the tool observed is settled
tool ``unknown`` / ``cancelled``            :attr:`ToolAction.LEAVE_STARTED` — it may have happened: the entry
                                            stays ``started`` and becomes ``ambiguous``, never ``failed``
settle / deny answered                      :attr:`RecordAction.RECORDED`; stale or unknown → ``BROKEN``;
                                            refused → ``NOT_RECORDED`` (the entry stays as it was)
settlement ``CommitRejected``               :attr:`RecordAction.RETRY` (nothing was written, the outcome is
                                            known here) up to :data:`SETTLE_TRIES` commits, then ``BROKEN``:
                                            never left ``started`` by a runner that knows what happened
denial ``CommitRejected``                   ``RETRY`` up to :data:`SETTLE_TRIES` commits, then ``NOT_RECORDED``:
                                            the tool never runs either way; a re-run decides the call again
==========================================  ===================================================================

What is *not* here is transport: how a caller reaches the authorities. The runtime is inside the tree and its
ledger writes are direct; the workload's driver asks over messages and may lose an answer, so it retries with the
same effect id and checks the world for a start it cannot tell it ran (its module says so). Those rules exist
because the driver is not the runtime; the decisions above are the same for both.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ...authorities.grants.rules import Decision
from ...authorities.ledger.domain import LedgerError
from ...authorities.ledger.messages import LedgerAnswer
from ...core.errors import CommitOutcomeUnknown, CommitRejected, StaleGeneration

REDECIDE_TRIES = 5  # decisions in a row refused as stale before a call is given up (not run)
# Commits of one settlement (the first and the retries of a refused one). Left ``started`` while the runner goes on,
# the entry said "unknown" of an outcome the runner knew: the next run of the turn stopped on it as ambiguous.
SETTLE_TRIES = 3


class Admission(str, Enum):
    START = "start"
    DENY = "deny"
    APPROVAL = "approval"


class StartAction(str, Enum):
    RUN = "run"
    NOT_AGAIN = "not_again"
    REDECIDE = "redecide"
    NOT_RECORDED = "not_recorded"
    BROKEN = "broken"


class ToolAction(str, Enum):
    SETTLE = "settle"
    LEAVE_STARTED = "leave_started"


class RecordAction(str, Enum):
    RECORDED = "recorded"
    NOT_RECORDED = "not_recorded"
    RETRY = "retry"
    BROKEN = "broken"


@dataclass(frozen=True)
class StartStep:
    """The decision on a start's answer; ``status`` is the ledger entry's status for ``NOT_AGAIN``."""

    action: StartAction
    why: str
    status: str | None = None


SETTLED_OUTCOMES = frozenset({"ok", "failed"})
UNSETTLED_OUTCOMES = frozenset({"unknown", "cancelled"})


def on_verdict(decision: Decision) -> Admission:
    """What a grants verdict admits."""
    if decision is Decision.ALLOW:
        return Admission.START
    if decision is Decision.DENY:
        return Admission.DENY
    if decision is Decision.ASK:
        return Admission.APPROVAL
    raise ValueError(f"on_verdict: not a grants decision: {decision!r}")


def on_approval(approved: bool) -> Admission:
    """An operator's answer to a parked call: yes starts it, anything else denies it."""
    return Admission.START if approved is True else Admission.DENY


def on_start_answer(answer: object, decisions: int = 1) -> StartStep:
    """What to do with the ledger's answer to ``record_started``; ``decisions``: how many verdicts were made for
    this call so far (a stale grants stamp is decided again only while fewer than :data:`REDECIDE_TRIES`)."""
    if isinstance(answer, LedgerAnswer):
        status = answer.entry.status.value
        if answer.answer == "created":
            if status != "started":
                return StartStep(StartAction.BROKEN, f"a start answered created with status {status!r}", status)
            return StartStep(StartAction.RUN, "the start is committed", status)
        return StartStep(StartAction.NOT_AGAIN, f"already in the ledger as {status}; it is not run again", status)
    if isinstance(answer, StaleGeneration):
        if answer.authority == "grants":
            if decisions < REDECIDE_TRIES:
                return StartStep(StartAction.REDECIDE, "decided under a grants generation that is gone")
            return StartStep(StartAction.NOT_RECORDED, f"grants changed generation {decisions} times while "
                                                       "deciding; not run")
        return StartStep(StartAction.BROKEN, f"stale {answer.authority} stamp: {answer}")
    if isinstance(answer, CommitOutcomeUnknown):
        return StartStep(StartAction.BROKEN, f"the start's commit outcome is unknown: {answer}")
    if isinstance(answer, CommitRejected | LedgerError):
        return StartStep(StartAction.NOT_RECORDED, f"the ledger did not record the start: {answer}")
    return StartStep(StartAction.BROKEN, f"an answer the effect path does not know: {type(answer).__name__}")


def on_tool_outcome(status: str) -> ToolAction:
    """Settle what the tool observed; leave what it cannot tell (or was cancelled during) started."""
    if status in SETTLED_OUTCOMES:
        return ToolAction.SETTLE
    if status in UNSETTLED_OUTCOMES:
        return ToolAction.LEAVE_STARTED
    raise ValueError(f"on_tool_outcome: unknown tool status {status!r}; expected one of "
                     f"{sorted(SETTLED_OUTCOMES | UNSETTLED_OUTCOMES)}")


def on_record_answer(answer: object) -> RecordAction:
    """The ledger's answer to a settlement or a denial."""
    if isinstance(answer, LedgerAnswer):
        return RecordAction.RECORDED
    if isinstance(answer, StaleGeneration | CommitOutcomeUnknown):
        return RecordAction.BROKEN
    if isinstance(answer, CommitRejected | LedgerError):
        return RecordAction.NOT_RECORDED
    return RecordAction.BROKEN


def on_settle_answer(answer: object, tries: int) -> RecordAction:
    """The ledger's answer to the ``tries``-th commit of a settlement: :func:`on_record_answer`, except that a
    refused commit (it changed nothing) is made again until :data:`SETTLE_TRIES`, and then the runner is broken."""
    action = on_record_answer(answer)
    if action is RecordAction.NOT_RECORDED and isinstance(answer, CommitRejected):
        return RecordAction.RETRY if tries < SETTLE_TRIES else RecordAction.BROKEN
    return action


def on_denial_answer(answer: object, tries: int) -> RecordAction:
    """The ledger's answer to the ``tries``-th commit of a denial: a refused commit (it changed nothing) is made
    again until :data:`SETTLE_TRIES`, so the ledger holds the ``denied`` entry the seed asks for; refused every time,
    the denial stays unrecorded (:attr:`RecordAction.NOT_RECORDED`), not broken — nothing ran, and a run of the turn
    that finds no entry decides the call again."""
    action = on_record_answer(answer)
    if action is RecordAction.NOT_RECORDED and isinstance(answer, CommitRejected) and tries < SETTLE_TRIES:
        return RecordAction.RETRY
    return action


__all__ = [
    "REDECIDE_TRIES", "SETTLED_OUTCOMES", "SETTLE_TRIES", "UNSETTLED_OUTCOMES", "Admission", "RecordAction",
    "StartAction", "StartStep", "ToolAction", "on_approval", "on_denial_answer", "on_record_answer",
    "on_settle_answer", "on_start_answer", "on_tool_outcome", "on_verdict",
]
