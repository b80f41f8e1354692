"""The journal's size budget: which whole old turns to drop, planned inside the appending transaction.

When a turn starts and a session's bytes exceed its budget, the oldest whole turns are dropped until it is under
3/4 of the budget — never the turn that runs, nor the settled turns its conversation snapshots continue from (a
runtime rebuilds the conversation from that snapshot once the turns before it are gone, :mod:`.snapshots`) — and a
``truncated`` record takes the place of the last dropped one.
It chains from the seed and carries ``resume_prev`` (the hash the first surviving record chains from), so the
survivors are neither rewritten nor re-hashed (see :mod:`.chain`). Blobs are not deleted (they are shared by
address).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import lmdb

from ...authorities.storage.env import db
from ...core.codec import CodecError, decode, encode
from . import blobs, chain
from .chain import SEED, JournalEntry
from .journal import ANCHOR_DB, JOURNAL_DB, JournalHead, Op, record_key


def truncate(txn: lmdb.Transaction, env: lmdb.Environment, sid: bytes, head: JournalHead, budget: int,
              ops: list[Op]) -> JournalHead:
    """Plan dropping the oldest whole turns until the session is under 3/4 of its budget (never the turn just
    started): deletions and the ``truncated`` record are appended to ``ops``; the new head is returned."""
    records, anchor = db(env, JOURNAL_DB), db(env, ANCHOR_DB)
    target = budget * 3 // 4
    keep = _snapshot_seq(txn, anchor, sid)  # the record a conversation snapshot continues from stays
    if keep is not None and not head.first_seq <= keep <= head.head_seq:
        keep = None  # not a record of this chain any more: it protects nothing
    dropped = 0
    candidate: tuple[int, int, bytes, int, int] | None = None  # (through, bytes, hash, records, turns)
    turns = 0
    last_hash = SEED
    n = 0
    for n, (seq, value) in enumerate(_scan(txn, records, sid, head.first_seq)):
        if seq >= head.head_seq:
            break
        arr = chain.body_array(value[chain.HEADER:])
        if arr is not None and arr[chain.KIND_INDEX] == "turn_started" and seq > head.first_seq:
            if keep is not None and seq - 1 >= keep:  # the cut would take the snapshot's record: stop before it
                break
            candidate = (seq - 1, dropped, last_hash, n, turns)
            if head.bytes - dropped <= target:
                break
            turns += 1
        dropped += len(value) + _spilled_bytes(arr)
        last_hash = value[:32]
    if candidate is None:
        return head
    through, gone_bytes, resume, gone_records, gone_turns = candidate
    if through < head.first_seq + 1:
        return head
    for seq in range(head.first_seq, through):
        key = record_key(sid, seq)
        ops.append((records, key, None))
        ops.append((anchor, key, None))
    body = encode(JournalEntry(at=0, turn=None, kind="truncated", fields={
        "dropped_from_seq": head.first_seq, "dropped_through_seq": through, "dropped_records": gone_records,
        "dropped_bytes": gone_bytes, "dropped_turns": gone_turns, "resume_prev": bytes(resume),
    }))
    digest, value = chain.seal(SEED, through, body)
    ops.append((records, record_key(sid, through), value))
    ops.append((anchor, record_key(sid, through), digest))
    head_hash = digest if through == head.head_seq else head.head_hash
    return JournalHead(first_seq=through, head_seq=head.head_seq, head_hash=head_hash,
                       bytes=head.bytes - gone_bytes + len(value), records=head.records - gone_records + 1)


def _snapshot_seq(txn: lmdb.Transaction, anchor: Any, sid: bytes) -> int | None:
    """The seq of the oldest record the session's conversation snapshots continue from (None: no snapshot that
    decodes). Both slots' are kept: a replacement runtime that cannot use the newer one (its turn's events must be
    derived again, :mod:`.snapshot_rider`) continues from the other. A truncation that dropped it would leave a
    runtime nothing to rebuild the conversation from (see :mod:`.snapshots`): the journal then stays over its budget
    until newer snapshots let it cut further."""
    from .snapshots import ConversationSnapshot, slot_keys

    seqs: list[int] = []
    for key in slot_keys(sid):
        raw = txn.get(key, db=anchor)
        if raw is None:
            continue
        try:
            seqs.append(decode(bytes(raw), ConversationSnapshot).seq)
        except CodecError:
            continue
    return min(seqs) if seqs else None


def _spilled_bytes(arr: list[Any] | None) -> int:
    if arr is None or not isinstance(arr[5], dict):
        return 0
    return sum(int(v["bytes"]) for v in arr[5].values() if blobs.is_reference(v))


def _scan(txn: lmdb.Transaction, records: Any, sid: bytes, first: int) -> Iterator[tuple[int, bytes]]:
    prefix = sid + b"\x00"
    cursor = txn.cursor(db=records)
    if not cursor.set_range(record_key(sid, first)):
        return
    for key, value in cursor:
        if key[:-8] != prefix:
            return
        yield int.from_bytes(key[-8:], "big"), bytes(value)
