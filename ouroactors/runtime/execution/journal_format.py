"""The journal at rest: where a session's records live in LMDB, and how one record is encoded.

Shared by the writer (:mod:`.journal`), the readers (:mod:`.reading`), the archive (:mod:`.archive`) and the size
budget (:mod:`.budget`); its names are re-exported from :mod:`.journal`, where callers import them.

Layout (named databases, opened with the environment):

* ``journal``: ``session ‖ 0x00 ‖ seq`` → ``hash ‖ prev ‖ seq ‖ body`` (:mod:`.chain`);
* ``journal_anchor``: ``session ‖ 0x00 ‖ seq`` → the record's hash (the witness) and ``session ‖ 0x01`` → the
  session's :class:`~.chain.JournalHead` (first seq, last seq, last hash, bytes) — see :mod:`.chain` for why;
* ``journal_blobs``: fields too large to keep inline (:mod:`.blobs`).

A record's body (:func:`.chain.entry_bytes`) is kept inline while it fits :data:`INLINE_LIMIT`; a larger one keeps
its small fields inline and every field encoding to more than :data:`SPILL_FIELD_BYTES` becomes a content-addressed
blob reference (:func:`_encode`), written beside the record in the same transaction. A record's ``kind`` is one of
:data:`KINDS`; ``gap`` and ``truncated`` are written by the journal itself, never staged by a caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import blobs, chain

JOURNAL_DB = b"journal"
ANCHOR_DB = b"journal_anchor"
KINDS = frozenset({
    "session_opened", "turn_started", "prompt", "model_call", "model_result", "tool_call", "tool_result", "steer",
    "steer_received", "interrupt", "approval", "turn_settled", "gap", "truncated",
    "turn_ended",  # a turn its runtime did not settle, ended by the session's coordinator (a cancel, a failure)
})
INLINE_LIMIT = 1800  # body bytes kept inline (+ the 72-byte header stays under ~2 KB)
SPILL_FIELD_BYTES = 256  # when a body is too big, every field encoding to more than this becomes a blob


def record_key(sid: bytes, seq: int) -> bytes:
    return sid + b"\x00" + seq.to_bytes(8, "big")


def head_key(sid: bytes) -> bytes:
    return sid + b"\x01"


Op = tuple[Any, bytes, bytes | None]  # (database, key, value to put — or None: delete)


@dataclass
class _Staged:
    kind: str
    body: bytes
    spilled: list[tuple[str, bytes]]  # (address, bytes)
    weight: int  # body + spilled bytes


def _encode(kind: str, fields: dict[str, Any], turn: int | None, at: int) -> _Staged:
    body = chain.entry_bytes(at, turn, kind, fields)
    if len(body) <= INLINE_LIMIT:
        return _Staged(kind, body, [], len(body))
    spilled: list[tuple[str, bytes]] = []
    slim: dict[str, Any] = {}
    for name, value in fields.items():
        data = blobs.pack_value(value)
        if len(data) > SPILL_FIELD_BYTES:
            ref = blobs.reference(data)
            spilled.append((ref[blobs.REF_KEY], data))
            slim[name] = ref
        else:
            slim[name] = value
    body = chain.entry_bytes(at, turn, kind, slim)
    return _Staged(kind, body, spilled, len(body) + sum(len(d) for _, d in spilled))
