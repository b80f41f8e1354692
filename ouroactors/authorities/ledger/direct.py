"""Recording effects from the caller's own process: the ledger without a message hop.

An ask to the ledger actor costs a thespian round trip (about 1 ms between processes here), more
than the synced LMDB commit behind it (about 0.3 ms). DESIGN.md's third storage shape removes the
hop: the consumer writes the ledger's entries itself, in the node's environment opened in its own
process, and **fencing is done by the transaction**. A :class:`LedgerWriter` is bound to a
:class:`~.store.Stamp` — the storage generation (written by storage) and the ledger generation
(written by the ledger in its recovery transaction) — and every one of its transactions reads
both first: if either has changed, nothing is written and the answer is
:class:`~ouroactors.core.errors.StaleGeneration`. Since LMDB runs one write transaction at a time,
the ledger's recovery ("every ``started`` entry becomes ``ambiguous``") is atomic against direct
writers: a start committed before it is recovered by it, one after it is refused.

Everything else is the ledger's own: the same decisions (:mod:`.domain`), store (:mod:`.store`),
bad-input checks (:func:`~.messages._to_op`), answers (:class:`~.messages.LedgerAnswer`,
:class:`~.domain.LedgerError`, :class:`~ouroactors.core.errors.CommitRejected`,
:class:`~ouroactors.core.errors.CommitOutcomeUnknown`) and fault points, so an effect recorded
directly is indistinguishable from one recorded through the actor.

**Watching.** A writer created with ``watch=True`` (the default) registers its process (pid and
kernel start time) in ``ledger_writers``, in its first transaction that commits (a writer that committed nothing
has nothing to watch; a commit of its own would cost every runtime ~1 ms at its start), and indexes its starts in
``ledger_runs``, in the same transactions as the starts (a start it settles itself leaves its key to its next start: see
:mod:`.store`). The ledger actor checks the registered processes every
:data:`~.actor.RUNNER_PING_S` seconds (multiproc bases): when one has died, its unsettled starts
become ``ambiguous`` at once — the effect may or may not have happened. No message is needed,
per writer or per effect. (A watched writer must share the ledger's PID namespace — not inside a
sandbox that unshares it — or it would be taken for dead; effects run *in* a sandbox are recorded
by the process that launched it.) On the in-process base nothing is checked: a writer there cannot
die without the ledger, and the ledger's recovery covers both.

**Group commit across threads.** Threads sharing one writer share its transactions: the first
caller to find no commit running commits everything queued meanwhile in one transaction
(leader/followers), and each caller gets its own answers. A lone caller commits at once.

**Rules** (``shared/notes/lmdb.md``): the process opens the environment once (the registry in
:mod:`~ouroactors.authorities.storage.env` enforces it) and must create no children afterwards — a
leaf actor or an external program, never a supervisor. Starting a multiproc ``ActorSystem`` forks
its admin from the calling process, so a program starts its system first and opens writers after
(the forked actors would otherwise find the handle inherited and refuse to start). A commit
whose outcome is unknown because the environment panicked leaves the writer dead: every later call raises
:class:`~ouroactors.authorities.storage.commit.EnvironmentDead`, and the process must exit (a
leaf actor crashes and is restarted in a new process).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ...core import clock, faults
from ...core.errors import StaleGeneration
from ...core.procs import process_start_ticks
from ..storage.commit import Committed, EnvironmentDead, Rejected
from ..storage.env import StorageConfig, env_panicked, open_env
from .domain import DEFAULT_KINDS, LedgerError
from .messages import (
    SETTLE_RECEIVED,
    OperatorSettle,
    RecordDecision,
    RecordDenied,
    RecordSettled,
    RecordStarted,
    _to_op,
    answers_for,
)
from .store import LedgerStore, Op, Settle, Stamp, WriterRecord

__all__ = ["LedgerWriter", "NoLedger", "Rider"]

Request = RecordStarted | RecordDenied | RecordDecision | RecordSettled | OperatorSettle
Answer = Any  # LedgerAnswer | LedgerError | StaleGeneration | CommitRejected | CommitOutcomeUnknown


class NoLedger(LedgerError):
    """The data dir has no recovered ledger yet: there is no generation to be bound to."""


class Rider(Protocol):
    """Records that ride in a ledger transaction (a session's journal): put inside it, told its outcome.

    ``put_staged`` must never raise and must not spoil the transaction (the journal puts its records in a nested
    transaction): a failed journal append never refuses an effect — the ledger is the gate.
    """

    def put_staged(self, txn: Any, *, isolate: bool = False) -> Any: ...
    def settle_staged(self, batch: Any, outcome: Any) -> None: ...


@dataclass
class _Job:
    ops: list[Op]
    riders: Sequence[Rider] = ()
    answers: list[Answer] = field(default_factory=list)
    done: bool = False
    error: BaseException | None = None


class LedgerWriter:
    """Writes ledger entries from this process, fenced on the generations it was bound to.

    ``data_dir`` is the node's (the one the agent tree runs on); ``stamp`` defaults to the
    generations in force now — a consumer actor passes the ones its supervisor gave it
    (:meth:`for_worker`). ``kinds`` adds effect kinds to the defaults, as the ledger's spec does.
    """

    def __init__(self, data_dir: str | os.PathLike[str], *, node: str | None = None,
                 stamp: Stamp | None = None, kinds: Iterable[str] = (), watch: bool = True,
                 map_size: int | None = None) -> None:
        self.env = open_env(StorageConfig.under(data_dir, **({"map_size": map_size} if map_size else {})))
        self.node = node or os.environ.get("OUROACTORS_NODE") or f"local:{os.getpid()}"
        self._store = LedgerStore(self.env, node=self.node, kinds=DEFAULT_KINDS | frozenset(kinds), fence=None)
        current = self._store.current_stamp()
        if stamp is None:
            if current is None:
                raise NoLedger(f"{data_dir}: no ledger has recovered this data dir yet (start the agent tree first)")
            stamp = current
        self.stamp = stamp
        self.writer_id: bytes | None = None
        self._unregistered: WriterRecord | None = None  # the watch's record, until a transaction carried it
        self._dead: str | None = None
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._queue: list[_Job] = []
        self._committing = False
        self.transactions = 0  # group commits and the records they carried (for status and benchmarks)
        self.records = 0
        if watch:
            self._register()

    @classmethod
    def for_worker(cls, worker: Any, **kwargs: Any) -> LedgerWriter:
        """A writer for a leaf actor of the agent tree, stamped with the generations it started with."""
        authorities = worker.authorities
        if "storage" not in authorities or "ledger" not in authorities:
            raise NoLedger(f"{worker.path}: storage and ledger must be earlier siblings (or ancestors' authorities)")
        stamp = Stamp(authorities["storage"].generation, authorities["ledger"].generation)
        return cls(worker.context.data_dir, node=worker.context.node, stamp=stamp, **kwargs)

    def _register(self) -> None:
        """Be watched from this writer's first transaction that commits: its record rides in it (until one has
        committed, every transaction carries it). A stamp already gone is refused now, as a registration in a
        transaction of its own would be."""
        pid = os.getpid()
        ticks = process_start_ticks(pid)
        assert ticks is not None  # this very process
        self._store.check_stamp(self.stamp)  # StaleGeneration propagates
        self.writer_id = os.urandom(8).hex().encode()
        self._unregistered = WriterRecord(pid=pid, start_ticks=ticks, node=self.node, opened_ns=clock.time_ns())

    # -- the protocol, as calls -------------------------------------------------------------------------

    def record_started(self, request: Any, riders: Sequence[Rider] = ()) -> Answer:
        return self.submit([RecordStarted(request)], riders)[0]

    def record_denied(self, request: Any, reason: str, riders: Sequence[Rider] = ()) -> Answer:
        return self.submit([RecordDenied(request, reason)], riders)[0]

    def record_settled(self, effect_id: str, status: str, reason: str | None = None,
                       evidence: dict[str, Any] | None = None, by: str = "runner",
                       riders: Sequence[Rider] = ()) -> Answer:
        return self.submit([RecordSettled(effect_id, status, reason, evidence, by)], riders)[0]

    def record_cut_short(self, effect_id: str, reason: str) -> bool:
        """A started effect whose runner was cancelled while it ran (an interrupt, a deadline, a stop): ``ambiguous``
        now, with ``reason`` — never failed, since it may have acted before it was stopped — instead of when this
        writer's process is found gone, with a reason that says only that. Best effort: False when the mark did not
        commit (the writer's exit still marks it). Its own transaction: a cancel path records nothing else."""
        return isinstance(self._store.mark_ambiguous([effect_id], reason), Committed)

    def carry(self, riders: Sequence[Rider]) -> None:
        """Commit what ``riders`` hold staged, in a transaction of the group commit with no ledger record of its own:
        before a wait that records nothing (an approval a grants authority decided remotely), so the journal's
        records of the model's answer that asks it are durable first. Fenced by the writer's stamp, as every commit."""
        if riders:
            self._commit([], riders)

    def submit(self, requests: Sequence[Request], riders: Sequence[Rider] = ()) -> list[Answer]:
        """Record ``requests`` (in order, in one transaction with whatever other threads queued).

        A malformed request is answered with its :class:`LedgerError` and written by nobody; the
        others go ahead (as separate messages to the actor would).
        """
        answers: list[Answer] = [None] * len(requests)
        ops: list[Op] = []
        where: list[int] = []
        for index, request in enumerate(requests):
            try:
                ops.append(_to_op(request))
                where.append(index)
            except LedgerError as exc:
                answers[index] = exc
        if ops:
            for index, answer in zip(where, self._commit(ops, riders), strict=True):
                answers[index] = answer
        return answers

    # -- group commit -------------------------------------------------------------------------------

    def _commit(self, ops: list[Op], riders: Sequence[Rider] = ()) -> list[Answer]:
        if faults.armed() is not None and any(isinstance(op, Settle) for op in ops):
            faults.point(SETTLE_RECEIVED)
        job = _Job(ops, riders)
        with self._lock:
            if self._dead is not None:
                raise EnvironmentDead(self._dead)
            self._queue.append(job)
            while self._committing and not job.done:
                self._idle.wait()
            if not job.done:  # lead: commit everything queued so far, this job included
                self._committing = True
                batch, self._queue = self._queue, []
        if not job.done:
            try:
                self._lead(batch)
            finally:
                with self._lock:
                    self._committing = False
                    self._idle.notify_all()
        if job.error is not None:
            raise job.error
        return job.answers

    def _lead(self, batch: list[_Job]) -> None:
        ops = [op for job in batch for op in job.ops]
        riders = list(dict.fromkeys(r for job in batch for r in job.riders))  # one put each per transaction
        put: list[tuple[Rider, Any]] = []

        def ride(txn: Any) -> None:
            put.clear()  # the transaction's own attempt: only what it put is settled with its outcome
            put.extend((rider, rider.put_staged(txn, isolate=True)) for rider in riders)

        try:
            outcome = self._store.apply(ops, stamp=self.stamp, writer=self.writer_id, ride=ride if riders else None,
                                        register=self._unregistered)
        except StaleGeneration as stale:
            self._finish(batch, [stale] * len(ops))
            return
        except BaseException as exc:  # a bug or a dead environment: every caller hears it
            if isinstance(exc, EnvironmentDead):
                self._dead = f"{exc}; this process must exit"
            for job in batch:
                job.error, job.done = exc, True
            raise
        if isinstance(outcome, Committed):
            self._unregistered = None  # watched from now on
            self.transactions += 1
            self.records += len(ops)
        elif not isinstance(outcome, Rejected) and env_panicked(self.env):
            self._dead = f"the environment panicked: {outcome.reason}; this process must exit"
        for rider, staged in put:
            rider.settle_staged(staged, outcome)
        self._finish(batch, answers_for(ops, outcome))

    @staticmethod
    def _finish(batch: list[_Job], answers: list[Answer]) -> None:
        """Hand each job its share of ``answers`` (one per op, in the batch's order)."""
        start = 0
        for job in batch:
            job.answers = answers[start:start + len(job.ops)]
            start += len(job.ops)
            job.done = True

    # -- reads ----------------------------------------------------------------------------------------

    def get(self, effect_id: str) -> Any:
        """The entry as committed now (None if there is none)."""
        return self._store.get(effect_id)

