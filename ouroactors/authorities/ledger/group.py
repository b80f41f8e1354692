"""The ledger's group commit: record requests batched into shared transactions, optionally on a commit thread.

Split from :mod:`.actor` because batching, handing a batch to the commit thread and answering it once its commit
returned is one mechanism with its own state (pending requests, the batch in flight, counters), apart from what
the ledger records and reads. :class:`GroupCommit` is the :class:`~.actor.Ledger`'s base class: the ledger's
handlers enqueue (:meth:`GroupCommit._enqueue`) and settle (:meth:`GroupCommit._settle`); its start sets up the
pending list and the :class:`~.committer.CommitThread`, its stop and its ``WatchMessage`` handling use the
methods here. ``MAX_BATCH`` stays importable from :mod:`.actor`.

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
"""

from __future__ import annotations

import select
from dataclasses import dataclass, field
from typing import Any

import lmdb

from ...core import faults
from ...core.errors import CommitOutcomeUnknown
from ...supervision.worker import Worker
from ..storage.commit import Committed, Outcome, Rejected
from ..storage.env import env_panicked
from .committer import CommitThread, _Done
from .messages import SETTLE_RECEIVED, answers_for
from .store import LedgerStore, Op, OpResult, Settle

MAX_BATCH = 256  # operations per transaction under a steady stream (commit cost is flat up to ~256)


@dataclass
class _Pending:
    ops: list[Op]
    sender: Any
    batch: bool
    results: list[Any] = field(default_factory=list)


class GroupCommit(Worker):
    """Batches record requests into group commits and answers each sender once its batch committed."""

    env: lmdb.Environment  # set by the ledger's start
    store: LedgerStore
    _pending: list[_Pending]
    _pending_ops: int
    _writer: CommitThread | None = None
    _inflight: list[_Pending] | None = None  # the batch the commit thread is committing
    _commit_here = False
    _commits = 0  # group commits answered since start, the record requests they carried, and how
    _committed_ops = 0  # many of those transactions ran on the commit thread
    _handed_over = 0

    def _enqueue(self, ops: list[Op], sender: Any, batch: bool) -> None:
        if faults.armed() is not None and any(isinstance(op, Settle) for op in ops):
            faults.point(SETTLE_RECEIVED)
        self._pending.append(_Pending(ops, self.asker_of(sender), batch))
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
            self.answer_asker(item.sender, [unknown] * len(item.ops) if item.batch else unknown)

    def _deliver(self, pending: list[_Pending], outcome: Outcome[list[OpResult]]) -> None:
        answers = iter(answers_for([op for item in pending for op in item.ops], outcome))
        if isinstance(outcome, Committed):
            self._commits += 1
            self._committed_ops += len(outcome.value)
        for item in pending:
            mine = [next(answers) for _ in item.ops]
            self.answer_asker(item.sender, mine if item.batch else mine[0])
        if not isinstance(outcome, Committed | Rejected) and env_panicked(self.env):
            raise RuntimeError(f"storage environment panicked: {outcome.reason}")  # crash; restart recovers
