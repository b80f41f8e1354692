"""The journal's hash chain, pure: sealing a record and verifying a sequence of stored records.

A stored journal record is ``hash ‖ prev ‖ seq ‖ body`` where

* ``body`` is the canonical msgpack of a :class:`JournalEntry` (``ouroactors.core.codec``: schema-ordered array,
  so no key sort on the hot path),
* ``seq`` is the record's 8-byte big-endian sequence number (contiguous per session, the same bytes as its key),
* ``prev`` is the previous record's ``hash`` (32 zero bytes — :data:`SEED` — for the first record of a session and
  for a ``truncated`` head record),
* ``hash = sha256(prev ‖ seq ‖ body)``: the "canonical bytes" that are chained are ``seq ‖ body``.

Why this layout: :func:`verify` checks the chain without decoding anything (slice compares and one SHA-256 per
record), which is what makes ≥ 200k records/s reachable in Python; the body is decoded only for the first record
(is it a ``truncated`` head?).

**Anchoring.** A chain alone cannot reveal a forger who rewrites record *k* and recomputes every hash after it: the
forged chain is internally consistent. So every record's hash is also written, in the same transaction, to a
*witness* (``journal_anchor``: one 32-byte hash per seq, plus the session's head — last seq, last hash, first seq).
:func:`verify` compares each record's hash with its witness, which names the exact seq where a recomputed chain
departs, and compares the end of the chain with the head, which names the first missing seq of a cut tail. The
witness lives beside the records (the same LMDB file), so it stops a forger who edits the journal's records, not one
who can also rewrite the anchor database. For that one, the journal's committed head (seq and hash) rides in the
ledger's settled evidence (``Journal.anchor_evidence``, put there by the effect port): ``verify`` given those
external anchors names the first anchored record at or after a rewrite. A forger must then rewrite the ledger's
entries as well. Without a secret, this is as far as anchoring goes — we say so rather than call the journal
tamper-proof.
"""

from __future__ import annotations

import builtins
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import msgpack

from ...core.codec import CodecError, Record, _pack, encode

SEED = bytes(32)
HEADER = 72  # hash (32) + prev (32) + seq (8)
_sha256 = hashlib.sha256


class JournalEntry(Record):
    """The hashed body of a journal record (everything but ``hash``, ``prev`` and ``seq``)."""

    SCHEMA: ClassVar[str] = "journal.entry"
    VERSION: ClassVar[int] = 1

    at: int  # the clock port's time, ns
    turn: int | None
    kind: str
    fields: dict[str, Any]


class JournalHead(Record):
    """The anchor of a session's chain (``journal_anchor``, ``session ‖ 0x01``)."""

    SCHEMA: ClassVar[str] = "journal.head"
    VERSION: ClassVar[int] = 1

    first_seq: int
    head_seq: int  # first_seq - 1 while empty
    head_hash: bytes
    bytes: int  # record bytes + spilled blob bytes currently counted against the budget
    records: int


class HeadValues(NamedTuple):
    """A :class:`JournalHead`'s values, in its field order, as the writer keeps them between its transactions: a
    model built (``model_construct``) and encoded per transaction cost ~8 us, twice per tool call; its bytes are
    packed from these values (the same array ``encode`` makes of the model)."""

    first_seq: int
    head_seq: int
    head_hash: bytes
    bytes: int
    records: int

    def packed(self) -> builtins.bytes:  # (the field above shadows the type's name in this class)
        return _pack([JournalHead.SCHEMA, JournalHead.VERSION, *self], "JournalHead")


KIND_INDEX = 4  # position of ``kind`` in the body array [SCHEMA, VERSION, at, turn, kind, fields]


def entry_bytes(at: int, turn: int | None, kind: str, fields: dict[str, Any]) -> bytes:
    """``encode(JournalEntry(at=at, turn=turn, kind=kind, fields=fields))``, byte for byte, for the values a record
    is made of (an int time, an int turn or None, a str kind, a dict with str keys) without building the model: a
    record is the array ``[SCHEMA, VERSION, at, turn, kind, fields]`` either way, and validating the model only
    copied the fields dict (4-5 records per tool call, ~3 us each). Anything else — and any value the encoding
    refuses — goes through the model, which validates and names what it refuses as it always did."""
    if (type(at) is int and (turn is None or type(turn) is int) and type(kind) is str and type(fields) is dict
            and all(type(k) is str for k in fields)):
        try:
            return _pack([JournalEntry.SCHEMA, JournalEntry.VERSION, at, turn, kind, fields], "JournalEntry")
        except CodecError:
            pass
    return encode(JournalEntry(at=at, turn=turn, kind=kind, fields=fields))


def seal(prev: bytes, seq: int, body: bytes) -> tuple[bytes, bytes]:
    """The record's hash and its stored value ``hash ‖ prev ‖ seq ‖ body``."""
    signed = prev + seq.to_bytes(8, "big") + body
    digest = _sha256(signed).digest()
    return digest, digest + signed


def split(value: bytes) -> tuple[bytes, bytes, int, bytes]:
    """``(hash, prev, seq, body)`` of a stored value (no checks: see :func:`verify`)."""
    return value[:32], value[32:64], int.from_bytes(value[64:72], "big"), value[72:]


def body_array(body: bytes) -> list[Any] | None:
    """The raw array of a body, or None if it is not one (never raises)."""
    try:
        arr = msgpack.unpackb(body, raw=False, strict_map_key=True, use_list=True)
    except Exception:
        return None
    if isinstance(arr, list) and len(arr) == 6 and arr[0] == JournalEntry.SCHEMA:
        return arr
    return None


@dataclass(frozen=True)
class Head:
    """What the anchor says about a session's chain."""

    first_seq: int
    head_seq: int  # first_seq - 1 when empty
    head_hash: bytes


@dataclass(frozen=True)
class Verdict:
    """The outcome of :func:`verify`: everything up to ``verified_through`` follows; ``broken_seq`` does not."""

    records: int
    first_seq: int | None
    head_seq: int | None
    head_hash: bytes | None
    verified_through: int | None
    broken_seq: int | None = None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.broken_seq is None


def verify(items: Iterable[tuple[int, bytes, bytes | None]], head: Head | None,
           external: Mapping[int, bytes] | None = None, *, trusted: tuple[int, bytes] | None = None) -> Verdict:
    """Check ``items`` — ``(key seq, stored value, witness hash)`` in key order — against the chain rules, the
    witness and the head.

    Names the first seq that does not follow: a record whose hash does not match its bytes (flipped or cut bytes),
    one stored under another seq than it names (reordered, duplicated), a missing seq (dropped), a prev that is not
    the previous hash, a hash that is not the anchored one (a chain recomputed from the middle), and a chain that
    ends before or after the anchored head (a cut tail). ``external``: hashes of some seqs recorded *outside* the
    journal's database (the ledger's settled evidence); a record whose hash differs from one is named too — that
    catches a forger who rewrote the anchor database as well, at the first external anchor after the change.
    ``trusted``: ``(seq, hash)`` of a record verified earlier (a conversation snapshot's, :mod:`.snapshots`): the
    items start there, the first must have that hash, and the chain is checked from it on (its own link is not).
    """
    expected = head.first_seq if head is not None else None
    if trusted is not None:
        expected = trusted[0]
    prev: bytes | None = None
    count = 0
    last_hash: bytes | None = None
    first: int | None = None

    def broken(seq: int, why: str) -> Verdict:
        through = seq - 1 if count else None
        return Verdict(count, first, head.head_seq if head else None, head.head_hash if head else None,
                       through, seq, why)

    sha256 = _sha256
    for seq, value, witness in items:
        if expected is None:
            expected = seq
        if first is None:
            first = expected
        if seq != expected:
            if seq < expected:
                return broken(seq, f"record stored out of order (key {seq} after {expected - 1})")
            return broken(expected, f"record {expected} is missing (the next stored record is {seq})")
        if len(value) < HEADER + 1:
            return broken(seq, f"record {seq} is {len(value)} bytes, shorter than its header")
        digest = value[:32]
        if sha256(value[32:]).digest() != digest:
            return broken(seq, f"record {seq}: its hash does not match its bytes")
        stored_seq = int.from_bytes(value[64:72], "big")
        if stored_seq != seq:
            return broken(seq, f"record {seq}: the record names seq {stored_seq} (moved or duplicated)")
        link = value[32:64]
        if trusted is not None and count == 0:
            if digest != trusted[1]:
                return broken(seq, f"record {seq}: hash differs from the one its snapshot was taken at")
        elif prev is None:
            first_prev = _first_prev(seq, value, link)
            if isinstance(first_prev, str):
                return broken(seq, first_prev)
        elif link != prev:
            return broken(seq, f"record {seq}: prev is not the hash of record {seq - 1}")
        if witness != digest:
            return broken(seq, f"record {seq}: hash differs from the anchored witness (rewritten or re-chained)")
        if external and seq in external and external[seq] != digest:
            return broken(seq, f"record {seq}: hash differs from the one recorded in the ledger (rewritten, with "
                               "its anchor, at or before this record)")
        prev = _next_prev(seq, value, digest) if count == 0 else digest
        last_hash = digest
        count += 1
        expected = seq + 1
    if head is not None:
        if expected is None:
            expected = head.first_seq
        if head.head_seq >= expected:
            return broken(expected, f"records {expected}..{head.head_seq} are missing (the anchor's head is "
                                    f"{head.head_seq})")
        if count and last_hash != head.head_hash:
            return broken(expected - 1, f"record {expected - 1}: hash differs from the anchored head")
    elif count:
        return broken(first or 0, "no anchored head for this session")
    return Verdict(count, first, head.head_seq if head else None, head.head_hash if head else None,
                   expected - 1 if count and expected is not None else None)


def _first_prev(seq: int, value: bytes, link: bytes) -> bytes | str:
    """The first record chains from the seed: session_opened at seq 0, or a ``truncated`` head record."""
    if link != SEED:
        return f"record {seq}: the first record must chain from the seed"
    if seq != 0:
        arr = body_array(value[HEADER:])
        if arr is None or arr[KIND_INDEX] != "truncated":
            return f"record {seq}: the journal starts at {seq} without a truncated head record"
    return SEED


def _next_prev(seq: int, value: bytes, digest: bytes) -> bytes:
    """After a ``truncated`` head, the next record chains from the dropped record's hash (``resume_prev``)."""
    if seq == 0:
        return digest
    arr = body_array(value[HEADER:])
    if arr is not None and isinstance(arr[5], dict):
        resume = arr[5].get("resume_prev")
        if isinstance(resume, bytes) and len(resume) == 32:
            return resume
    return digest
