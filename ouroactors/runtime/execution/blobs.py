"""Content-addressed blobs for journal fields too large to keep inline (``journal_blobs``: sha256 → bytes).

Records stay under ~2 KB inline (``notes/lmdb.md`` pitfall 13: a bigger value costs overflow pages on every write),
so a field whose canonical encoding is large is replaced in the record by a reference ``{"$blob": <sha256 hex>,
"bytes": n}`` and its bytes are put here in the same transaction as the record. The hash is computed before the
transaction (hashing big payloads inside a write transaction holds the node's single writer lock). A blob is never
deleted by the journal: the same bytes may be referenced by several records or sessions. A reader that finds a
blob missing or not matching its address gets ``None`` — replay stops there honestly ("missing blob").
"""

from __future__ import annotations

import hashlib
from typing import Any, ClassVar

import lmdb

from ...authorities.storage.env import db
from ...core.codec import CodecError, Record, decode, encode

BLOBS_DB = b"journal_blobs"
REF_KEY = "$blob"


class BlobValue(Record):
    """The canonical wrapper a spilled field value is stored as (so it decodes back to the same value)."""

    SCHEMA: ClassVar[str] = "journal.blob"
    VERSION: ClassVar[int] = 1

    value: Any


def pack_value(value: Any) -> bytes:
    """Canonical bytes of a field value (raises :class:`~ouroactors.core.codec.CodecError` if unencodable)."""
    return encode(BlobValue(value=value))


def reference(data: bytes) -> dict[str, Any]:
    return {REF_KEY: hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def is_reference(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 2 and isinstance(value.get(REF_KEY), str) and "bytes" in value


def put(txn: lmdb.Transaction, env: lmdb.Environment, data: bytes, address: str) -> None:
    """Store ``data`` under its address (inside the caller's write transaction; idempotent): :func:`put_at`."""
    put_at(txn, db(env, BLOBS_DB), bytes.fromhex(address), data)


def put_at(txn: lmdb.Transaction, where: Any, key: bytes, data: bytes) -> None:
    """Store ``data`` (whose sha256 is ``key``: the caller computed it) in the blobs database ``where``. Bytes already
    there that hash to ``key`` are kept and nothing is written (a rewrite would dirty the tree's pages on every
    open); bytes that do not — damaged, or planted under an address they do not hash to — are replaced, so no blob
    holds an address it is not the content of."""
    found = txn.get(key, db=where)
    if found is not None and hashlib.sha256(found).digest() == key:
        return
    txn.put(key, data, db=where)


def get(env: lmdb.Environment, address: str) -> bytes | None:
    """The blob's bytes if present and matching its address, else None."""
    try:
        key = bytes.fromhex(address)
    except ValueError:
        return None
    with env.begin(db=db(env, BLOBS_DB)) as txn:
        data = txn.get(key)
    if data is None or hashlib.sha256(data).digest() != key:
        return None
    return bytes(data)


def resolve(env: lmdb.Environment, value: Any) -> tuple[bool, Any]:
    """``(True, value)`` with a blob reference replaced by the value it stands for; ``(False, ref)`` if missing."""
    if not is_reference(value):
        return True, value
    data = get(env, value[REF_KEY])
    if data is None:
        return False, value
    try:
        return True, decode(data, BlobValue).value
    except CodecError:
        return False, value
