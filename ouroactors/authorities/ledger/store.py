"""The ledger's durable state in LMDB, written only through the storage commit contract.

Layout (named databases of the node's environment):

* ``ledger``: effect id → canonical msgpack of :class:`~.domain.Entry`;
* ``ledger_seq``: 8-byte big-endian sequence → effect id (the order entries were recorded);
* ``meta`` ``ledger_next_seq``: the next sequence number, as data dirs written before it was derived from
  ``ledger_seq`` kept it (read, never written now: see :meth:`LedgerStore._peek_seq`);
* ``meta`` ``ledger_generation``: the generation of the ledger that last recovered the ledger
  (written in its recovery transaction), which direct writers (:mod:`.direct`) are fenced on;
* ``meta`` ``<authority>_generation``: what other authorities publish (grants does). A start whose
  authority snapshot names a published authority at another generation — or does not name a
  published authority at all — is refused with :class:`~ouroactors.core.errors.StaleGeneration`:
  no effect runs on a decision of a gone generation (the snapshot's storage and ledger entries are
  covered by the writer's own fence);
* ``ledger_writers``: writer id → :class:`~.watch.WriterRecord`, the processes writing directly that
  asked to be watched (:mod:`.watch`);
* ``ledger_runs``: effect id → writer id, the watched writers' starts that may be unsettled: put with the start, in
  its transaction. A settlement by another writer (the ledger actor, an unwatched writer) deletes the key in its own
  transaction; a watched writer's settlement of its own start leaves it to the writer's next start, which deletes
  it beside the key it puts (the same page: the settlement's commit touches one B-tree less). So every unsettled
  start of a watched writer is indexed, and a key may also name an effect that writer settled since — which a
  dead writer's sweep (:meth:`LedgerStore.forget_writers`) finds settled and leaves as it is.

A batch of operations is decided and written in **one** transaction (group commit): each
operation's decision reads the state the earlier ones left, a domain refusal (conflict, unknown
id, …) affects only its own operation, and the batch's commit outcome — committed, rejected or
unknown — is every written operation's outcome. Every transaction is fenced on the storage
generation this ledger was started against, or — a direct writer's — on the stamp it was bound to
(storage and ledger generations, read inside the transaction: a gone one raises
:class:`~ouroactors.core.errors.StaleGeneration` and nothing is written).

An entry that does not decode is copied to ``quarantine`` and reading it raises
:class:`~ouroactors.core.errors.CorruptRecord`: it is reported, never treated as absent (that
would let the same effect id be recorded — and the effect run — again).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import lmdb

from ...core import clock
from ...core.codec import CodecError, check_size, decode, encode, seq_key, str_key
from ...core.errors import CorruptRecord, StaleGeneration
from ..storage.commit import Committed, Outcome, write
from ..storage.env import GENERATION_KEY as STORAGE_GENERATION_KEY
from ..storage.env import db, decode_u64, encode_u64, generation_key, meta_db
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
from .watch import WatchedWriters
from .watch import WriterRecord as WriterRecord  # re-exported: direct writers register with it

log = logging.getLogger("ouroactors.ledger")
NEXT_SEQ_KEY = b"ledger_next_seq"
GENERATION_KEY = b"ledger_generation"
WRITTEN_CACHE = 256  # entries whose bytes a store remembers (see LedgerStore._written)
SETTLED_RUNS = 64  # run keys a watched writer's settlements leave to its next start, at most (then deleted at once)


@dataclass(frozen=True)
class Stamp:
    """The authority generations a direct writer was bound to (checked inside each transaction)."""

    storage: int
    ledger: int


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
    operator: bool = False  # a verified operator's settlement (see messages._to_op)
    reconciler: bool = False  # the ledger's own reconciler run (``by`` names the kind's reconciler)


Op = Start | Settle
OpResult = Created | Existing | LedgerError | StaleGeneration
OWN_FENCE = frozenset({"storage", "ledger"})  # a snapshot's entries the writer's own fence already checks
_PUBLISHED_SUFFIX = b"_generation"  # see storage.env.generation_key


class LedgerStore(WatchedWriters):
    def __init__(self, env: lmdb.Environment, *, node: str, kinds: frozenset[str], fence: int | None) -> None:
        self.env = env
        self.node = node
        self.kinds = kinds
        self.fence = fence
        self.entries = db(env, b"ledger")
        self.by_seq = db(env, b"ledger_seq")
        self.writers = db(env, b"ledger_writers")
        self.runs = db(env, b"ledger_runs")
        self.quarantine = db(env, b"quarantine")
        self.meta = meta_db(env)
        self.quarantined: set[bytes] = set()
        # The entries this store wrote last, by key: (their bytes, the entry). Reading an entry whose stored bytes
        # are exactly those gives the entry without decoding it again (a start's settlement reads what the start
        # wrote); any other bytes — another writer's, a recovery's — are decoded as always.
        self._written: dict[bytes, tuple[bytes, Entry]] = {}
        # Run keys of starts this (watched) writer settled, deleted by its next start (see ``ledger_runs`` above).
        self._settled_runs: list[bytes] = []

    # -- writes -------------------------------------------------------------------------------------

    def apply(self, ops: list[Op], *, stamp: Stamp | None = None, writer: bytes | None = None,
              ride: Callable[[lmdb.Transaction], None] | None = None,
              register: WriterRecord | None = None) -> Outcome[list[OpResult]]:
        """Decide and write ``ops`` in one fenced transaction.

        The ledger itself is fenced on its storage generation; a direct writer passes its ``stamp``
        instead (a gone generation raises :class:`StaleGeneration`, nothing written) and, when
        watched, its ``writer`` id, which indexes its unsettled starts in ``ledger_runs``, and until one of its
        transactions has committed, its ``register`` record (see :meth:`_put_writer`). ``ride`` puts
        other records into the same transaction after the ledger's own (a session's journal): one commit for both.
        """
        def run(txn: lmdb.Transaction) -> list[OpResult]:
            if stamp is not None:
                self._check_stamp(txn, stamp)
            if register is not None and writer is not None:
                self._put_writer(txn, writer, register)
            results = [self._apply_one(txn, op, writer) for op in ops]
            if ride is not None:
                ride(txn)
            return results

        settled_runs = self._settled_runs
        self._settled_runs = list(settled_runs)  # this transaction's view; kept only if it commits
        committed = False
        try:
            outcome = write(self.env, run, fence=self.fence if stamp is None else None)
            committed = isinstance(outcome, Committed)
            return outcome
        finally:
            if not committed:
                self._settled_runs = settled_runs

    def _check_stamp(self, txn: lmdb.Transaction, stamp: Stamp) -> None:
        for authority, key, expected in (("storage", STORAGE_GENERATION_KEY, stamp.storage),
                                         ("ledger", GENERATION_KEY, stamp.ledger)):
            raw = txn.get(key, db=self.meta)
            current = decode_u64(raw) if raw is not None else None
            if current != expected:
                raise StaleGeneration(authority, current, expected)

    def _check_snapshot(self, txn: lmdb.Transaction, authority: dict[str, int]) -> None:
        """A new effect must name every published authority at its current generation.

        An authority missing from the snapshot is refused like a stale one: otherwise leaving
        ``grants`` out would admit an effect no live grants generation decided (fencing is not
        opt-in).
        """
        for name, stamped in authority.items():
            if name in OWN_FENCE:
                continue
            raw = txn.get(generation_key(name), db=self.meta)
            if raw is not None and decode_u64(raw) != stamped:
                raise StaleGeneration(name, decode_u64(raw), stamped)
        cursor = txn.cursor(db=self.meta)
        for raw_key in cursor.iternext(keys=True, values=False):
            key = bytes(raw_key)
            if not key.endswith(_PUBLISHED_SUFFIX):
                continue
            name = key[: -len(_PUBLISHED_SUFFIX)].decode("utf-8", "replace")
            if name not in OWN_FENCE and name not in authority:
                raise StaleGeneration(name, decode_u64(bytes(cursor.value())), None)

    def publish_generation(self, authority: str, generation: int) -> Outcome[None]:
        """An authority's generation, for starts admitted under it to be checked against (fenced)."""
        def put(txn: lmdb.Transaction) -> None:
            txn.put(generation_key(authority), encode_u64(generation), db=self.meta)

        return write(self.env, put, fence=self.fence)

    def current_stamp(self) -> Stamp | None:
        """The generations in force now (None until a ledger has recovered this environment)."""
        with self.env.begin() as txn:
            storage, ledger = (txn.get(key, db=self.meta) for key in (STORAGE_GENERATION_KEY, GENERATION_KEY))
            if storage is None or ledger is None:
                return None
            return Stamp(decode_u64(storage), decode_u64(ledger))

    def _apply_one(self, txn: lmdb.Transaction, op: Op, writer: bytes | None = None) -> OpResult:
        now = clock.time_ns()
        try:
            if isinstance(op, Start):
                current = self._read(txn, op.request.effect_id)
                if current is None and op.status is Status.STARTED:  # a new effect: admitted by a live decision?
                    self._check_snapshot(txn, op.request.authority)
                decision: Created | Existing = decide_start(
                    current, op.request, seq=self._peek_seq(txn), now_ns=now, node=self.node, kinds=self.kinds,
                    status=op.status, reason=op.reason,
                )
            else:
                current = self._read(txn, op.effect_id)
                decision = decide_settle(current, op.effect_id, op.status, now_ns=now, reason=op.reason,
                                         evidence=op.evidence, by=op.by, operator=op.operator,
                                         reconciler=op.reconciler)
            if isinstance(decision, Created):
                self._put(txn, decision.entry, new=isinstance(op, Start))
                key = str_key(decision.entry.effect_id)
                if decision.entry.status is Status.STARTED:
                    if writer is not None:
                        self._index_run(txn, key, writer)
                elif (writer is not None and isinstance(op, Settle) and len(self._settled_runs) < SETTLED_RUNS
                      and txn.get(key, db=self.runs) == writer):
                    self._settled_runs.append(key)  # its own start: the key goes with its next start (ledger_runs)
                else:
                    txn.delete(key, db=self.runs)  # settled: no longer any watched writer's concern
            return decision
        except StaleGeneration as exc:  # this op only: decided under a generation that is gone
            return exc
        except (LedgerError, CorruptRecord) as exc:
            return exc if isinstance(exc, LedgerError) else LedgerError(str(exc))
        except CodecError as exc:  # too large, unencodable evidence, an id too long for a key: this op only
            return LedgerError(str(exc))

    def _index_run(self, txn: lmdb.Transaction, key: bytes, writer: bytes) -> None:
        """A watched writer's start: its run key, and the keys of the starts it settled since, gone (after the put:
        a tree emptied on the way would give its page back and take a new one)."""
        txn.put(key, writer, db=self.runs)
        for done in self._settled_runs:
            txn.delete(done, db=self.runs)
        self._settled_runs.clear()

    def _put(self, txn: lmdb.Transaction, entry: Entry, *, new: bool) -> None:
        data = encode(entry)
        check_size(data, f"ledger entry {entry.effect_id!r}")
        key = str_key(entry.effect_id)
        txn.put(key, data, db=self.entries)
        if new:
            txn.put(seq_key(entry.seq), key, db=self.by_seq)
        written = self._written
        written.pop(key, None)
        written[key] = (data, entry)  # newest last; a transaction that does not commit leaves bytes nobody reads
        if len(written) > WRITTEN_CACHE:
            del written[next(iter(written))]

    def _peek_seq(self, txn: lmdb.Transaction) -> int:
        """One past the last sequence number in ``ledger_seq`` (never pruned: the order entries were recorded), or
        past the next-seq key older data dirs kept in ``meta``, whichever is further. Not writing that key saves
        each start a page of its commit (``meta``'s leaf), about 25-40 us of the sync here."""
        cursor = txn.cursor(db=self.by_seq)
        last = int.from_bytes(cursor.key(), "big") if cursor.last() else 0
        raw = txn.get(NEXT_SEQ_KEY, db=self.meta)
        return max(last + 1, decode_u64(raw) if raw is not None else 1)

    def recover(self, generation: int | None = None) -> Outcome[int]:
        """Every entry still ``started`` becomes ``ambiguous`` — never failed. Returns how many.

        In the same transaction the ledger's ``generation`` is recorded and the watched writers are
        forgotten: a direct writer's start either committed before (and is ambiguous now) or is
        refused after (its stamp is gone). There is no third case.
        """

        def mark(txn: lmdb.Transaction) -> int:
            now = clock.time_ns()
            count = 0
            if generation is not None:
                txn.put(GENERATION_KEY, encode_u64(generation), db=self.meta)
            txn.drop(self.runs, delete=False)
            txn.drop(self.writers, delete=False)
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
                txn.delete(str_key(effect_id), db=self.runs)
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
        written = self._written.get(key)
        if written is not None and written[0] == raw:  # the very bytes this store wrote: the entry they encode
            return written[1]
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
