"""The per-session journal: append-only, hash-chained evidence of what a session did, in the node's LMDB.

**Why LMDB and not a file per session** (``benchmarks/bench_journal.py``): a synced append costs about the same
either way (one commit vs one ``fdatasync``), but only LMDB lets the journal's records **ride in the ledger's own
write transactions**: the records a tool call produces (``tool_call`` with ``record_started``, ``tool_result`` with
``record_settled``) then cost no synced commit of their own, which is what keeps a tool call at two synced commits.
A file would add a third and a fourth flush per call, and could not be atomic with the ledger.

Layout: the named databases, their keys and a record's encoding (inline, or its large fields spilled to blobs)
are :mod:`.journal_format`'s.

**Two ways to write.** :meth:`Journal.stage` buffers records; :meth:`Journal.put_staged` writes everything staged
inside a write transaction *someone else* is about to commit (the ledger's) — every write planned before the first
put, so nothing of ours can fail half-way except LMDB itself (which then fails the whole transaction) — and
:meth:`Journal.settle_staged` is told that transaction's outcome. :meth:`Journal.flush`
commits what is staged in a transaction of its own (the commit contract of :mod:`~...storage.commit`, with its
fault points). Each write reads the session's head inside the transaction and chains from it, so the durable head,
not memory, decides ``seq`` and ``prev``.

**A failed append never raises into the effect path** (the ledger is the gate). The records are remembered as lost
(kinds, count, times, reason), also in a durable marker the session's next writer reads (:mod:`.journal_loss`), and
the next write that commits first writes a ``gap`` record naming them. A commit whose outcome is unknown is held in
doubt: the next write finds out from the durable head whether it landed.

**Size budget.** When a turn starts and the session's bytes exceed the budget, the oldest whole turns are dropped
(in that transaction) and a ``truncated`` record takes the place of the last dropped one: it chains from the seed
and carries ``resume_prev``, the hash the next surviving record chains from, so survivors are not rewritten.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import lmdb

from ...authorities.storage import commit
from ...authorities.storage.env import db
from ...core import faults
from ...core.codec import CodecError, decode
from ...core.errors import OuroactorsError
from . import blobs, chain
from .chain import SEED, JournalHead
from .chain import HeadValues as _Head
from .journal_format import (  # the journal's layout: its callers import it from here
    ANCHOR_DB,
    JOURNAL_DB,
    KINDS,
    Op,
    _encode,
    _Staged,
    head_key,
    record_key,
)
from .journal_format import INLINE_LIMIT as INLINE_LIMIT  # re-exported
from .journal_format import SPILL_FIELD_BYTES as SPILL_FIELD_BYTES  # re-exported
from .journal_loss import Lost as _Lost
from .journal_loss import absorb_marker, encode_marker, gap_fields, lost_of, marker_key

DEFAULT_BUDGET_BYTES = 64 << 20
PUT = faults.register_point("journal.put", "a journal's records are about to be put in a write transaction")
_SESSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}\Z")


class JournalError(OuroactorsError):
    """A journal request that cannot be honoured as asked (bad session id, unknown kind, corrupt record)."""


def check_session(session: str) -> bytes:
    if not isinstance(session, str) or not _SESSION.match(session):
        raise JournalError(f"session id {session!r} is not 1-200 characters of [A-Za-z0-9._:@-] "
                           "starting with a letter or digit")
    return session.encode()


@dataclass
class Batch:
    """What one :meth:`Journal.put_staged` wrote (for :meth:`Journal.settle_staged`)."""

    items: list[tuple[str, int]]  # (kind, at) of the records staged by callers
    lost: _Lost | None  # the gap this batch wrote, if any
    head_seq: int
    head_hash: bytes
    seqs: range


@dataclass(frozen=True)
class AppendResult:
    committed: bool
    reason: str = ""
    head_seq: int | None = None


class Journal:
    """One session's journal writer. Thread-safe: stage from the loop, put from whoever holds the transaction."""

    def __init__(self, env: lmdb.Environment, session: str, *, budget_bytes: int = DEFAULT_BUDGET_BYTES) -> None:
        self.env = env
        self.session = session
        self.sid = check_session(session)
        self.budget_bytes = budget_bytes
        self._records = db(env, JOURNAL_DB)
        self._anchor = db(env, ANCHOR_DB)
        self._blobs = db(env, blobs.BLOBS_DB)
        self._lock = threading.Lock()
        self._staged: list[tuple[_Staged, int]] = []
        self._lost = _Lost()
        self._doubt: Batch | None = None
        self._token = os.urandom(8)  # names this writer's gap marker (:mod:`.journal_loss`)
        self._absorbed: set[bytes] = set()  # other writers' markers whose account this writer's memory holds
        self.committed_head: tuple[int, bytes] | None = None  # the last head this writer saw committed
        self._head_written: tuple[bytes, _Head] | None = None  # the head bytes it put last, and their head
        self.gaps_written = 0
        self.degraded = False  # a write failed since the last successful one
        # What the last put_staged wrote, until the next one: riders put after it in the same transaction (a tail
        # snapshot, :mod:`.snapshots`) bind to the record it ended with. None when it wrote nothing or failed.
        self.last_put: Batch | None = None

    # -- staging ------------------------------------------------------------------------------------------

    def stage(self, kind: str, fields: dict[str, Any], *, turn: int | None = None, at: int) -> None:
        """Buffer a record; it is written by the next :meth:`put_staged` or :meth:`flush`. Never raises on data:
        a record that cannot be encoded is remembered as lost (and later named by a gap record)."""
        if kind not in KINDS or kind in ("gap", "truncated"):
            raise JournalError(f"unknown or reserved journal record kind {kind!r}")
        try:
            staged = _encode(kind, fields, turn, at)
        except CodecError as exc:
            with self._lock:
                self._lost.add(kind, at, f"unencodable record: {exc}")
                self.degraded = True
            return
        with self._lock:
            self._staged.append((staged, at))

    @property
    def pending(self) -> int:
        return len(self._staged)

    # -- writing inside someone's transaction --------------------------------------------------------------

    def put_staged(self, txn: lmdb.Transaction, *, isolate: bool = False) -> Batch | None:
        """Write everything staged (a gap record first, if records were lost) inside ``txn``; never raises.

        Everything is read and computed first (the head, the sealed records, a truncation's deletions); only then
        are the puts made, so the only failures left mid-way are LMDB's own (map full), which poison ``txn`` as a
        whole: nothing half-written can commit. ``isolate=True`` puts them in a nested transaction instead (a
        failure then leaves ``txn`` unharmed), at about 3 µs more per transaction (measured: a synced commit's cost is
        its pages' fsync, about 0.4 ms here for a step's records, with or without nesting). Either way a failure
        leaves the records remembered as lost. Call :meth:`settle_staged` with the outer transaction's outcome.
        """
        self.last_put = None
        with self._lock:
            staged, self._staged = self._staged, []
            lost, self._lost = self._lost, _Lost()
            doubt, self._doubt = self._doubt, None
        try:
            planned = self._plan(txn, staged, lost, doubt)
        except Exception as exc:
            self._restore(staged, lost, doubt, f"journal write failed: {type(exc).__name__}: {exc}")
            self._mark_in(txn)
            return None
        if planned is None:  # nothing to write: a commit in doubt had landed (its loss would be planned otherwise)
            with self._lock:
                if doubt is not None and not self._lost.count and self._doubt is None:
                    self.degraded = False
            return None
        batch, ops = planned
        try:
            target = self.env.begin(write=True, parent=txn) if isolate else txn
        except Exception as exc:
            self._restore(staged, lost, doubt, f"cannot begin a nested transaction: {exc}")
            self._mark_in(txn)
            return None
        try:
            faults.point(PUT)
            blobs_db = self._blobs
            for database, key, value in ops:
                if value is None:
                    target.delete(key, db=database)
                elif database is blobs_db:  # content-addressed: a blob already there is these bytes (checked);
                    blobs.put_at(target, database, key, value)  # rewriting it would dirty its pages (every open's)
                else:
                    target.put(key, value, db=database)
            if isolate:
                target.commit()
            self.last_put = batch
            return batch
        except Exception as exc:
            if isolate:
                try:
                    target.abort()
                except Exception:
                    pass
            self._restore(staged, lost, doubt, f"journal write failed: {type(exc).__name__}: {exc}")
            self._mark_in(txn)
            return None

    def _restore(self, staged: list[tuple[_Staged, int]], lost: _Lost, doubt: Batch | None, reason: str) -> None:
        with self._lock:
            if doubt is not None and self._doubt is None:
                self._doubt = doubt
            lost.merge(self._lost)
            for item, at in staged:
                lost.add(item.kind, at, reason)
            lost.reason = reason
            self._lost = lost
            self.degraded = True

    def settle_staged(self, batch: Batch | None, outcome: commit.Committed[Any] | commit.Rejected | commit.Unknown
                      ) -> None:
        """The outer transaction's outcome: committed (done), rejected (lost: a gap later), unknown (in doubt)."""
        if batch is None:
            return
        with self._lock:
            if isinstance(outcome, commit.Committed):
                if self.committed_head is None or batch.head_seq > self.committed_head[0]:
                    self.committed_head = (batch.head_seq, batch.head_hash)
                if batch.lost is not None:
                    self.gaps_written += 1
                if not self._lost.count:
                    self.degraded = False
                return
            self.degraded = True
            if isinstance(outcome, commit.Unknown):
                self._doubt = batch
                return
            self._lost.merge(lost_of(batch.items, batch.lost, outcome.reason))
        self._mark_alone()

    # -- the durable gap marker (:mod:`.journal_loss`) -----------------------------------------------------------

    def _put_marker(self, txn: lmdb.Transaction) -> None:
        """Put this writer's whole account of its losses in ``txn`` as the session's marker (another writer's marker
        there is merged into it first, and into this writer's memory: the one replaces the other)."""
        key = marker_key(self.sid)
        with self._lock:
            absorb_marker(self._lost, txn.get(key, db=self._anchor), self._token, self._absorbed)
            if not self._lost.count:
                return
            value = encode_marker(self._lost, self._token)
        txn.put(key, value, db=self._anchor)

    def _mark_in(self, txn: lmdb.Transaction) -> None:
        """After our puts failed inside ``txn``, which may still commit (a ledger's): leave the marker in it, in a
        nested transaction so a failure here spoils nothing. Best effort: a failure leaves the account in memory."""
        try:
            nested = self.env.begin(write=True, parent=txn)
        except Exception:
            return
        try:
            self._put_marker(nested)
            nested.commit()
        except Exception:
            try:
                nested.abort()
            except Exception:
                pass

    def _mark_alone(self) -> None:
        """After a transaction carrying our records was refused: the marker in a commit of its own. Best effort."""
        try:
            commit.write(self.env, self._put_marker)
        except Exception:  # a dead environment: the process is going away, the account with it
            pass

    def anchor_evidence(self) -> dict[str, Any] | None:
        """``{"journal": {"seq", "hash"}}`` of the last committed head, for the ledger's settled evidence: a hash
        kept outside the journal's databases, which :func:`.reading.ledger_anchors` gives back to ``verify``."""
        with self._lock:
            head = self.committed_head
        return None if head is None else {"journal": {"seq": head[0], "hash": head[1].hex()}}

    @property
    def in_doubt(self) -> bool:
        """A commit of this writer's is of unknown outcome (the next :meth:`flush` reads the head and decides)."""
        return self._doubt is not None

    def flush(self, riders: Sequence[Any] = ()) -> AppendResult:
        """Commit what is staged in a transaction of its own. Never raises.

        ``riders`` (ledger riders, e.g. the runtime's carried output) put theirs in the same transaction, each in a
        nested one, and are told its outcome."""
        holder: list[Batch | None] = [None]
        ridden: list[tuple[Any, Any]] = []

        def put(txn: lmdb.Transaction) -> None:
            holder[0] = self.put_staged(txn)
            ridden.clear()
            ridden.extend((rider, rider.put_staged(txn, isolate=True)) for rider in riders)

        with self._lock:
            if not self._staged and not self._lost.count and self._doubt is None:
                return AppendResult(True)
        try:
            outcome: commit.Committed[None] | commit.Rejected | commit.Unknown = commit.write(self.env, put)
        except Exception as exc:  # a dead environment or a bug below us: the effect path must not hear it
            outcome = commit.Unknown(f"{type(exc).__name__}: {exc}")
        for rider, staged in ridden:
            rider.settle_staged(staged, outcome)
        batch = holder[0]
        if batch is None:
            if isinstance(outcome, commit.Committed):  # a doubt resolved, or our puts failed (then a gap waits)
                with self._lock:
                    lost = self._lost.count
                return AppendResult(not lost, f"{lost} record(s) not written (a gap record will name them)"
                                    if lost else "")
            with self._lock:  # the transaction failed before our puts: what was staged is lost
                staged, self._staged = self._staged, []
            self._restore(staged, _Lost(), None, getattr(outcome, "reason", ""))
            if not isinstance(outcome, commit.Unknown):
                self._mark_alone()
            return AppendResult(False, getattr(outcome, "reason", ""))
        self.settle_staged(batch, outcome)
        if isinstance(outcome, commit.Committed):
            return AppendResult(True, head_seq=batch.head_seq if batch else None)
        return AppendResult(False, getattr(outcome, "reason", ""))

    def append(self, kind: str, fields: dict[str, Any], *, turn: int | None = None, at: int) -> AppendResult:
        self.stage(kind, fields, turn=turn, at=at)
        return self.flush()

    # -- the transaction's work ---------------------------------------------------------------------------

    def _plan(self, txn: lmdb.Transaction, staged: list[tuple[_Staged, int]], lost: _Lost,
              doubt: Batch | None) -> tuple[Batch, list[Op]] | None:
        """Read the head and compute every write of this batch (nothing is written here)."""
        head = self._read_head(txn)
        marked = absorb_marker(lost, txn.get(marker_key(self.sid), db=self._anchor), self._token, self._absorbed)
        if doubt is not None:
            landed = head is not None and head.head_seq >= doubt.head_seq and _witness(
                txn, self._anchor, self.sid, doubt.head_seq) == doubt.head_hash
            if not landed:
                lost.merge(lost_of(doubt.items, doubt.lost, "a commit whose outcome was unknown did not land"))
        if not staged and not lost.count:
            return None
        if head is None:
            head = _Head(first_seq=0, head_seq=-1, head_hash=SEED, bytes=0, records=0)
        seq, prev, total, count = head.head_seq + 1, head.head_hash, head.bytes, head.records
        if head.head_seq < head.first_seq:  # empty: the first record chains from the seed
            prev = SEED
        first_new = seq
        items: list[_Staged] = []
        if lost.count:
            items.append(_encode("gap", gap_fields(lost, seq), None, lost.last_at or 0))
        items.extend(item for item, _ in staged)
        ops: list[Op] = []
        starts_turn = False
        for item in items:
            digest, value = chain.seal(prev, seq, item.body)
            key = record_key(self.sid, seq)
            ops.append((self._records, key, value))
            ops.append((self._anchor, key, digest))
            for address, data in item.spilled:
                ops.append((self._blobs, bytes.fromhex(address), data))
            total += item.weight + chain.HEADER
            count += 1
            prev = digest
            starts_turn = starts_turn or item.kind == "turn_started"
            seq += 1
        # built from this transaction's own counts (ints and the chain's bytes): no validation to redo
        head = _Head(head.first_seq, seq - 1, prev, total, count)
        if starts_turn and total > self.budget_bytes:
            from .budget import truncate  # the rare path: its module imports this one

            cut = truncate(txn, self.env, self.sid, JournalHead.model_construct(**head._asdict()), self.budget_bytes,
                           ops)
            head = _Head(cut.first_seq, cut.head_seq, cut.head_hash, cut.bytes, cut.records)
        encoded = head.packed()
        ops.append((self._anchor, head_key(self.sid), encoded))
        if marked:  # the loss it kept is named by this batch's gap record (or was, by an earlier one of ours)
            ops.append((self._anchor, marker_key(self.sid), None))
        self._head_written = (encoded, head)
        batch = Batch([(item.kind, at) for item, at in staged], lost if lost.count else None, head.head_seq,
                      head.head_hash, range(first_new, seq))
        return batch, ops

    def _read_head(self, txn: lmdb.Transaction) -> _Head | None:
        """The session's durable head; the bytes this writer put last are not decoded again (any other bytes — a
        transaction of ours that did not commit, another writer's — are)."""
        raw = txn.get(head_key(self.sid), db=self._anchor)
        if raw is None:
            return None
        written = self._head_written
        if written is not None and written[0] == raw:
            return written[1]
        h = _decode_head(raw, self.sid)
        return _Head(h.first_seq, h.head_seq, h.head_hash, h.bytes, h.records)


def _decode_head(raw: bytes | memoryview, sid: bytes) -> JournalHead:
    try:
        return decode(bytes(raw), JournalHead)
    except CodecError as exc:
        raise JournalError(f"journal head of {sid.decode()!r} does not decode: {exc}") from exc


def _witness(txn: lmdb.Transaction, anchor: Any, sid: bytes, seq: int) -> bytes | None:
    raw = txn.get(record_key(sid, seq), db=anchor)
    return bytes(raw) if raw is not None else None
