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
together — many sessions — share one commit. ``MAX_BATCH`` bounds a transaction.

**A commit thread** (multiproc bases). While a synced commit waits for the disk the actor thread
could be receiving the next requests, so a batch is handed to a thread of the ledger's own
(:class:`CommitThread`) whenever thespian has other work for the actor thread (a connection
readable or writable); requests that arrive meanwhile form the next batch, handed over as soon as
the commit returns. With nothing else to do (a lone session) the batch is committed on the actor
thread itself, which saves the hand-over. Either way a transaction begins, is filled and commits
on one thread (LMDB binds a write transaction to its thread), only one is open at a time, and the
answers are sent by the actor thread alone, only after the batch's commit returned: the commit
thread signals through a pipe the actor watches (``ThespianWatch``). Reads and maintenance writes
first commit and answer every request received before them; stopping answers the batch in flight
as its commit says and rejects (not written) what was still waiting. The in-process base, or
``commit_thread = false`` in the spec's kwargs, commits inline. ``"status"`` reports
``group_commit``: transactions, the records they carried, and how many went to the thread.

At start, every unsettled entry becomes ``ambiguous`` (recovery), then the registered reconcilers
get a chance to settle ambiguous entries by asking the world.
"""

from __future__ import annotations

import importlib
import logging
import select
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from thespian.actors import ThespianWatch, WakeupMessage, WatchMessage

from ...core import clock, faults
from ...core.errors import CommitOutcomeUnknown, CommitRejected
from ...supervision.protocol import Ping, Pong, Stamped
from ...supervision.worker import Worker
from ..grants.operators import CredentialsError, ensure_local_operator, load_operators
from ..storage.actor import storage_config
from ..storage.commit import Committed, Outcome, Rejected
from ..storage.env import env_panicked, open_env
from .committer import CommitThread, _Done
from .domain import DEFAULT_KINDS, Entry, LedgerError, Status
from .messages import (
    SETTLE_RECEIVED,
    GetEntry,
    LedgerAnswer,
    ListEntries,
    OperatorSettle,
    Reconcile,
    RecordBatch,
    RecordDenied,
    RecordSettled,
    RecordStarted,
    Verdict,
    WatchRunner,
    _to_op,
    answers_for,
)
from .store import LedgerStore, Op, OpResult, Settle

__all__ = [  # the protocol (.messages) is re-exported: callers import it from here
    "GetEntry", "Ledger", "LedgerAnswer", "ListEntries", "OperatorSettle", "Reconcile", "RecordBatch",
    "RecordDenied", "RecordSettled", "RecordStarted", "Verdict", "WatchRunner",
]

log = logging.getLogger("ouroactors.ledger")
RUNNER_PING_S = 0.25
RUNNER_LOST_AFTER_S = 1.0  # a runner silent this long has died with its effect unsettled
RUNNER_EXITED = "effect runner exited before settlement"
_RUNNERS = "ouroactors:ledger-runners"
_WRITERS = "ouroactors:ledger-writers"
WRITER_EXITED = "direct writer's process exited before settlement"
MAX_BATCH = 256  # operations per transaction under a steady stream (commit cost is flat up to ~256)


@dataclass
class _Pending:
    ops: list[Op]
    sender: Any
    batch: bool
    results: list[Any] = field(default_factory=list)


class Ledger(Worker):
    """The effect ledger authority (second child of the agent tree, after storage)."""

    protocol = (RecordStarted, RecordDenied, RecordSettled, OperatorSettle, RecordBatch, GetEntry, ListEntries,
                Reconcile, WatchRunner)
    reads = (GetEntry, ListEntries)
    stamped_only = True

    _writer: CommitThread | None = None
    _inflight: list[_Pending] | None = None  # the batch the commit thread is committing
    _commit_here = False
    _commits = 0  # group commits answered since start, the record requests they carried, and how
    _committed_ops = 0  # many of those transactions ran on the commit thread
    _handed_over = 0

    def on_start(self, kinds: list[str] | None = None, reconcilers: dict[str, str] | None = None,
                 map_size: int | None = None, commit_thread: bool = True) -> None:
        assert self.context is not None
        storage = self.authorities.get("storage")
        self.env = open_env(storage_config(self.context.data_dir, map_size))
        self.store = LedgerStore(self.env, node=self.context.node, kinds=DEFAULT_KINDS | frozenset(kinds or ()),
                                 fence=storage.generation if storage is not None else None)
        ensure_local_operator(self.context.data_dir)  # operator settlements are verified against it
        self.reconciler_paths = dict(reconcilers or {})
        self.reconcilers: dict[str, Callable[[Entry], Verdict | None]] = {
            kind: _import(path) for kind, path in self.reconciler_paths.items()
        }
        outcome = self.store.recover(self.generation)  # direct writers are fenced on it from now on
        if not isinstance(outcome, Committed):
            raise RuntimeError(f"ledger recovery could not be recorded: {outcome}")
        self.recovered_ambiguous = outcome.value
        self._pending: list[_Pending] = []
        self._pending_ops = 0
        self._runners: dict[str, tuple[Any, float]] = {}  # effect id -> (runner address, last answer)
        self._watching = False
        transport = getattr(getattr(self, "_myRef", None), "transport", None)
        if commit_thread and self.context.base != "simple" and hasattr(transport, "set_watch"):
            self._writer = CommitThread(self.store.apply)
        if self.reconcilers:
            self.send(self.myAddress, Stamped(self.generation, Reconcile()))  # even its own requests are stamped
        if self.context.base != "simple":  # in one process a writer cannot die without the ledger
            self.wakeupAfter(timedelta(seconds=RUNNER_PING_S), payload=_WRITERS)

    def on_stop(self, reason: Any) -> None:
        """Answer everyone before going: the batch in flight as its commit says, the rest rejected."""
        try:
            self._quiesce()
        finally:
            pending, self._pending = self._pending, []
            self._pending_ops = 0
            error = CommitRejected(f"ledger stopped before committing this request ({reason}): not written")
            for item in pending:
                self.send(item.sender, [error] * len(item.ops) if item.batch else error)
            if self._writer is not None:
                self._writer.close()
                self._writer = None

    def receiveMessage(self, message: Any, sender: Any) -> ThespianWatch | None:
        if isinstance(message, WatchMessage):
            if self._writer is not None and self._state == "running":
                try:
                    done = self._writer.poll()
                    if done is not None:
                        self._finish_batch(done)
                    self.after_message()
                except Exception as exc:  # as in the worker shell: the first exception ends the worker
                    self._crash(exc, None)
        else:
            super().receiveMessage(message, sender)
        writer = self._writer  # the pipe is watched only while a commit is in flight
        return ThespianWatch([writer.fd]) if writer is not None and self._inflight is not None else None

    # -- records (group-committed) --------------------------------------------------------------------

    def handle_RecordStarted(self, message: RecordStarted, sender: Any) -> LedgerError | None:
        try:
            op = _to_op(message, self._operators() if isinstance(message, OperatorSettle) else None)
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
            operators = self._operators() if any(isinstance(i, OperatorSettle) for i in message.items) else None
            ops = [_to_op(item, operators) for item in message.items]
        except LedgerError as exc:
            return exc
        self._enqueue(ops, sender, batch=True)
        return None

    def _operators(self) -> dict[str, str]:
        """The operator credentials to verify settlements against (read each time: they may change)."""
        assert self.context is not None
        try:
            return load_operators(self.context.data_dir)
        except CredentialsError as exc:
            raise LedgerError(f"operator credentials cannot be read: {exc}") from None

    def _enqueue(self, ops: list[Op], sender: Any, batch: bool) -> None:
        if faults.armed() is not None and any(isinstance(op, Settle) for op in ops):
            faults.point(SETTLE_RECEIVED)
        self._pending.append(_Pending(ops, sender, batch))
        self._pending_ops += len(ops)
        if self._pending_ops >= MAX_BATCH and self._inflight is None:
            self._flush()

    def after_message(self) -> None:
        if self._inflight is not None and self._writer is not None:
            done = self._writer.poll_done()
            if done is not None:  # finished while this pass ran: answer now, not a pass later
                self._finish_batch(done)
        if not self._pending or self._inflight is not None or self.messages_waiting():
            return
        if self._writer is not None and self._thespian_busy() is not False:
            self._flush()  # to the commit thread: this thread has requests to receive meanwhile
        else:
            self._flush_here()  # nothing else to do (a lone session): no hand-over to pay for

    def _thespian_busy(self) -> bool | None:
        """Whether thespian has work for this thread right now: a connection readable or writable,
        a queued envelope or transmit. None when the transport cannot be seen (assume it has).
        """
        transport: Any = getattr(getattr(self, "_myRef", None), "transport", None)
        try:
            if transport._incomingEnvelopes or transport._waitingTransmits or transport._aTB_queuedPendingTransmits:
                return True
            readable = [transport.socket.fileno(), *transport._incomingSockets,
                        *(idle.socket.fileno() for idle in transport._openSockets.values())]
            writable: list[int] = []
            for fd, intent in transport._transmitIntents.items():
                (readable if intent.stage == transport._XMITStepWaitForAck else writable).append(fd)
            ready, sendable, _ = select.select(readable, writable, [], 0)
        except (AttributeError, TypeError, ValueError, OSError):
            return None
        return bool(ready or sendable)

    def _take_batch(self) -> list[_Pending]:
        """Pending requests for one transaction: all of them, or as many as fit ``MAX_BATCH``."""
        if self._pending_ops <= MAX_BATCH:
            pending, self._pending = self._pending, []
            self._pending_ops = 0
            return pending
        count = ops = 0
        for item in self._pending:
            if count and ops + len(item.ops) > MAX_BATCH:
                break
            count += 1
            ops += len(item.ops)
        pending, self._pending = self._pending[:count], self._pending[count:]
        self._pending_ops -= ops
        return pending

    def _flush(self) -> None:
        """Commit one batch of pending requests and answer it once the commit has returned.

        The commit runs on the commit thread if there is one (answered when it reports), or here
        when there is none or ``_commit_here`` is set.
        """
        pending = self._take_batch()
        if not pending:
            return
        ops = [op for item in pending for op in item.ops]
        if self._writer is not None and not self._commit_here:
            self._inflight = pending
            self._handed_over += 1
            self._writer.submit(ops)  # answered when the commit thread reports (receiveMessage)
            return
        try:
            outcome = self.store.apply(ops)
        except BaseException as exc:
            self._answer_unknown(pending, exc)
            raise
        self._deliver(pending, outcome)

    def _flush_here(self) -> None:
        """:meth:`_flush` with the transaction on this thread (the commit thread must be idle)."""
        self._commit_here = True
        try:
            self._flush()
        finally:
            self._commit_here = False

    def _quiesce(self) -> None:
        """Wait for the batch in flight and answer it (before writing on this thread, or stopping)."""
        if self._writer is not None and self._inflight is not None:
            self._finish_batch(self._writer.wait())

    def _settle(self) -> None:
        """Commit and answer every record request received so far, then return.

        Reads and this thread's own writes call it first, so they come after every record request
        received before them: a read sees them, a maintenance write never races the commit thread.
        """
        self._quiesce()
        while self._pending:
            self._flush_here()

    def _finish_batch(self, done: _Done) -> None:
        pending, self._inflight = self._inflight or [], None
        outcome, exc = done
        if exc is not None:
            self._answer_unknown(pending, exc)
            raise exc
        assert outcome is not None
        self._deliver(pending, outcome)

    def _answer_unknown(self, pending: list[_Pending], exc: BaseException) -> None:
        # The environment died, or a bug: whether this batch reached the disk is not known here.
        # Every caller hears that (never silence), then the ledger crashes and its restart
        # recovers every unsettled entry as ambiguous.
        unknown = CommitOutcomeUnknown(f"ledger crashed during commit: {type(exc).__name__}: {exc}")
        for item in pending:
            self.send(item.sender, [unknown] * len(item.ops) if item.batch else unknown)

    def _deliver(self, pending: list[_Pending], outcome: Outcome[list[OpResult]]) -> None:
        answers = iter(answers_for([op for item in pending for op in item.ops], outcome))
        if isinstance(outcome, Committed):
            self._commits += 1
            self._committed_ops += len(outcome.value)
        for item in pending:
            mine = [next(answers) for _ in item.ops]
            self.send(item.sender, mine if item.batch else mine[0])
        if not isinstance(outcome, Committed | Rejected) and env_panicked(self.env):
            raise RuntimeError(f"storage environment panicked: {outcome.reason}")  # crash; restart recovers

    # -- watched runners ------------------------------------------------------------------------------

    def handle_WatchRunner(self, message: WatchRunner, sender: Any) -> Any:
        self._settle()
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
        if message.payload == _WRITERS:
            self._check_writers()
            self.wakeupAfter(timedelta(seconds=RUNNER_PING_S), payload=_WRITERS)
            return
        if message.payload != _RUNNERS:
            return
        self._watching = False
        now = clock.monotonic()
        lost: list[str] = []
        self._settle()
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

    def _check_writers(self) -> None:
        """Direct writers (:mod:`.direct`) whose process died: their unsettled starts become ambiguous."""
        gone = self.store.gone_writers()
        if not gone:
            return
        self._settle()  # this thread writes now: the commit thread must be idle
        outcome = self.store.forget_writers(gone, WRITER_EXITED)
        if not isinstance(outcome, Committed):
            raise RuntimeError(f"could not record the loss of direct writers: {outcome}")  # crash: recovery does it
        if outcome.value:
            log.warning("%d effect(s) of a dead direct writer are ambiguous: %s", len(outcome.value),
                        ", ".join(outcome.value[:10]))

    # -- reads and maintenance ------------------------------------------------------------------------

    # Requests reach these handlers checked at the door (see .messages): no checks of their own.

    def handle_GetEntry(self, message: GetEntry, sender: Any) -> Any:
        self._settle()
        entry = self.store.get(message.effect_id)
        return entry if entry is not None else LedgerError(f"no effect {message.effect_id!r} in the ledger")

    def handle_ListEntries(self, message: ListEntries, sender: Any) -> list[Entry] | LedgerError:
        self._settle()
        return self.store.list(status=message.status, session=message.session, kind=message.kind,
                               since_seq=message.since_seq, limit=message.limit)

    def handle_str(self, message: str, sender: Any) -> Any:
        if message == "status":
            self._settle()
            return {"counts": self.store.counts(), "recovered_ambiguous": self.recovered_ambiguous,
                    "storage_generation": self.store.fence, "generation": self.generation,
                    "quarantined": len(self.store.quarantined),
                    "watched_writers": len(self.store.watched_writers()),
                    "group_commit": {"transactions": self._commits, "records": self._committed_ops,
                                     "thread": self._writer is not None, "handed_over": self._handed_over}}
        return self.unhandled(message, sender)

    def handle_Reconcile(self, message: Reconcile, sender: Any) -> dict[str, int] | None:
        """Ask each ambiguous entry's reconciler; settle what it can prove."""
        self._settle()  # this thread writes now: the commit thread must be idle
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
            outcome = self.store.apply([Settle(entry.effect_id, verdict.status,
                                               f"reconciled by {self.reconciler_paths[entry.kind]}"[:500],
                                               verdict.evidence, f"reconciler:{entry.kind}", reconciler=True)])
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
