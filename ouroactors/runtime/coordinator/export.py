"""A session's whole durable history as one JSON document: what ``ouroactors session export`` writes.

Seed 001 asks for a history that is *exportable* and lists what the durable record holds: the ordered event
history and the workflow state, the pinned versions, completed model and tool results with their idempotency keys,
pending timers, jobs and approvals with their expiry rules, the identifiers (conversation, artifact, actor, tenant,
channel) and the next valid transitions. They live in five places of the node's LMDB environment — the session
record and its published log (this package), the accepted and rejected resume events, the ledger's effects, the
grants authority's approvals, the journal — and this module reads them into one document: the record, its log,
resume events, effects and approvals in **one read transaction** (a consistent snapshot: nothing committed half-way
through shows), the journal's archive after it (a journal only grows, and its verdict is of those very bytes):

``format`` / ``version`` · ``session`` (the record as stored) · ``next_valid`` · ``events`` (cursor order) ·
``resume_events`` (``accepted``, ``rejected``) · ``effects`` (ledger entries, in recording order) · ``approvals`` ·
``artifacts`` (derived from the settled effects) · ``journal`` (its head, the chain's verdict, and the journal itself
as the portable archive of :mod:`..execution.archive`, base64: ``journal import`` takes it back).

It reads only, and reads the files themselves, so it works with the system up or down — and only for who may read
the data dir (its owner: the environment is ``0700``). Records that do not decode are named in ``unreadable``
rather than failing the export (the rest is still evidence).
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import time
from typing import Any

import lmdb

from ...authorities.grants.approvals import Approval
from ...authorities.grants.records import decode_record as decode_grants_record
from ...authorities.ledger.domain import Entry
from ...authorities.storage.env import db
from ...core.codec import decode
from ...core.errors import CorruptRecord, OuroactorsError
from ..execution import archive, reading
from .artifacts import artifacts_of
from .errors import UnknownSession
from .keys import log_prefix, rejected_prefix, seen_prefix
from .record import AcceptedEvent, PublishedEvent, RejectedEvent, SessionRecord, check_id
from .workflow import allowed_events

FORMAT = "ouroactors.session"
VERSION = 1


def _plain(value: Any) -> Any:
    """JSON-safe: bytes as hex, tuples as lists, dataclasses and models as dicts, enums as their values."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if hasattr(value, "model_dump"):
        return _plain(value.model_dump(mode="python"))
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    return value


def _prefixed(txn: lmdb.Transaction, database: Any, prefix: bytes) -> list[tuple[bytes, bytes]]:
    cursor = txn.cursor(db=database)
    found: list[tuple[bytes, bytes]] = []
    if cursor.set_range(prefix):
        for key, value in cursor:
            if not bytes(key).startswith(prefix):
                break
            found.append((bytes(key), bytes(value)))
    return found


class _Reader:
    """One export: decodes what it reads, and names what it could not."""

    def __init__(self, env: lmdb.Environment, txn: lmdb.Transaction) -> None:
        self.env, self.txn = env, txn
        self.unreadable: list[str] = []

    def decoded(self, raw: bytes, kind: type, where: str) -> Any | None:
        try:
            return decode(raw, kind)
        except (CorruptRecord, ValueError, TypeError) as exc:
            self.unreadable.append(f"{where}: {exc}")
            return None

    def events(self, session_id: str) -> list[PublishedEvent]:
        found = (self.decoded(raw, PublishedEvent, f"session_events/{key!r}")
                 for key, raw in _prefixed(self.txn, db(self.env, b"session_events"), log_prefix(session_id)))
        return [e for e in found if e is not None]

    def resume_events(self, session_id: str) -> dict[str, list[Any]]:
        resumes = db(self.env, b"session_resume")
        accepted = [self.decoded(raw, AcceptedEvent, f"session_resume/{key!r}")
                    for key, raw in _prefixed(self.txn, resumes, seen_prefix(session_id))]
        rejected = [self.decoded(raw, RejectedEvent, f"session_resume/{key!r}")
                    for key, raw in _prefixed(self.txn, resumes, rejected_prefix(session_id))]
        return {"accepted": sorted((a for a in accepted if a is not None), key=lambda a: a.at_ns),
                "rejected": [r for r in rejected if r is not None]}

    def effects(self, session_id: str) -> list[Entry]:
        found: list[Entry] = []
        for key, raw in _prefixed(self.txn, db(self.env, b"ledger"), b""):
            entry = self.decoded(raw, Entry, f"ledger/{key!r}")
            if entry is not None and entry.session_id == session_id:
                found.append(entry)
        return sorted(found, key=lambda e: e.seq)

    def approvals(self, session_id: str) -> list[Approval]:
        found: list[Approval] = []
        for key, raw in _prefixed(self.txn, db(self.env, b"grants"), b"approval/"):
            try:
                _kind, _name, approval = decode_grants_record(key, raw)
            except CorruptRecord as exc:
                self.unreadable.append(f"grants/{key!r}: {exc.detail}")
                continue
            if isinstance(approval, Approval) and approval.session_id == session_id:
                found.append(approval)
        return sorted(found, key=lambda a: a.requested_ns)


def export_session(env: lmdb.Environment, session_id: str) -> dict[str, Any]:
    """The document for ``session_id`` (see the module docstring); :class:`UnknownSession` if there is none."""
    check_id(session_id, "session_id")
    with env.begin() as txn:
        reader = _Reader(env, txn)
        raw = txn.get(session_id.encode(), db=db(env, b"sessions"))
        if raw is None:
            raise UnknownSession(session_id)
        record = reader.decoded(bytes(raw), SessionRecord, f"sessions/{session_id}")
        if record is None:
            raise OuroactorsError(f"session {session_id!r}: its record does not decode ({reader.unreadable[-1]})")
        events = reader.events(session_id)
        resumes = reader.resume_events(session_id)
        effects = reader.effects(session_id)
        approvals = reader.approvals(session_id)
    journal: dict[str, Any] | None = None
    if reading.head(env, session_id) is not None:  # its own snapshot: the archive and the verdict of the same bytes
        data = archive.export_journal(env, session_id)
        verdict = reading.verify(env, session_id, reading.ledger_anchors(env, session_id))
        journal = {"ok": verdict.ok, "records": verdict.records, "first_seq": verdict.first_seq,
                   "head_seq": verdict.head_seq, "head_hash": verdict.head_hash,
                   "verified_through": verdict.verified_through, "broken_seq": verdict.broken_seq,
                   "reason": verdict.reason or None, "archive_b64": base64.b64encode(data).decode("ascii")}
    return _plain({
        "format": FORMAT, "version": VERSION, "exported_ns": time.time_ns(),
        "session": record,
        "next_valid": [event.value for event in allowed_events(record.state)],
        "events": events,
        "resume_events": resumes,
        "effects": effects,
        "approvals": approvals,
        "artifacts": artifacts_of([e for e in effects if e.status.value == "ok"]),
        "journal": journal,
        "unreadable": reader.unreadable,
    })


__all__ = ["FORMAT", "VERSION", "export_session"]
