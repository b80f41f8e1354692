"""Reading a session's journal back: its head, its records, and whether they follow (``verify``).

Reads never write and never raise on bad data: a record that does not verify is *named* (seq and why), a body that
does not decode is returned as an :class:`StoredRecord` with ``kind = "unreadable"`` so that replay can stop there
honestly.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import lmdb

from ...authorities.storage.env import db
from ...core.codec import CodecError, decode
from . import chain
from .chain import JournalEntry, Verdict
from .journal import ANCHOR_DB, JOURNAL_DB, JournalError, JournalHead, check_session, head_key, record_key
from .journal_loss import Lost, decode_marker, marker_key


@dataclass(frozen=True)
class StoredRecord:
    seq: int
    hash: bytes
    prev: bytes
    at: int
    turn: int | None
    kind: str
    fields: dict[str, Any]


def head(env: lmdb.Environment, session: str) -> JournalHead | None:
    sid = check_session(session)
    with env.begin() as txn:
        return _head_in(txn, env, sid)


def _head_in(txn: lmdb.Transaction, env: lmdb.Environment, sid: bytes) -> JournalHead | None:
    raw = txn.get(head_key(sid), db=db(env, ANCHOR_DB))
    if raw is None:
        return None
    try:
        return decode(bytes(raw), JournalHead)
    except CodecError as exc:
        raise JournalError(f"journal head of {sid.decode()!r} does not decode: {exc}") from exc


def pending_loss(env: lmdb.Environment, session: str) -> Lost | None:
    """The session's gap marker (:mod:`.journal_loss`): records a writer lost that no ``gap`` record names yet (the
    next write will), or None. A marker that does not decode reads as a loss of unknown records."""
    sid = check_session(session)
    with env.begin(db=db(env, ANCHOR_DB)) as txn:
        raw = txn.get(marker_key(sid))
        return None if raw is None else decode_marker(raw)[1]


def sessions(env: lmdb.Environment) -> list[str]:
    """Every session with a journal head."""
    out: list[str] = []
    with env.begin(db=db(env, ANCHOR_DB)) as txn:
        for key in txn.cursor().iternext(keys=True, values=False):
            if key.endswith(b"\x01") and b"\x00" not in key:
                out.append(bytes(key[:-1]).decode())
    return out


def _items(txn: lmdb.Transaction, env: lmdb.Environment, sid: bytes, first: int
           ) -> Iterator[tuple[int, bytes, bytes | None]]:
    """``(seq, value, witness)`` of the session's records from ``first``: the two databases walked in step."""
    prefix = sid + b"\x00"
    n = len(prefix)
    records = txn.cursor(db=db(env, JOURNAL_DB))
    witnesses = txn.cursor(db=db(env, ANCHOR_DB))
    start = record_key(sid, first)
    if not records.set_range(start):
        return
    in_step = witnesses.set_range(start)
    wit = witnesses.iternext() if in_step else iter(())
    for key, value in records.iternext():
        if key[:n] != prefix or len(key) != n + 8:
            return
        wkey, witness = next(wit, (None, None))
        if wkey != key:  # out of step (a missing witness or record): look this one up, walk again from here
            witness = txn.get(key, db=db(env, ANCHOR_DB))
            wit = witnesses.iternext() if witnesses.set_range(key) else iter(())
            if witness is not None:  # the cursor stands on this key: step past it
                next(wit, None)
        yield int.from_bytes(key[n:], "big"), value, witness  # type: ignore[misc]


def verify(env: lmdb.Environment, session: str, anchors: Mapping[int, bytes] | None = None) -> Verdict:
    """Check the session's chain against its witness and head, and ``anchors`` (seq → hash kept elsewhere, e.g.
    :func:`ledger_anchors`) if given (see :func:`.chain.verify`)."""
    sid = check_session(session)
    with env.begin() as txn:  # head and records from one snapshot: a concurrent append is not a false alarm
        anchor = _head_in(txn, env, sid)
        first = anchor.first_seq if anchor is not None else 0
        return chain.verify(_items(txn, env, sid, first),
                            None if anchor is None else chain.Head(anchor.first_seq, anchor.head_seq,
                                                                   anchor.head_hash), anchors)


def verify_since(env: lmdb.Environment, session: str, seq: int, digest: bytes
                 ) -> tuple[Verdict, list[StoredRecord]] | None:
    """The chain from a record verified earlier (``seq``, which must still hash to ``digest``: a conversation
    snapshot's, :mod:`.snapshots`) to the anchored head, and the records from ``seq`` up to where it verifies, from
    one snapshot of the database. None when the session has no journal."""
    sid = check_session(session)
    with env.begin() as txn:
        anchor = _head_in(txn, env, sid)
        if anchor is None:
            return None
        items = [(s, bytes(v), None if w is None else bytes(w)) for s, v, w in _items(txn, env, sid, seq)]
    verdict = chain.verify(items, chain.Head(anchor.first_seq, anchor.head_seq, anchor.head_hash),
                           trusted=(seq, digest))
    through = verdict.verified_through if verdict.ok else (verdict.broken_seq or seq) - 1
    return verdict, [decode_record(s, v) for s, v, _ in items if through is not None and s <= through]


def records(env: lmdb.Environment, session: str, *, since: int = 0, limit: int | None = None) -> list[StoredRecord]:
    """The session's stored records in seq order (from the anchored first seq): those at ``since`` or later, at
    most ``limit`` of them (None: all) — only those are read and decoded."""
    sid = check_session(session)
    out: list[StoredRecord] = []
    if (limit is not None and limit <= 0) or since >= 1 << 64:  # past any seq a key can hold: nothing there
        return out
    with env.begin() as txn:
        anchor = _head_in(txn, env, sid)
        first = max(anchor.first_seq if anchor is not None else 0, since)
        for seq, value, _ in _items(txn, env, sid, first):
            out.append(decode_record(seq, bytes(value)))
            if limit is not None and len(out) >= limit:
                break
    return out


def decode_record(seq: int, value: bytes) -> StoredRecord:
    digest, prev, _stored_seq, body = chain.split(value)
    try:
        entry = decode(body, JournalEntry)
    except CodecError as exc:
        return StoredRecord(seq, digest, prev, 0, None, "unreadable", {"error": str(exc)})
    return StoredRecord(seq, digest, prev, entry.at, entry.turn, entry.kind, entry.fields)


def ledger_entries(env: lmdb.Environment, session: str) -> list[Any]:
    """The ledger's entries of ``session`` (its session index), as committed now."""
    from ...authorities.ledger.store import LedgerStore

    return LedgerStore(env, node="journal-verify", kinds=frozenset(), fence=None).list(session=session, limit=1 << 30)


def ledger_anchors(env: lmdb.Environment, session: str, entries: list[Any] | None = None) -> dict[int, bytes]:
    """The journal hashes the ledger's entries of ``session`` carry as evidence (``Journal.anchor_evidence``);
    ``entries``: those :func:`ledger_entries` read already."""
    found: dict[int, bytes] = {}
    for entry in ledger_entries(env, session) if entries is None else entries:
        mark = (entry.evidence or {}).get("journal")
        if isinstance(mark, dict) and isinstance(mark.get("seq"), int) and isinstance(mark.get("hash"), str):
            try:
                found[mark["seq"]] = bytes.fromhex(mark["hash"])
            except ValueError:
                continue
    return found
