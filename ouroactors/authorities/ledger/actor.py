"""The ledger authority: a leaf actor that writes the node's LMDB environment from its own process.

Requests (ask them; all may be :class:`~ouroactors.supervision.protocol.Stamped` with the ledger's
generation): :class:`RecordStarted`, :class:`RecordDenied`, :class:`RecordSettled`,
:class:`OperatorSettle`, :class:`RecordBatch`, :class:`GetEntry`, :class:`ListEntries`,
:class:`Reconcile`, ``"status"``. Record answers are :class:`LedgerAnswer` (``created`` or
``existing`` with the entry) or an error: a :class:`~.domain.LedgerError` (refused, nothing
written), :class:`~ouroactors.core.errors.CommitRejected` (not written) or
:class:`~ouroactors.core.errors.CommitOutcomeUnknown` (reconcile before relying on it).

**Group commit without a timer.** A request is buffered while more received messages are already
waiting in this process (:meth:`~ouroactors.supervision.worker.Worker.messages_waiting`); the
buffer is committed in one transaction as soon as none is, and every sender gets its own answer.
A lone request is therefore committed at once (no added latency), and requests that arrive
together — many sessions — share one commit. ``MAX_BATCH`` bounds a batch under a steady stream.

At start, every unsettled entry becomes ``ambiguous`` (recovery), then the registered reconcilers
get a chance to settle ambiguous entries by asking the world.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from thespian.actors import WakeupMessage

from ...core import clock
from ...core.errors import CommitOutcomeUnknown, CommitRejected
from ...supervision.protocol import Ping, Pong
from ...supervision.worker import Worker
from ..storage.actor import storage_config
from ..storage.commit import Committed, Rejected
from ..storage.env import env_panicked, open_env
from .domain import DEFAULT_KINDS, Created, Entry, LedgerError, StartRequest, Status
from .store import LedgerStore, Op, Settle, Start

log = logging.getLogger("ouroactors.ledger")
RUNNER_PING_S = 0.25
RUNNER_LOST_AFTER_S = 1.0  # a runner silent this long has died with its effect unsettled
RUNNER_EXITED = "effect runner exited before settlement"
_RUNNERS = "ouroactors:ledger-runners"
MAX_BATCH = 256  # operations per transaction under a steady stream (commit cost is flat up to ~256)
MAX_EFFECT_ID = 200  # as StartRequest.effect_id


@dataclass(frozen=True)
class RecordStarted:
    request: StartRequest


@dataclass(frozen=True)
class RecordDenied:
    request: StartRequest
    reason: str


@dataclass(frozen=True)
class RecordSettled:
    effect_id: str
    status: str  # ok | failed
    reason: str | None = None
    evidence: dict[str, Any] | None = None
    by: str = "runner"


@dataclass(frozen=True)
class OperatorSettle:
    effect_id: str
    status: str
    reason: str
    operator: str


@dataclass(frozen=True)
class RecordBatch:
    """Several record requests in one thespian message (one answer list, in order)."""

    items: tuple[RecordStarted | RecordDenied | RecordSettled | OperatorSettle, ...]


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


@dataclass(frozen=True)
class LedgerAnswer:
    answer: str  # created | existing
    entry: Entry


@dataclass(frozen=True)
class Verdict:
    """A reconciler's finding: settle with ``status`` and ``evidence``; None leaves it ambiguous."""

    status: str
    evidence: dict[str, Any]


@dataclass
class _Pending:
    ops: list[Op]
    sender: Any
    batch: bool
    results: list[Any] = field(default_factory=list)


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


def _check_effect_id(effect_id: Any) -> None:
    if not isinstance(effect_id, str) or not 1 <= len(effect_id) <= MAX_EFFECT_ID:
        shown = f"{len(effect_id)} characters" if isinstance(effect_id, str) else type(effect_id).__name__
        raise LedgerError(f"effect id must be a string of 1 to {MAX_EFFECT_ID} characters, not {shown}")


class Ledger(Worker):
    """The effect ledger authority (second child of the agent tree, after storage)."""

    def on_start(self, kinds: list[str] | None = None, reconcilers: dict[str, str] | None = None,
                 map_size: int | None = None) -> None:
        assert self.context is not None
        storage = self.authorities.get("storage")
        self.env = open_env(storage_config(self.context.data_dir, map_size))
        self.store = LedgerStore(self.env, node=self.context.node, kinds=DEFAULT_KINDS | frozenset(kinds or ()),
                                 fence=storage.generation if storage is not None else None)
        self.reconcilers: dict[str, Callable[[Entry], Verdict | None]] = {
            kind: _import(path) for kind, path in (reconcilers or {}).items()
        }
        outcome = self.store.recover()
        if not isinstance(outcome, Committed):
            raise RuntimeError(f"ledger recovery could not be recorded: {outcome}")
        self.recovered_ambiguous = outcome.value
        self._pending: list[_Pending] = []
        self._pending_ops = 0
        self._runners: dict[str, tuple[Any, float]] = {}  # effect id -> (runner address, last answer)
        self._watching = False
        if self.reconcilers:
            self.send(self.myAddress, Reconcile())

    # -- records (group-committed) --------------------------------------------------------------------

    def handle_RecordStarted(self, message: RecordStarted, sender: Any) -> LedgerError | None:
        try:
            op = _to_op(message)
        except LedgerError as exc:
            return exc  # refused at the boundary: nothing written, nobody else's commit touched
        self._enqueue([op], sender, batch=False)
        return None

    handle_RecordDenied = handle_RecordStarted
    handle_RecordSettled = handle_RecordStarted
    handle_OperatorSettle = handle_RecordStarted

    def handle_RecordBatch(self, message: RecordBatch, sender: Any) -> LedgerError | None:
        """A batch with a malformed item is refused whole (one error, nothing written)."""
        try:
            if not isinstance(message.items, tuple | list):
                raise LedgerError(f"RecordBatch.items must be a tuple, not {type(message.items).__name__}")
            ops = [_to_op(item) for item in message.items]
        except LedgerError as exc:
            return exc
        self._enqueue(ops, sender, batch=True)
        return None

    def _enqueue(self, ops: list[Op], sender: Any, batch: bool) -> None:
        self._pending.append(_Pending(ops, sender, batch))
        self._pending_ops += len(ops)
        if self._pending_ops >= MAX_BATCH:
            self._flush()

    def after_message(self) -> None:
        if self._pending and not self.messages_waiting():
            self._flush()

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        self._pending_ops = 0
        if not pending:
            return
        ops = [op for item in pending for op in item.ops]
        try:
            outcome = self.store.apply(ops)
        except BaseException as exc:
            # The environment died, or a bug: whether this batch reached the disk is not known
            # here. Every caller hears that (never silence), then the ledger crashes and its
            # restart recovers every unsettled entry as ambiguous.
            unknown = CommitOutcomeUnknown(f"ledger crashed during commit: {type(exc).__name__}: {exc}")
            for item in pending:
                self.send(item.sender, [unknown] * len(item.ops) if item.batch else unknown)
            raise
        if isinstance(outcome, Committed):
            results = iter(outcome.value)
            for item in pending:
                answers = [self._answer(next(results)) for _ in item.ops]
                self.send(item.sender, answers if item.batch else answers[0])
            return
        error = (CommitRejected(outcome.reason) if isinstance(outcome, Rejected)
                 else CommitOutcomeUnknown(outcome.reason))
        for item in pending:
            self.send(item.sender, [error] * len(item.ops) if item.batch else error)
        if not isinstance(outcome, Rejected) and env_panicked(self.env):
            raise RuntimeError(f"storage environment panicked: {outcome.reason}")  # crash; restart recovers

    @staticmethod
    def _answer(result: Any) -> Any:
        if isinstance(result, LedgerError):
            return result
        return LedgerAnswer("created" if isinstance(result, Created) else "existing", result.entry)

    # -- watched runners ------------------------------------------------------------------------------

    def handle_WatchRunner(self, message: WatchRunner, sender: Any) -> Any:
        entry = self.store.get(message.effect_id)
        if entry is None:
            return LedgerError(f"no effect {message.effect_id!r} in the ledger")
        if entry.status is Status.STARTED:
            self._runners[message.effect_id] = (message.runner or sender, clock.monotonic())
            if not self._watching:
                self._watching = True
                self.wakeupAfter(timedelta(seconds=RUNNER_PING_S), payload=_RUNNERS)
        return "watching"

    def handle_Pong(self, message: Pong, sender: Any) -> None:
        for effect_id, (runner, _seen) in list(self._runners.items()):
            if runner == sender:
                self._runners[effect_id] = (runner, clock.monotonic())

    def handle_WakeupMessage(self, message: WakeupMessage, sender: Any) -> None:
        if message.payload != _RUNNERS:
            return
        self._watching = False
        now = clock.monotonic()
        lost: list[str] = []
        for effect_id, (runner, seen) in list(self._runners.items()):
            entry = self.store.get(effect_id)
            if entry is None or entry.status is not Status.STARTED:
                del self._runners[effect_id]  # settled: nothing left to watch for
            elif now - seen > RUNNER_LOST_AFTER_S:
                lost.append(effect_id)
                del self._runners[effect_id]
            else:
                self.send(runner, Ping("ledger", 0))
        if lost:
            outcome = self.store.mark_ambiguous(lost, RUNNER_EXITED)
            if not isinstance(outcome, Committed):
                raise RuntimeError(f"could not record lost runners {lost}: {outcome}")  # crash: recovery does it
        if self._runners:
            self._watching = True
            self.wakeupAfter(timedelta(seconds=RUNNER_PING_S), payload=_RUNNERS)

    # -- reads and maintenance ------------------------------------------------------------------------

    def handle_GetEntry(self, message: GetEntry, sender: Any) -> Any:
        try:
            _check_effect_id(message.effect_id)
        except LedgerError as exc:
            return exc
        entry = self.store.get(message.effect_id)
        return entry if entry is not None else LedgerError(f"no effect {message.effect_id!r} in the ledger")

    def handle_ListEntries(self, message: ListEntries, sender: Any) -> list[Entry] | LedgerError:
        if not all(type(value) is int and 0 <= value < 2**63 for value in (message.since_seq, message.limit)):
            return LedgerError(f"ListEntries: since_seq and limit must be integers >= 0, "
                               f"not {message.since_seq!r} and {message.limit!r}")
        return self.store.list(status=message.status, session=message.session, kind=message.kind,
                               since_seq=message.since_seq, limit=message.limit)

    def handle_str(self, message: str, sender: Any) -> Any:
        if message == "status":
            return {"counts": self.store.counts(), "recovered_ambiguous": self.recovered_ambiguous,
                    "storage_generation": self.store.fence, "generation": self.generation,
                    "quarantined": len(self.store.quarantined)}
        return self.unhandled(message, sender)

    def handle_Reconcile(self, message: Reconcile, sender: Any) -> dict[str, int] | None:
        """Ask each ambiguous entry's reconciler; settle what it can prove."""
        settled = left = 0
        for entry in self.store.list(status=Status.AMBIGUOUS.value, limit=10_000):
            reconcile = self.reconcilers.get(entry.kind)
            if reconcile is None:
                left += 1
                continue
            try:
                verdict = reconcile(entry)
            except Exception as exc:  # the world could not be asked: stays ambiguous, visibly
                log.warning("reconciler for %s failed on %s: %s", entry.kind, entry.effect_id, exc)
                verdict = None
            if verdict is None:
                left += 1
                continue
            outcome = self.store.apply([Settle(entry.effect_id, verdict.status, "reconciled", verdict.evidence,
                                               f"reconciler:{entry.kind}")])
            if isinstance(outcome, Committed) and not isinstance(outcome.value[0], LedgerError):
                settled += 1
            else:
                left += 1
        if sender == self.myAddress:
            return None  # the start-up run: nobody to answer
        return {"settled": settled, "ambiguous": left}


def _import(path: str) -> Callable[[Entry], Verdict | None]:
    module, _, attr = path.partition(":")
    target: Any = importlib.import_module(module)
    for part in attr.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise TypeError(f"reconciler {path!r} is not callable")
    return target
