"""A session's journal as one portable file, byte for byte: for the replay corpus and for moving evidence.

The file is msgpack ``{"format": "ouroactors.journal", "version": 1, "session", "head": {...}, "records": [stored
values], "blobs": {address: bytes}}``: the stored values are kept exactly (hash, prev, seq, body), so an imported
journal verifies — or fails to — exactly as the original did. Import writes into a data dir's environment under the
session id given, refusing to overwrite a session that already has a journal.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import lmdb
import msgpack

from ...authorities.storage.env import db
from ...core.codec import encode
from . import blobs
from .journal import ANCHOR_DB, JOURNAL_DB, JournalError, JournalHead, check_session, head_key, record_key
from .reading import _head_in, _items

FORMAT = "ouroactors.journal"
_ADDRESS = re.compile(r"[0-9a-f]{64}")


def export_journal(env: lmdb.Environment, session: str) -> bytes:
    sid = check_session(session)
    values: list[bytes] = []
    found: dict[str, bytes] = {}
    with env.begin() as txn:  # head and records from one snapshot
        anchor = _head_in(txn, env, sid)
        if anchor is None:
            raise JournalError(f"no journal for session {session!r}")
        for _seq, value, _witness in _items(txn, env, sid, anchor.first_seq):
            values.append(bytes(value))
    from .reading import decode_record

    for value in values:
        record = decode_record(int.from_bytes(value[64:72], "big"), value)
        for field in record.fields.values():
            if blobs.is_reference(field):
                data = blobs.get(env, field[blobs.REF_KEY])
                if data is not None:
                    found[field[blobs.REF_KEY]] = data
    return msgpack.packb({"format": FORMAT, "version": 1, "session": session,
                          "head": {"first_seq": anchor.first_seq, "head_seq": anchor.head_seq,
                                   "head_hash": anchor.head_hash, "bytes": anchor.bytes, "records": anchor.records},
                          "records": values, "blobs": found}, use_bin_type=True)


def import_journal(env: lmdb.Environment, data: bytes, *, session: str | None = None,
                   unless_in: bytes | None = None) -> str:
    """Write an exported journal into ``env`` (witnesses recomputed from the stored hashes, head as exported), under
    ``session`` (default: the exported id). Refused (:class:`JournalError`, nothing written): a file that is not an
    archive, a blob that is not the sha256 of its bytes, an id that has a journal here — and, with ``unless_in``
    (a named database keyed by session id: the coordinator's ``sessions``), an id that has a record there. The
    checks that read the environment run inside the write transaction: a concurrent writer cannot slip between."""
    try:
        doc: Any = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception as exc:
        raise JournalError(f"not a journal archive: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != 1:
        raise JournalError("not a journal archive (format/version)")
    name: Any = session if session is not None else doc.get("session")
    sid = check_session(name)  # (refuses what is not a str)
    try:
        h = doc["head"]
        anchor = JournalHead(first_seq=h["first_seq"], head_seq=h["head_seq"], head_hash=h["head_hash"],
                             bytes=h["bytes"], records=h["records"])
        records, found = list(doc["records"]), dict(doc.get("blobs", {}))
    except (KeyError, TypeError, ValueError) as exc:
        raise JournalError(f"journal archive: malformed head or records ({exc})") from None
    for i, value in enumerate(records):
        if not isinstance(value, bytes) or len(value) <= 72:
            raise JournalError(f"journal archive: records[{i}] is not a stored record (bytes over 72 long)")
    for address, blob in found.items():  # content-addressed and shared by every session: only true addresses
        if not isinstance(address, str) or not isinstance(blob, bytes) or not _ADDRESS.fullmatch(address) \
                or hashlib.sha256(blob).hexdigest() != address:
            raise JournalError(f"journal archive: blob {str(address)[:80]!r} is not the sha256 of its bytes")
    with env.begin(write=True) as txn:  # an exception before the end aborts it: nothing written
        if txn.get(head_key(sid), db=db(env, ANCHOR_DB)) is not None:
            raise JournalError(f"session {name!r} already has a journal here")
        if unless_in is not None and txn.get(sid, db=db(env, unless_in)) is not None:
            raise JournalError(f"a session {name!r} exists here: import under another id")
        for value in records:
            seq = int.from_bytes(value[64:72], "big")
            txn.put(record_key(sid, seq), value, db=db(env, JOURNAL_DB))
            txn.put(record_key(sid, seq), value[:32], db=db(env, ANCHOR_DB))
        for address, blob in found.items():
            blobs.put(txn, env, blob, address)
        txn.put(head_key(sid), encode(anchor), db=db(env, ANCHOR_DB))
    return str(name)


def write_archive(env: lmdb.Environment, session: str, path: str | Path) -> None:
    Path(path).write_bytes(export_journal(env, session))


def read_archive(env: lmdb.Environment, path: str | Path, *, session: str | None = None) -> str:
    return import_journal(env, Path(path).read_bytes(), session=session)
