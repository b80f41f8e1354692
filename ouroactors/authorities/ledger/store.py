"""The ledger's durable state in LMDB, written only through the storage commit contract.

Layout (named databases of the node's environment):

* ``ledger``: effect id → canonical msgpack of :class:`~.domain.Entry`;
* ``ledger_seq``: 8-byte big-endian sequence → effect id (the order entries were recorded);
* ``meta`` ``ledger_next_seq``: the next sequence number.

A batch of operations is decided and written in **one** transaction (group commit): each
operation's decision reads the state the earlier ones left, a domain refusal (conflict, unknown
id, …) affects only its own operation, and the batch's commit outcome — committed, rejected or
unknown — is every written operation's outcome. Every transaction is fenced on the storage
generation this ledger was started against.

An entry that does not decode is copied to ``quarantine`` and reading it raises
:class:`~ouroactors.core.errors.CorruptRecord`: it is reported, never treated as absent (that
would let the same effect id be recorded — and the effect run — again).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import lmdb

from ...core import clock
from ...core.codec import CodecError, check_size, decode, encode, seq_key, str_key
from ...core.errors import CorruptRecord
from ..storage.commit import Committed, Outcome, write
from ..storage.env import db, decode_u64, encode_u64, meta_db
from .domain import (
    Created,
    Entry,
    Existing,
    LedgerError,
    StartRequest,
    Status,
    decide_ambiguous,
    decide_settle,
    decide_start,
)

log = logging.getLogger("ouroactors.ledger")
NEXT_SEQ_KEY = b"ledger_next_seq"


@dataclass(frozen=True)
class Start:
    request: StartRequest
    status: Status = Status.STARTED  # DENIED for record_denied
    reason: str | None = None


@dataclass(frozen=True)
class Settle:
    effect_id: str
    status: str
    reason: str | None = None
    evidence: dict[str, Any] | None = None
    by: str = "runner"
    operator: bool = False


Op = Start | Settle
OpResult = Created | Existing | LedgerError


class LedgerStore:
    def __init__(self, env: lmdb.Environment, *, node: str, kinds: frozenset[str], fence: int | None) -> None:
        self.env = env
        self.node = node
        self.kinds = kinds
        self.fence = fence
        self.entries = db(env, b"ledger")
        self.by_seq = db(env, b"ledger_seq")
        self.quarantine = db(env, b"quarantine")
        self.meta = meta_db(env)
        self.quarantined: set[bytes] = set()

    # -- writes -------------------------------------------------------------------------------------

    def apply(self, ops: list[Op]) -> Outcome[list[OpResult]]:
        """Decide and write ``ops`` in one fenced transaction."""
        return write(self.env, lambda txn: [self._apply_one(txn, op) for op in ops], fence=self.fence)

    def _apply_one(self, txn: lmdb.Transaction, op: Op) -> OpResult:
        now = clock.time_ns()
        try:
            if isinstance(op, Start):
                current = self._read(txn, op.request.effect_id)
                decision: Created | Existing = decide_start(
                    current, op.request, seq=self._peek_seq(txn), now_ns=now, node=self.node, kinds=self.kinds,
                    status=op.status, reason=op.reason,
                )
            else:
                current = self._read(txn, op.effect_id)
                decision = decide_settle(current, op.effect_id, op.status, now_ns=now, reason=op.reason,
                                         evidence=op.evidence, by=op.by, operator=op.operator)
            if isinstance(decision, Created):
                self._put(txn, decision.entry, new=isinstance(op, Start))
            return decision
        except (LedgerError, CorruptRecord) as exc:
            return exc if isinstance(exc, LedgerError) else LedgerError(str(exc))
        except CodecError as exc:  # too large, unencodable evidence, an id too long for a key: this op only
            return LedgerError(str(exc))

    def _put(self, txn: lmdb.Transaction, entry: Entry, *, new: bool) -> None:
        data = encode(entry)
        check_size(data, f"ledger entry {entry.effect_id!r}")
        key = str_key(entry.effect_id)
        txn.put(key, data, db=self.entries)
        if new:
            txn.put(seq_key(entry.seq), key, db=self.by_seq)
            txn.put(NEXT_SEQ_KEY, encode_u64(entry.seq + 1), db=self.meta)

    def _peek_seq(self, txn: lmdb.Transaction) -> int:
        raw = txn.get(NEXT_SEQ_KEY, db=self.meta)
        return decode_u64(raw) if raw is not None else 1

    def recover(self) -> Outcome[int]:
        """Every entry still ``started`` becomes ``ambiguous`` — never failed. Returns how many."""

        def mark(txn: lmdb.Transaction) -> int:
            now = clock.time_ns()
            count = 0
            for key, raw in list(txn.cursor(db=self.entries)):
                entry = self._decode(txn, key, raw)
                if entry is None:
                    continue
                changed = decide_ambiguous(entry, now_ns=now)
                if changed is not None:
                    txn.put(key, encode(changed), db=self.entries)
                    count += 1
            return count

        return write(self.env, mark, fence=self.fence)

    def mark_ambiguous(self, effect_ids: list[str], reason: str) -> Outcome[int]:
        """Entries whose runner died before settling become ambiguous at once (never failed)."""

        def mark(txn: lmdb.Transaction) -> int:
            now = clock.time_ns()
            count = 0
            for effect_id in effect_ids:
                current = self._read(txn, effect_id)
                changed = decide_ambiguous(current, now_ns=now, reason=reason) if current is not None else None
                if changed is not None:
                    txn.put(str_key(effect_id), encode(changed), db=self.entries)
                    count += 1
            return count

        return write(self.env, mark, fence=self.fence)

    # -- reads --------------------------------------------------------------------------------------

    def get(self, effect_id: str) -> Entry | None:
        with self.env.begin() as txn:
            return self._read(txn, effect_id)

    def list(self, *, status: str | None = None, session: str | None = None, kind: str | None = None,
             since_seq: int = 0, limit: int = 100) -> list[Entry]:
        out: list[Entry] = []
        with self.env.begin() as txn:
            for entry in self._scan(txn, since_seq):
                if len(out) >= limit:
                    break
                if status is not None and entry.status.value != status:
                    continue
                if session is not None and entry.session_id != session:
                    continue
                if kind is not None and entry.kind != kind:
                    continue
                out.append(entry)
        return out

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        with self.env.begin() as txn:
            for entry in self._scan(txn, 0):
                counts[entry.status.value] = counts.get(entry.status.value, 0) + 1
        return counts

    def _scan(self, txn: lmdb.Transaction, since_seq: int) -> Iterator[Entry]:
        cursor = txn.cursor(db=self.by_seq)
        if not cursor.set_range(seq_key(max(since_seq, 0))):
            return
        for _seq, key in cursor:
            raw = txn.get(key, db=self.entries)
            if raw is None:
                continue
            entry = self._decode(txn, key, raw)
            if entry is not None:
                yield entry

    def _read(self, txn: lmdb.Transaction, effect_id: str) -> Entry | None:
        key = str_key(effect_id)
        raw = txn.get(key, db=self.entries)
        if raw is None:
            return None
        entry = self._decode(txn, key, raw)
        if entry is None:
            raise CorruptRecord(f"ledger/{effect_id}", "undecodable entry")
        return entry

    def _decode(self, txn: lmdb.Transaction, key: bytes | memoryview, raw: bytes | memoryview) -> Entry | None:
        try:
            return decode(bytes(raw), Entry)
        except CodecError as exc:
            log.error("ledger entry %r does not decode (%s): quarantined, left in place, reported", key, exc)
            self.quarantined.add(bytes(key))
            return None

    def save_quarantine(self) -> Outcome[int]:
        """Copy undecodable entries seen so far into ``quarantine`` (the originals stay, failing closed)."""
        pending = sorted(self.quarantined)

        def copy(txn: lmdb.Transaction) -> int:
            for key in pending:
                raw = txn.get(key, db=self.entries)
                if raw is not None:
                    txn.put(b"ledger/" + key, bytes(raw), db=self.quarantine)
            return len(pending)

        outcome = write(self.env, copy, fence=self.fence)
        if isinstance(outcome, Committed):
            self.quarantined.difference_update(pending)
        return outcome
