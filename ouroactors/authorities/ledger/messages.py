"""The ledger's protocol: the requests it takes and the answers it gives (see :mod:`.actor`).

Record messages and answers have short reprs: thespian formats every message it sends or receives
for its debug log (discarded or not), and a record's full pydantic repr costs more than the rest of
its handling. The short form names what a log reader needs: the effect, and what happened to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...core import faults
from ...core.errors import CommitOutcomeUnknown, CommitRejected, StaleGeneration
from ..storage.commit import Committed, Outcome, Rejected
from .domain import Created, Entry, LedgerError, StartRequest, Status
from .store import Op, OpResult, Settle, Start

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
class RecordDenied:
    request: StartRequest
    reason: str

    def __repr__(self) -> str:
        return f"RecordDenied({_effect_of(self.request)}, reason={self.reason!r:.80})"


@dataclass(frozen=True, repr=False)
class RecordSettled:
    effect_id: str
    status: str  # ok | failed
    reason: str | None = None
    evidence: dict[str, Any] | None = None
    by: str = "runner"

    def __repr__(self) -> str:
        return f"RecordSettled({self.effect_id!r:.210}, {self.status!r:.20}, by={self.by!r:.80})"


@dataclass(frozen=True)
class OperatorSettle:
    effect_id: str
    status: str
    reason: str
    operator: str


@dataclass(frozen=True, repr=False)
class RecordBatch:
    """Several record requests in one thespian message (one answer list, in order)."""

    items: tuple[RecordStarted | RecordDenied | RecordSettled | OperatorSettle, ...]

    def __repr__(self) -> str:
        items = self.items
        return (f"RecordBatch({len(items)} items)" if isinstance(items, tuple | list)
                else f"RecordBatch(<{type(items).__name__}>)")


@dataclass(frozen=True)
class GetEntry:
    effect_id: str


@dataclass(frozen=True)
class ListEntries:
    status: str | None = None
    session: str | None = None
    kind: str | None = None
    since_seq: int = 0
    limit: int = 100


@dataclass(frozen=True)
class Reconcile:
    pass


@dataclass(frozen=True)
class WatchRunner:
    """Watch the actor running an effect: if it dies before settling, the entry is ambiguous at once."""

    effect_id: str
    runner: Any = None  # the runner's address (default: the sender)


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


def _to_op(item: Any) -> Op:
    """A bad request is refused here (LedgerError), never taken into a group commit."""
    if isinstance(item, RecordStarted | RecordDenied):
        if not isinstance(item.request, StartRequest):
            raise LedgerError(f"{type(item).__name__}.request must be a StartRequest, "
                              f"not {type(item.request).__name__}")
        if isinstance(item, RecordStarted):
            return Start(item.request)
        if not isinstance(item.reason, str):
            raise LedgerError(f"RecordDenied.reason must be a string, not {type(item.reason).__name__}")
        return Start(item.request, Status.DENIED, item.reason)
    if isinstance(item, RecordSettled):
        return Settle(item.effect_id, item.status, item.reason, item.evidence, item.by)
    if isinstance(item, OperatorSettle):
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
