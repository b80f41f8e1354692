"""The ledger's protocol: the requests it takes and the answers it gives (see :mod:`.actor`).

Record messages and answers have short reprs: thespian formats every message it sends or receives
for its debug log (discarded or not), and a record's full pydantic repr costs more than the rest of
its handling. The short form names what a log reader needs: the effect, and what happened to it.

The annotations are checked at the ledger's door (:mod:`ouroactors.core.boundary`) before any
handler runs: a bad field is answered :class:`~ouroactors.core.errors.BadRequest`, nothing written.
Every request but the reads (:class:`GetEntry`, :class:`ListEntries`) must be stamped with the
ledger's generation.

**Who settles.** A runner settles its own ``started`` effect (:class:`RecordSettled`, ``by`` names
it but may not claim ``operator:`` or ``reconciler:``). An ``ambiguous`` effect is settled only by
an operator whose token the ledger verified against the credentials in the data dir
(:class:`OperatorSettle`), or by the reconciler registered for the effect's kind, which the ledger
itself runs (:class:`Reconcile`): never by a writer presenting evidence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from ...core import faults
from ...core.boundary import Address, Data, Name, Range, Size, Text
from ...core.errors import BadRequest, CommitOutcomeUnknown, CommitRejected, StaleGeneration
from ..grants.operators import verify
from ..storage.commit import Committed, Outcome, Rejected
from .domain import Created, Entry, LedgerError, StartRequest, Status
from .store import Op, OpResult, Settle, Start

RESERVED_BY = ("operator:", "reconciler:")
Evidence = Annotated[dict[Name, Annotated[Any, Data()]], Size(1, 64)]  # the entry's size bound decides the rest

# The ledger's durable boundaries, as an effect crosses them (a crash at each is a different story).
# Hit by the actor and by direct writers (:mod:`.direct`) alike.
SETTLE_RECEIVED = faults.register_point(
    "ledger.settle_received", "the effect ran and its settlement arrived, not yet written")
START_COMMITTED = faults.register_point(
    "ledger.start_committed", "a start is durable, its runner not yet told: the effect has not run")
SETTLE_COMMITTED = faults.register_point(
    "ledger.settle_committed", "a settlement is durable, its runner not yet told")


def _effect_of(request: Any) -> str:
    effect_id = getattr(request, "effect_id", None)
    return f"{effect_id!r:.210}" if isinstance(effect_id, str) else f"<{type(request).__name__}>"


@dataclass(frozen=True, repr=False)
class RecordStarted:
    request: StartRequest

    def __repr__(self) -> str:
        return f"RecordStarted({_effect_of(self.request)}, kind={getattr(self.request, 'kind', None)!r})"


@dataclass(frozen=True, repr=False)
class RecordDecision:
    """A grants decision as a ``permission`` entry, written already settled (``ok`` allowed, ``denied`` not).

    Written by a direct writer that decided with the grants authority's own code and durable policy
    (:mod:`ouroactors.authorities.grants.inline`), in the same transaction as the effect's start it admits.
    Only ``permission`` entries may be written this way: no effect is ever recorded as done without running.
    """

    request: StartRequest
    allowed: bool
    reason: Text

    def __repr__(self) -> str:
        return f"RecordDecision({_effect_of(self.request)}, allowed={self.allowed})"


@dataclass(frozen=True, repr=False)
class RecordDenied:
    request: StartRequest
    reason: Text

    def __repr__(self) -> str:
        return f"RecordDenied({_effect_of(self.request)}, reason={self.reason!r:.80})"


@dataclass(frozen=True, repr=False)
class RecordSettled:
    effect_id: Name
    status: Annotated[str, Size(1, 16)]  # ok | failed
    reason: Text | None = None
    evidence: Evidence | None = None
    by: Name = "runner"

    def check(self) -> None:
        if self.by.startswith(RESERVED_BY):
            raise BadRequest("RecordSettled", "by", "operator and reconciler settlements are verified by the "
                             "ledger: use OperatorSettle, or register a reconciler", repr(self.by[:80]))

    def __repr__(self) -> str:
        return f"RecordSettled({self.effect_id!r:.210}, {self.status!r:.20}, by={self.by!r:.80})"


@dataclass(frozen=True)
class OperatorSettle:
    """An operator settles an effect by hand; ``token`` is checked against the data dir's credentials."""

    effect_id: Name
    status: Annotated[str, Size(1, 16)]
    reason: Annotated[str, Size(1, 512)]
    operator: Name
    token: Annotated[str, Size(1, 256)]


@dataclass(frozen=True, repr=False)
class RecordBatch:
    """Several record requests in one thespian message (one answer list, in order)."""

    items: Annotated[tuple[RecordStarted | RecordDenied | RecordSettled | OperatorSettle, ...], Size(1, 256)]

    def __repr__(self) -> str:
        items = self.items
        return (f"RecordBatch({len(items)} items)" if isinstance(items, tuple | list)
                else f"RecordBatch(<{type(items).__name__}>)")


@dataclass(frozen=True)
class GetEntry:
    effect_id: Name


@dataclass(frozen=True)
class ListEntries:
    status: Annotated[str, Size(1, 16)] | None = None
    session: Name | None = None
    kind: Annotated[str, Size(1, 64)] | None = None
    since_seq: Annotated[int, Range(0, 2**63 - 1)] = 0
    limit: Annotated[int, Range(0, 10_000_000)] = 100


@dataclass(frozen=True)
class Reconcile:
    """Ask the registered reconcilers to settle ambiguous entries: every one, or ``session``'s only.

    With a session (a coordinator recovering it) the dead direct writers are swept first — a runtime that just died
    leaves its starts ``started`` until the ledger's next check, and only ``ambiguous`` entries are a reconciler's
    to settle — and the answer is a :class:`SessionReconciled`: what the session still has unsettled afterwards.
    """

    session: Name | None = None


@dataclass(frozen=True)
class ReconcilerKinds:
    """Which effect kinds have a reconciler registered here (answered as a sorted tuple of kinds)."""


@dataclass(frozen=True)
class SessionReconciled:
    """:class:`Reconcile` for a session: how many entries its reconcilers settled, and what is left unsettled
    (``(effect_id, status)`` pairs: ``started`` or ``ambiguous``)."""

    settled: int
    unsettled: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class WatchRunner:
    """Watch the actor running an effect: if it dies before settling, the entry is ambiguous at once."""

    effect_id: Name
    runner: Address = None  # the runner's address (default: the sender)
    # the runner's worker generation, when it is a worker: the heartbeats go addressed to it, so whoever got a dead
    # runner's port refuses them instead of answering for it (an address is only a port)
    runner_generation: Annotated[int, Range(1, 2**63 - 1)] | None = None


@dataclass(frozen=True, repr=False)
class LedgerAnswer:
    answer: str  # created | existing
    entry: Entry

    def __repr__(self) -> str:
        entry = self.entry
        return f"LedgerAnswer({self.answer}, {entry.effect_id!r}, seq={entry.seq}, status={entry.status.value})"


@dataclass(frozen=True)
class Verdict:
    """A reconciler's finding: settle with ``status`` and ``evidence``; None leaves it ambiguous."""

    status: str
    evidence: dict[str, Any]


def _to_op(item: Any, operators: dict[str, str] | None = None) -> Op:
    """A bad request is refused here (LedgerError), never taken into a group commit.

    ``operators`` are the verifiable operator credentials (name -> token digest); without them
    (a direct writer) an operator settlement is refused: it must go through the ledger authority.
    """
    if isinstance(item, RecordStarted | RecordDenied):
        if not isinstance(item.request, StartRequest):
            raise LedgerError(f"{type(item).__name__}.request must be a StartRequest, "
                              f"not {type(item.request).__name__}")
        if isinstance(item, RecordStarted):
            return Start(item.request)
        if not isinstance(item.reason, str):
            raise LedgerError(f"RecordDenied.reason must be a string, not {type(item.reason).__name__}")
        return Start(item.request, Status.DENIED, item.reason)
    if isinstance(item, RecordDecision):
        if not isinstance(item.request, StartRequest) or item.request.kind != "permission":
            raise LedgerError("RecordDecision records a StartRequest of kind 'permission' only")
        return Start(item.request, Status.OK if item.allowed is True else Status.DENIED, str(item.reason)[:500])
    if isinstance(item, RecordSettled):
        return Settle(item.effect_id, item.status, item.reason, item.evidence, item.by)
    if isinstance(item, OperatorSettle):
        if operators is None or not isinstance(item.token, str) or not verify(operators, item.operator, item.token):
            raise LedgerError(f"settlement claiming operator {item.operator!r}: credentials not verified "
                              "(nothing written)")
        return Settle(item.effect_id, item.status, item.reason, None, f"operator:{item.operator}", operator=True)
    raise LedgerError(f"not a ledger record request: {type(item).__name__}")


def answers_for(ops: list[Op], outcome: Outcome[list[OpResult]]) -> list[Any]:
    """One answer per op of a batch, from its commit outcome: the ledger actor and direct writers
    answer alike. A committed batch first passes the committed boundaries' fault points (one hit
    per batch and boundary, before anyone is answered)."""
    if isinstance(outcome, Committed):
        if faults.armed() is not None:
            kinds = {type(op) for op in ops}
            if Start in kinds:
                faults.point(START_COMMITTED)
            if Settle in kinds:
                faults.point(SETTLE_COMMITTED)
        return [answer_for(result) for result in outcome.value]
    error = CommitRejected(outcome.reason) if isinstance(outcome, Rejected) else CommitOutcomeUnknown(outcome.reason)
    return [error] * len(ops)


def answer_for(result: OpResult) -> Any:
    if isinstance(result, LedgerError | StaleGeneration):
        return result  # refused: this op only, nothing written for it
    return LedgerAnswer("created" if isinstance(result, Created) else "existing", result.entry)
