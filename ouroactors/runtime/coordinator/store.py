"""The sessions' durable state in the node's LMDB environment, written only through the commit contract.

Layout (named databases, see ``KNOWN_DBS``):

* ``sessions``: session id → :class:`~.record.SessionRecord`;
* ``sessions_live``: ``node/session`` → :class:`~.record.Recoverable`, for non-terminal sessions only
  (put and deleted in the same transactions as the record): the boot sweep reads this projection,
  never every session that ever was;
* ``session_events``: ``session/`` + 8-byte big-endian cursor → :class:`~.record.PublishedEvent`,
  written in the checkpoint's transaction (see :mod:`.publication` for why);
* ``session_resume``: ``session/s/<event id>`` (an accepted resume event, for duplicates),
  ``session/r/`` + 8-byte sequence → :class:`~.record.RejectedEvent`, ``session/n`` → that log's count;
* ``session_timers``: 8-byte big-endian due time + ``session`` → empty (the earliest timer wait of a
  waiting session; :mod:`.timers` scans it up to a clock reading).

Keys are built in :mod:`.keys`.

**Every mutation is a compare-and-set** on the record's ``revision`` inside one write transaction:
the caller names the revision it read; another found raises :class:`RevisionConflict` and nothing is
written, so two coordinators of one session can never both win. A coordinator that loses stops (it
does not re-read and retry). A mutation may also name the coordinator incarnation that claimed the
session (:meth:`SessionStore.claim`); another holder raises :class:`NotOwner`.

**Outcomes** are the storage contract's: ``Committed(record)``, ``Rejected(reason)`` (definitely not
written) or ``Unknown(reason)`` — which the caller must not treat as either: it stops, and whoever
continues reads the record back first (:meth:`SessionStore.reconcile`; for a checkpoint,
:func:`~.publication.reconciled`).
Domain refusals (bad transition, conflict, gap, unknown session) are raised; nothing is written.

**A record that does not decode fails closed**: reading it raises
:class:`~ouroactors.core.errors.CorruptRecord`, its bytes are copied to ``quarantine`` (the original
stays in place, so the id can never be created afresh) and it is listed in :attr:`quarantined`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any, TypeVar

import lmdb

from ...authorities.storage.commit import Committed, Outcome, write
from ...authorities.storage.env import StorageConfig, open_env
from ...core import clock, faults
from ...core.codec import CodecError, Record, check_size, decode, encode, seq_key, seq_of
from ..execution.journal_format import head_key
from . import resume as resume_rules
from .errors import NotOwner, RevisionConflict, SessionExists, UnknownSession
from .keys import live_key, log_prefix, rejected_count_key, rejected_prefix, seen_key, seen_prefix, timer_key
from .mutation import InvalidChange, check_shape, moved, next_record
from .publication import CursorError, CursorGap, CursorMoved, Plan
from .record import (
    AcceptedEvent,
    PublishedEvent,
    Recoverable,
    RejectedEvent,
    ResumeApplied,
    SessionRecord,
    Sweep,
    check_id,
)
from .store_reads import StoreReads
from .workflow import Event, is_terminal

__all__ = ["NotOwner", "RevisionConflict", "SessionExists", "SessionStore", "Sweep", "UnknownSession"]

log = logging.getLogger("ouroactors.coordinator")
# Named boundaries for crash enumeration: each is reached only after its write committed.
TRANSITION_COMMITTED = faults.register_point("coordinator.transition_committed",
                                             "a session transition is durable, nothing acted on it yet")
CHECKPOINT_COMMITTED = faults.register_point("coordinator.checkpoint_committed",
                                             "a checkpoint is durable, not yet acked to the runtime nor published")
RESUME_COMMITTED = faults.register_point("coordinator.resume_committed",
                                         "a resume event was applied (or its rejection logged), nobody told yet")
MAX_RECORD_BYTES = 64 << 10
REJECTIONS_KEPT = 1000  # refused resume events logged per session (the count goes on; the oldest entries go)
R = TypeVar("R", bound=Record)


class SessionStore(StoreReads):
    """Reads (:class:`.store_reads.StoreReads`) and compare-and-set writes of session records (one per process per
    environment)."""

    @classmethod
    def open(cls, data_dir: str | os.PathLike[str], *, map_size: int | None = None,
             fence: int | None = None) -> SessionStore:
        """The store on the node's environment under ``data_dir`` (opened once in this process)."""
        return cls(open_env(StorageConfig.under(data_dir, **({"map_size": map_size} if map_size else {}))),
                   fence=fence)

    # -- writes ------------------------------------------------------------------------------------

    def _write(self, fn: Callable[[lmdb.Transaction], Any], boundary: str | None = None) -> Outcome[Any]:
        try:
            outcome = write(self.env, fn, fence=self.fence)
        finally:
            self._save_quarantine()
        if boundary is not None and isinstance(outcome, Committed):
            faults.point(boundary)
        return outcome

    def create(self, record: SessionRecord, also: Callable[[lmdb.Transaction], None] | None = None
               ) -> Outcome[SessionRecord]:
        """Write a new session (its revision and state version as given, usually 0); :class:`SessionExists` else.
        ``also`` puts what belongs with it (its configuration) in the same transaction."""
        if record.revision != 0:
            raise InvalidChange(f"a new session starts at revision 0, not {record.revision}")

        def run(txn: lmdb.Transaction) -> SessionRecord:
            key = record.session_id.encode()
            if txn.get(key, db=self.sessions) is not None:
                raise SessionExists(record.session_id)
            if txn.get(head_key(key), db=self.journal_anchor) is not None:  # an imported (or orphaned) journal:
                # a session created under its id would continue that history as its own conversation
                raise SessionExists(record.session_id, "has a journal here already (imported, or left by an "
                                                       "earlier session): choose another id")
            if also is not None:
                also(txn)
            now = clock.time_ns()
            fresh = record.model_copy(update={"created_ns": record.created_ns or now, "updated_ns": now})
            self._put(txn, None, fresh)
            return fresh

        return self._write(run)

    def update(self, session_id: str, expected_revision: int, change: Callable[[SessionRecord], SessionRecord],
               *, coordinator: str | None = None) -> Outcome[SessionRecord]:
        """Apply ``change`` (not a state change: use :meth:`transition`) as a compare-and-set on the revision."""
        def run(txn: lmdb.Transaction) -> SessionRecord:
            old = self._current(txn, session_id, expected_revision, coordinator)
            new = change(old)
            if new.state != old.state or new.state_version != old.state_version:
                raise InvalidChange("update() cannot change the workflow state: use transition()")
            return self._next(txn, old, new)

        return self._write(run)

    def transition(self, session_id: str, expected_revision: int, event: Event, *, coordinator: str | None = None,
                   **changes: Any) -> Outcome[SessionRecord]:
        """Move the session by ``event`` (the table decides; :class:`~.workflow.InvalidTransition` else)."""
        def run(txn: lmdb.Transaction) -> SessionRecord:
            old = self._current(txn, session_id, expected_revision, coordinator)
            return self._next(txn, old, moved(old, event, changes))

        return self._write(run, TRANSITION_COMMITTED)

    def claim(self, session_id: str, expected_revision: int, coordinator: str) -> Outcome[SessionRecord]:
        """Make ``coordinator`` (an incarnation id) the session's writer; later writes naming another are refused."""
        check_id(coordinator, "coordinator")

        def run(txn: lmdb.Transaction) -> SessionRecord:
            old = self._current(txn, session_id, expected_revision, None)
            return self._next(txn, old, old.model_copy(update={"coordinator": coordinator}))

        return self._write(run)

    def settle_swept(self, items: list[tuple[SessionRecord, bytes, tuple[tuple[Event, dict[str, Any]], ...]]],
                     coordinator: str) -> Outcome[list[str]]:
        """The boot sweep's batch (:mod:`.sweep`): claim each session for ``coordinator`` and apply its transitions,
        all in one transaction. Each item carries the bytes its record was read from: a record stored otherwise now
        has moved since, and is left out (its id is not in the answer: a coordinator recovers it instead)."""
        def run(txn: lmdb.Transaction) -> list[str]:
            done = []
            for old, raw, steps in items:
                if txn.get(old.session_id.encode(), db=self.sessions) != raw:
                    continue
                new = old.model_copy(update={"coordinator": coordinator})
                for event, changes in steps:
                    new = moved(new, event, changes)
                self._next(txn, old, new)
                done.append(old.session_id)
            return done

        return self._write(run)

    def checkpoint(self, session_id: str, expected_revision: int, plan: Plan, *, coordinator: str | None = None,
                   then: Event | None = None, also: Callable[[lmdb.Transaction], None] | None = None,
                   **changes: Any) -> Outcome[SessionRecord]:
        """Commit ``plan`` (cursor, digests and its events in the log) and optionally a transition, in one txn.

        The plan is checked against the durable cursor inside the transaction: a plan made from
        another committed cursor is refused (:class:`~.publication.CursorGap` / ``CursorError``). ``also`` puts
        what must commit with it (the session's journal record of a turn the coordinator ended), last: it runs only
        once every check has passed.
        """
        def run(txn: lmdb.Transaction) -> SessionRecord:
            old = self._current(txn, session_id, expected_revision, coordinator)
            if plan.committed_before != old.committed_cursor:
                if plan.committed_before > old.committed_cursor:
                    raise CursorGap(old.committed_cursor, plan.committed_before + 1)
                raise CursorMoved(plan.committed_before, old.committed_cursor)  # carried meanwhile: plan again
            generation = old.runtime.generation if old.runtime else old.last_generation
            self._put_events(txn, session_id, plan, generation, clock.time_ns(), carried=False)
            update = {"committed_cursor": plan.cursor, "log_digest": plan.log_digest,
                      "conversation_digest": plan.conversation_digest}
            new = old.model_copy(update=update)
            if then is not None:
                new = moved(new, then, changes)
            elif changes:
                new = new.model_copy(update=changes)
            written = self._next(txn, old, new, checkpoint=True)
            if also is not None:
                also(txn)
            return written

        return self._write(run, CHECKPOINT_COMMITTED)

    def _put_events(self, txn: lmdb.Transaction, session_id: str, plan: Plan, generation: int, now: int, *,
                    carried: bool) -> None:
        prefix = log_prefix(session_id)
        for event in plan.events:
            body = encode(PublishedEvent(cursor=event.cursor, kind=event.kind, turn=event.turn, data=event.data,
                                         generation=generation, committed_ns=now, carried=carried))
            if not txn.put(prefix + seq_key(event.cursor), body, db=self.log, overwrite=False):
                raise CursorError(f"event {event.cursor} of {session_id!r} is in the log already")

    def put_carried(self, txn: lmdb.Transaction, record: SessionRecord, plan: Plan) -> tuple[SessionRecord, bytes]:
        """Write a checkpoint a runtime carries (:func:`~.publication.carry` made ``plan`` from ``record``, read in
        this same transaction) inside the runtime's ``txn``: the events, the record's cursor and log digest, its
        projection. The revision and the state stay as they are: they are the coordinator's (see
        :mod:`.mutation`). Answers the record written and its bytes (the runtime compares them on its next read)."""
        assert record.runtime is not None and not plan.empty
        self._put_events(txn, record.session_id, plan, record.runtime.generation, clock.time_ns(), carried=True)
        new = record.model_copy(update={"committed_cursor": plan.cursor, "log_digest": plan.log_digest})
        body = encode(new)
        txn.put(new.session_id.encode(), body, db=self.sessions)
        # its ``sessions_live`` projection is unchanged: a carried checkpoint moves only the cursor and the digest
        return new, body

    def resume(self, session_id: str, event: resume_rules.ResumeEvent, actor: resume_rules.VerifiedActor | None, *,
               now_ns: int | None = None, coordinator: str | None = None) -> Outcome[ResumeApplied]:
        """Check ``event`` (:func:`~.resume.check`) and apply it — or log its rejection — in one transaction.

        A rejection does not bump the revision (a stranger's refused event must not make the owning
        coordinator's next write conflict). An acceptance is a transition; the event (its payload:
        the decision, the job's result, the message) is kept under its id and the record names it in
        ``resumed_by``, so a coordinator that crashes right after still finds what resumed the session
        (:meth:`accepted`).
        """
        now = clock.time_ns() if now_ns is None else now_ns

        def run(txn: lmdb.Transaction) -> ResumeApplied:
            record = self._read(txn, session_id)
            if record is None:
                raise UnknownSession(session_id)
            if coordinator is not None and record.coordinator and record.coordinator != coordinator:
                raise NotOwner(session_id, record.coordinator, coordinator)
            seen_at = seen_key(session_id, event.event_id)
            completed_by = None
            if event.kind is resume_rules.Kind.JOB and event.wait_id and record.wait(event.wait_id) is None:
                completed_by = self._job_completed_by(txn, session_id, event.wait_id)  # a second completion?
            decision = resume_rules.check(record, event, actor, seen=txn.get(seen_at, db=self.resumes) is not None,
                                          now_ns=now, completed_by=completed_by)
            if isinstance(decision, resume_rules.Refuse):
                return ResumeApplied(record, False, self._reject(txn, record, event, actor, decision, now))
            assert actor is not None  # check() refuses an event nobody verified
            accepted = AcceptedEvent(event_id=event.event_id, kind=event.kind.value, actor=actor.name,
                                     channel=event.channel, wait_id=event.wait_id, payload=event.payload,
                                     from_version=record.state_version, at_ns=now,
                                     at_cursor=record.committed_cursor)
            txn.put(seen_at, encode(accepted), db=self.resumes)
            # the reason says why the session is where it is: an expiry names its job, any other resume clears it
            moved_to = moved(record, decision.event, {"resumed_by": event.event_id, "reason": decision.reason})
            return ResumeApplied(self._next(txn, record, moved_to), True)

        return self._write(run, RESUME_COMMITTED)

    # -- inside a write transaction ----------------------------------------------------------------

    def _job_completed_by(self, txn: lmdb.Transaction, session_id: str, job_id: str) -> str | None:
        """How an accepted event completed external job ``job_id`` before (the latest such), or None. A scan of the
        session's accepted events, paid only by a completion that has no pending wait to answer."""
        prefix = seen_prefix(session_id)
        latest: AcceptedEvent | None = None
        cursor = txn.cursor(db=self.resumes)
        if cursor.set_range(prefix):
            for key, raw in cursor:
                if not bytes(key).startswith(prefix):
                    break
                try:
                    accepted = decode(bytes(raw), AcceptedEvent)
                except CodecError:
                    continue  # an unreadable one is reported by the reads that quarantine it
                if accepted.kind == resume_rules.Kind.JOB.value and accepted.wait_id == job_id \
                        and (latest is None or accepted.at_ns > latest.at_ns):
                    latest = accepted
        if latest is None:
            return None
        return f"event {latest.event_id!r} by {latest.actor!r}, at state version {latest.from_version}"

    def _current(self, txn: lmdb.Transaction, session_id: str, expected: int, coordinator: str | None
                 ) -> SessionRecord:
        record = self._read(txn, session_id)
        if record is None:
            raise UnknownSession(session_id)
        if record.revision != expected:
            raise RevisionConflict(session_id, expected, record.revision)
        if coordinator is not None and record.coordinator and record.coordinator != coordinator:
            raise NotOwner(session_id, record.coordinator, coordinator)
        return record

    def _next(self, txn: lmdb.Transaction, old: SessionRecord, new: SessionRecord, *, checkpoint: bool = False
              ) -> SessionRecord:
        new = next_record(old, new, clock.time_ns(), checkpoint=checkpoint)
        self._put(txn, old, new)
        return new

    def _put(self, txn: lmdb.Transaction, old: SessionRecord | None, new: SessionRecord) -> None:
        check_shape(new)
        body = encode(new)
        check_size(body, f"session {new.session_id!r}", MAX_RECORD_BYTES)
        sid = new.session_id
        txn.put(sid.encode(), body, db=self.sessions)
        if old is not None and old.node != new.node:
            txn.delete(live_key(old.node, sid), db=self.live)
        if is_terminal(new.state):
            txn.delete(live_key(new.node, sid), db=self.live)
        else:
            txn.put(live_key(new.node, sid), encode(Recoverable.of(new)), db=self.live)
        old_due = old.timer_due() if old is not None else None
        new_due = new.timer_due()
        if old_due != new_due:
            if old_due is not None:
                txn.delete(timer_key(old_due, sid), db=self.timers)
            if new_due is not None:
                txn.put(timer_key(new_due, sid), b"", db=self.timers)

    def _reject(self, txn: lmdb.Transaction, record: SessionRecord, event: resume_rules.ResumeEvent,
                actor: resume_rules.VerifiedActor | None, refusal: resume_rules.Refuse, now: int) -> RejectedEvent:
        count_key = rejected_count_key(record.session_id)
        raw = txn.get(count_key, db=self.resumes)
        seq = (seq_of(bytes(raw)) if raw is not None else 0) + 1
        who = actor.name if actor is not None else f"unverified:{event.actor}"  # the claim, marked as only that
        rejected = RejectedEvent(seq=seq, event_id=event.event_id, kind=event.kind.value, actor=who,
                                 channel=event.channel, code=refusal.code.value, detail=refusal.detail,
                                 expected_version=event.expected_version, found_version=record.state_version,
                                 at_ns=now)
        prefix = rejected_prefix(record.session_id)
        txn.put(prefix + seq_key(seq), encode(rejected), db=self.resumes)
        if seq > REJECTIONS_KEPT:  # a stranger may send refused events forever: the log keeps the latest ones only
            txn.delete(prefix + seq_key(seq - REJECTIONS_KEPT), db=self.resumes)
        txn.put(count_key, seq_key(seq), db=self.resumes)
        return rejected
