"""The session store's reading half: records, the recoverable projection, the event log, resume logs, timers.

:class:`~.store.SessionStore` adds the writes (each a compare-and-set on the record's revision). Both share
the fail-closed decoding here: a record that does not decode raises
:class:`~ouroactors.core.errors.CorruptRecord`, its bytes are copied to ``quarantine`` (the original stays in
place, so the id can never be created afresh) and it is listed in :attr:`StoreReads.quarantined`.
"""

from __future__ import annotations

import logging
from typing import TypeVar

import lmdb

from ...authorities.storage.commit import Committed, write
from ...authorities.storage.env import db
from ...core.codec import CodecError, Record, decode, seq_key, seq_of
from ...core.errors import CorruptRecord
from ..execution.journal_format import ANCHOR_DB
from .errors import RevisionConflict, UnknownSession
from .keys import log_prefix, rejected_count_key, rejected_prefix, seen_key
from .record import AcceptedEvent, PublishedEvent, Recoverable, RejectedEvent, SessionRecord, Sweep, check_id

__all__ = ["StoreReads"]

log = logging.getLogger("ouroactors.coordinator")
R = TypeVar("R", bound=Record)


class StoreReads:
    """Reads of session records and their logs (one per process per environment); see the module docstring."""

    def __init__(self, env: lmdb.Environment, *, fence: int | None = None) -> None:
        self.env = env
        self.fence = fence
        self.sessions = db(env, b"sessions")
        self.live = db(env, b"sessions_live")
        self.log = db(env, b"session_events")
        self.resumes = db(env, b"session_resume")
        self.timers = db(env, b"session_timers")
        self.quarantine = db(env, b"quarantine")
        self.journal_anchor = db(env, ANCHOR_DB)  # the journals' heads: create() refuses an id that has one
        self.quarantined: set[str] = set()
        self._pending_quarantine: dict[bytes, bytes] = {}

    # -- decoding (fail closed) -------------------------------------------------------------------

    def _decode(self, cls: type[R], raw: bytes | memoryview, where: bytes) -> R:
        try:
            return decode(bytes(raw), cls)
        except CodecError as exc:
            log.error("%r does not decode (%s): quarantined, left in place, reported", where, exc)
            self._pending_quarantine[where] = bytes(raw)
            self.quarantined.add(where.decode(errors="replace"))
            raise CorruptRecord(where.decode(errors="replace"), str(exc)) from None

    def _save_quarantine(self) -> None:
        pending, self._pending_quarantine = self._pending_quarantine, {}
        if not pending:
            return

        def copy(txn: lmdb.Transaction) -> None:
            for where, raw in pending.items():
                txn.put(where, raw, db=self.quarantine)

        outcome = write(self.env, copy, fence=self.fence)
        if not isinstance(outcome, Committed):
            log.error("could not copy %d corrupt session records to quarantine: %s", len(pending), outcome)

    def _read(self, txn: lmdb.Transaction, session_id: str) -> SessionRecord | None:
        key = check_id(session_id, "session_id").encode()
        raw = txn.get(key, db=self.sessions)
        return None if raw is None else self._decode(SessionRecord, raw, b"sessions/" + key)

    # -- reads -------------------------------------------------------------------------------------

    def get(self, session_id: str) -> SessionRecord | None:
        """The record as committed now (None: no such session); :class:`CorruptRecord` if it does not decode."""
        try:
            with self.env.begin() as txn:
                return self._read(txn, session_id)
        finally:
            self._save_quarantine()

    def records(self, session_ids: list[str]) -> dict[str, tuple[SessionRecord, bytes]]:
        """The records of ``session_ids`` with their stored bytes, in one read transaction (unknown ids left out)."""
        found: dict[str, tuple[SessionRecord, bytes]] = {}
        with self.env.begin(db=self.sessions) as txn:
            for sid in session_ids:
                key = check_id(sid, "session_id").encode()
                raw = txn.get(key)
                if raw is not None:
                    found[sid] = (self._decode(SessionRecord, raw, b"sessions/" + key), bytes(raw))
        self._save_quarantine()
        return found

    def list_recoverable(self, node: str) -> Sweep:
        """Every non-terminal session of ``node`` (the boot sweep's input), from the small projection."""
        prefix = f"{check_id(node, 'node')}/".encode()
        found: list[Recoverable] = []
        corrupt: list[str] = []
        with self.env.begin(db=self.live) as txn:
            cursor = txn.cursor()
            if cursor.set_range(prefix):
                for key, raw in cursor:
                    if not key.startswith(prefix):
                        break
                    try:
                        found.append(self._decode(Recoverable, raw, b"sessions_live/" + bytes(key)))
                    except CorruptRecord:
                        corrupt.append(bytes(key[len(prefix):]).decode(errors="replace"))
        self._save_quarantine()
        return Sweep(found, corrupt)

    def durable(self) -> None:
        """Make sure what this process has read is on disk before it is published (fdatasync, ~0.04 ms).

        A commit of *another* process is visible to readers as soon as LMDB has written its meta page into the page
        cache, a moment (0.1-0.3 ms here) before the committer's synced write of that page returns: a reader can see
        a transaction a power loss would still undo. Everything a publisher read before this call is durable after
        it: the flush waits for the committer's write of the meta page (or writes it itself). Commit before publish
        (DESIGN.md invariant 3) holds for what is read, not only for what is written."""
        self.env.sync(True)

    def events(self, session_id: str, after: int = 0, limit: int = 1000) -> list[PublishedEvent]:
        """Committed events with cursor > ``after`` (at most ``limit``), in cursor order: what subscribers read."""
        prefix = log_prefix(session_id)
        out: list[PublishedEvent] = []
        with self.env.begin(db=self.log) as txn:
            cursor = txn.cursor()
            if cursor.set_range(prefix + seq_key(after + 1)):
                for key, raw in cursor:
                    if not key.startswith(prefix) or len(out) >= limit:
                        break
                    out.append(self._decode(PublishedEvent, raw, b"session_events/" + bytes(key)))
        self._save_quarantine()
        return out

    def turn_events(self, session_id: str, turn: int, through: int) -> list[PublishedEvent]:
        """The committed events of ``turn`` with cursor <= ``through``, in cursor order: read back from ``through``
        to the first event of an earlier turn (turns only grow along the log)."""
        prefix = log_prefix(session_id)
        out: list[PublishedEvent] = []
        with self.env.begin(db=self.log) as txn:
            cursor = txn.cursor()
            found = cursor.set_range(prefix + seq_key(through + 1))
            found = cursor.prev() if found else cursor.last()
            while found and cursor.key().startswith(prefix):
                event = self._decode(PublishedEvent, cursor.value(), b"session_events/" + bytes(cursor.key()))
                if event.turn < turn:
                    break
                if event.turn == turn:
                    out.append(event)
                found = cursor.prev()
        self._save_quarantine()
        out.reverse()
        return out

    def rejection_count(self, session_id: str) -> int:
        """Every resume event refused for ``session_id`` so far (the log keeps the latest REJECTIONS_KEPT)."""
        with self.env.begin(db=self.resumes) as txn:
            raw = txn.get(rejected_count_key(session_id))
        return seq_of(bytes(raw)) if raw is not None else 0

    def rejections(self, session_id: str) -> list[RejectedEvent]:
        """The refused resume events of ``session_id`` still logged, oldest first (the latest REJECTIONS_KEPT)."""
        prefix = rejected_prefix(session_id)
        out: list[RejectedEvent] = []
        with self.env.begin(db=self.resumes) as txn:
            cursor = txn.cursor()
            if cursor.set_range(prefix):
                for key, raw in cursor:
                    if not key.startswith(prefix):
                        break
                    out.append(self._decode(RejectedEvent, raw, b"session_resume/" + bytes(key)))
        self._save_quarantine()
        return out

    def seen(self, session_id: str, event_id: str) -> bool:
        with self.env.begin(db=self.resumes) as txn:
            return txn.get(seen_key(session_id, event_id)) is not None

    def accepted(self, session_id: str, event_id: str) -> AcceptedEvent | None:
        """The resume event accepted under ``event_id`` (what resumed the session: see ``resumed_by``)."""
        key = seen_key(session_id, event_id)
        with self.env.begin(db=self.resumes) as txn:
            raw = txn.get(key)
            found = None if raw is None else self._decode(AcceptedEvent, raw, b"session_resume/" + key)
        self._save_quarantine()
        return found

    def reconcile(self, session_id: str, revision_before: int, *, coordinator: str | None = None
                  ) -> tuple[bool, SessionRecord]:
        """After ``commit_outcome_unknown``: read back; did the write made at ``revision_before`` land?

        ``(False, record)``: the record is still at ``revision_before`` — nothing was written.
        ``(True, record)``: it is at ``revision_before + 1`` and (when ``coordinator`` is given) still
        claimed by it — the write landed. Anything else raises :class:`RevisionConflict`: someone else
        wrote the session, and the caller must stop. Without a claim, ``revision_before + 1`` could be
        another writer's: compare the content (for a checkpoint, :func:`~.publication.reconciled`).
        """
        durable = self.get(session_id)
        if durable is None:
            raise UnknownSession(session_id)
        if durable.revision == revision_before:
            return False, durable
        if durable.revision == revision_before + 1 and (coordinator is None or durable.coordinator == coordinator):
            return True, durable
        raise RevisionConflict(session_id, revision_before + 1, durable.revision)

    def timers_due(self, now_ns: int, limit: int = 1000) -> list[tuple[int, str]]:
        """``(due_ns, session_id)`` of waiting sessions whose earliest due time is ≤ ``now_ns``, earliest first."""
        out: list[tuple[int, str]] = []
        with self.env.begin(db=self.timers) as txn:
            for key, _ in txn.cursor():
                due = seq_of(bytes(key[:8]))
                if due > now_ns or len(out) >= limit:
                    break
                out.append((due, bytes(key[8:]).decode()))
        return out
