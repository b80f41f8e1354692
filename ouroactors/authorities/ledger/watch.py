"""Watched direct writers: the processes that write the ledger themselves and asked to be watched (:mod:`.direct`).

``ledger_writers`` holds one :class:`WriterRecord` per such process (pid and kernel start time) and ``ledger_runs``
its starts that may be unsettled (see :mod:`.store` for when a key is put and taken away). The ledger actor checks
the registered processes; when one has died, :meth:`WatchedWriters.forget_writers` makes its unsettled starts
``ambiguous`` — the effect may or may not have happened — and forgets the writer. A key of a start the writer
settled itself is found settled and left as it is.

Part of :class:`~.store.LedgerStore` (a mixin: the same databases, the same transactions and fence).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import lmdb

from ...core import clock
from ...core.codec import Record, decode, encode, str_key
from ...core.procs import process_start_ticks
from ..storage.commit import Outcome, write
from .domain import Entry, decide_ambiguous

if TYPE_CHECKING:
    from .store import Stamp


class WriterRecord(Record):
    """A process that writes the ledger directly and asked to be watched (see :mod:`.direct`)."""

    SCHEMA: ClassVar[str] = "ledger.writer"
    VERSION: ClassVar[int] = 1

    pid: int
    start_ticks: int  # the kernel's start time of ``pid``: a reused pid is another process
    node: str
    opened_ns: int


class WatchedWriters:
    """The watched-writer half of :class:`~.store.LedgerStore`."""

    env: lmdb.Environment
    entries: lmdb._Database
    writers: lmdb._Database
    runs: lmdb._Database
    fence: int | None

    def _check_stamp(self, txn: lmdb.Transaction, stamp: Stamp) -> None:
        raise NotImplementedError  # LedgerStore's

    def _read(self, txn: lmdb.Transaction, effect_id: str) -> Entry | None:
        raise NotImplementedError  # LedgerStore's

    def check_stamp(self, stamp: Stamp) -> None:
        """Raise :class:`StaleGeneration` if ``stamp`` is not in force now (a read; each write checks again)."""
        with self.env.begin() as txn:
            self._check_stamp(txn, stamp)

    def _put_writer(self, txn: lmdb.Transaction, writer: bytes, record: WriterRecord) -> None:
        """Register ``writer`` inside ``txn`` (a direct writer's first transaction that commits: see :mod:`.direct`)."""
        txn.put(writer, encode(record), db=self.writers)

    def watched_writers(self) -> dict[bytes, WriterRecord]:
        with self.env.begin() as txn:
            return {bytes(key): decode(bytes(raw), WriterRecord) for key, raw in txn.cursor(db=self.writers)}

    def gone_writers(self) -> set[bytes]:
        """Watched writers whose process has exited (a pid now running another process counts)."""
        return {writer for writer, record in self.watched_writers().items()
                if process_start_ticks(record.pid) != record.start_ticks}

    def forget_writers(self, gone: set[bytes], reason: str) -> Outcome[list[str]]:
        """Writers whose process died: their unsettled starts become ambiguous (returned), they are forgotten."""

        def mark(txn: lmdb.Transaction) -> list[str]:
            indexed = [bytes(key).decode() for key, writer in txn.cursor(db=self.runs) if bytes(writer) in gone]
            now = clock.time_ns()
            lost = []
            for effect_id in indexed:  # unsettled starts, and starts the writer settled itself (left as they are)
                current = self._read(txn, effect_id)
                changed = decide_ambiguous(current, now_ns=now, reason=reason) if current is not None else None
                if changed is not None:
                    txn.put(str_key(effect_id), encode(changed), db=self.entries)
                    lost.append(effect_id)
                txn.delete(str_key(effect_id), db=self.runs)
            for writer in gone:
                txn.delete(writer, db=self.writers)
            return lost

        return write(self.env, mark, fence=self.fence)


__all__ = ["WatchedWriters", "WriterRecord"]
