"""The ledger authority: a leaf actor that writes the node's LMDB environment from its own process.

Requests (ask them; all may be :class:`~ouroactors.supervision.protocol.Stamped` with the ledger's
generation): :class:`RecordStarted`, :class:`RecordDenied`, :class:`RecordSettled`,
:class:`OperatorSettle`, :class:`RecordBatch`, :class:`GetEntry`, :class:`ListEntries`,
:class:`Reconcile`, ``"status"``. Record answers are :class:`LedgerAnswer` (``created`` or
``existing`` with the entry) or an error: a :class:`~.domain.LedgerError` (refused, nothing
written), :class:`~ouroactors.core.errors.CommitRejected` (not written) or
:class:`~ouroactors.core.errors.CommitOutcomeUnknown` (reconcile before relying on it).

**Group commit** (no timer: requests that arrived together share one transaction, handed to a commit
thread while thespian has other work for the actor thread) is :class:`~.group.GroupCommit`'s, the
ledger's base class; see :mod:`.group`.

At start, every unsettled entry becomes ``ambiguous`` (recovery), then the registered reconcilers
get a chance to settle ambiguous entries by asking the world.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from thespian.actors import ThespianWatch, WakeupMessage, WatchMessage

from ...core import clock
from ...core.errors import CommitRejected, StaleGeneration
from ...supervision.calls import Addressed
from ...supervision.protocol import Ping, Pong, Stamped
from ..grants.operators import CredentialsError, ensure_local_operator, load_operators
from ..heartbeats import note_refused_heartbeat
from ..storage.actor import storage_config
from ..storage.commit import Committed
from ..storage.env import open_env
from .committer import CommitThread
from .domain import DEFAULT_KINDS, Entry, LedgerError, Status
from .group import MAX_BATCH as MAX_BATCH  # re-exported: group commit lives in .group
from .group import GroupCommit, _Pending
from .messages import (
    GetEntry,
    LedgerAnswer,
    ListEntries,
    OperatorSettle,
    Reconcile,
    ReconcilerKinds,
    RecordBatch,
    RecordDenied,
    RecordSettled,
    RecordStarted,
    SessionReconciled,
    Verdict,
    WatchRunner,
    _to_op,
)
from .reconcilers import DEFAULT_RECONCILERS
from .store import LedgerStore, Settle

__all__ = [  # the protocol (.messages) is re-exported: callers import it from here
    "GetEntry", "Ledger", "LedgerAnswer", "ListEntries", "OperatorSettle", "Reconcile", "ReconcilerKinds",
    "RecordBatch", "RecordDenied", "RecordSettled", "RecordStarted", "SessionReconciled", "Verdict", "WatchRunner",
]

log = logging.getLogger("ouroactors.ledger")
RUNNER_PING_S = 0.25
RUNNER_LOST_AFTER_S = 1.0  # a runner silent this long has died with its effect unsettled
RUNNER_EXITED = "effect runner exited before settlement"
_RUNNERS = "ouroactors:ledger-runners"
_WRITERS = "ouroactors:ledger-writers"
WRITER_EXITED = "direct writer's process exited before settlement"


class Ledger(GroupCommit):
    """The effect ledger authority (second child of the agent tree, after storage)."""

    protocol = (RecordStarted, RecordDenied, RecordSettled, OperatorSettle, RecordBatch, GetEntry, ListEntries,
                Reconcile, ReconcilerKinds, WatchRunner)
    reads = (GetEntry, ListEntries, ReconcilerKinds)
    stamped_only = True

    def on_start(self, kinds: list[str] | None = None, reconcilers: dict[str, str] | None = None,
                 map_size: int | None = None, commit_thread: bool = True) -> None:
        assert self.context is not None
        storage = self.authorities.get("storage")
        self.env = open_env(storage_config(self.context.data_dir, map_size))
        self.store = LedgerStore(self.env, node=self.context.node, kinds=DEFAULT_KINDS | frozenset(kinds or ()),
                                 fence=storage.generation if storage is not None else None)
        ensure_local_operator(self.context.data_dir)  # operator settlements are verified against it
        self.reconciler_paths = {**DEFAULT_RECONCILERS, **(reconcilers or {})}  # a tree's own win
        self.reconcilers: dict[str, Callable[[Entry], Verdict | None]] = {
            kind: _import(path) for kind, path in self.reconciler_paths.items()
        }
        outcome = self.store.recover(self.generation)  # direct writers are fenced on it from now on
        if not isinstance(outcome, Committed):
            raise RuntimeError(f"ledger recovery could not be recorded: {outcome}")
        self.recovered_ambiguous = outcome.value
        self._pending: list[_Pending] = []
        self._pending_ops = 0
        # effect id -> (runner address, its worker generation if named, last answer)
        self._runners: dict[str, tuple[Any, int | None, float]] = {}
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
                self.answer_asker(item.sender, [error] * len(item.ops) if item.batch else error)
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

    # -- watched runners ------------------------------------------------------------------------------

    def handle_WatchRunner(self, message: WatchRunner, sender: Any) -> Any:
        self._settle()
        entry = self.store.get(message.effect_id)
        if entry is None:
            return LedgerError(f"no effect {message.effect_id!r} in the ledger")
        if entry.status is Status.STARTED:
            self._runners[message.effect_id] = (message.runner or sender, message.runner_generation, clock.monotonic())
            if not self._watching:
                self._watching = True
                self.wakeupAfter(timedelta(seconds=RUNNER_PING_S), payload=_RUNNERS)
        return "watching"

    def handle_Pong(self, message: Pong, sender: Any) -> None:
        for effect_id, (runner, generation, _seen) in list(self._runners.items()):
            if runner == sender:
                self._runners[effect_id] = (runner, generation, clock.monotonic())

    def handle_StaleGeneration(self, message: StaleGeneration, sender: Any) -> None:
        watched = any(runner == sender for runner, _generation, _seen in self._runners.values())
        note_refused_heartbeat(log, self.path, f"runner {sender}" if watched else None, sender, message)

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
        for effect_id, (runner, generation, seen) in list(self._runners.items()):
            entry = self.store.get(effect_id)
            if entry is None or entry.status is not Status.STARTED:
                del self._runners[effect_id]  # settled: nothing left to watch for
            elif now - seen > RUNNER_LOST_AFTER_S:
                lost.append(effect_id)
                del self._runners[effect_id]
            else:  # addressed to a worker runner's generation: whoever got its port once it died refuses it
                self.send(runner, Ping("ledger", 0) if generation is None else Addressed(generation, Ping("ledger", 0)))
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
                    "gone_writers": len(self.store.gone_writers()),  # died, not yet reaped (every RUNNER_PING_S)
                    "group_commit": {"transactions": self._commits, "records": self._committed_ops,
                                     "thread": self._writer is not None, "handed_over": self._handed_over}}
        return self.unhandled(message, sender)

    def handle_ReconcilerKinds(self, message: ReconcilerKinds, sender: Any) -> tuple[str, ...]:
        return tuple(sorted(self.reconcilers))

    def handle_Reconcile(self, message: Reconcile, sender: Any) -> dict[str, int] | SessionReconciled | None:
        """Ask each ambiguous entry's reconciler (all, or one session's); settle what it can prove."""
        if message.session is not None:
            self._check_writers()  # a dead runtime's starts are ambiguous now, not at the next check
        settled, left = self._reconcile(message.session)
        if message.session is not None:
            unsettled = tuple((e.effect_id, e.status.value) for e in self.store.list(session=message.session,
                                                                                     limit=10_000_000)
                              if e.status in (Status.STARTED, Status.AMBIGUOUS))
            return SessionReconciled(settled, unsettled)
        if sender == self.myAddress:
            return None  # the start-up run: nobody to answer
        return {"settled": settled, "ambiguous": left}

    def _reconcile(self, session: str | None) -> tuple[int, int]:
        self._settle()  # this thread writes now: the commit thread must be idle
        settled = left = 0
        for entry in self.store.list(status=Status.AMBIGUOUS.value, session=session, limit=10_000):
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
        return settled, left


def _import(path: str) -> Callable[[Entry], Verdict | None]:
    module, _, attr = path.partition(":")
    target: Any = importlib.import_module(module)
    for part in attr.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise TypeError(f"reconciler {path!r} is not callable")
    return target
