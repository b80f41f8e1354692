"""The operator's side of quarantined records: list them, and discard the ones an authority can do without.

An authority that finds a record it cannot decode leaves it in place (failing closed for that record: an
approval is not approved, a rule or posture makes its decisions ask, a lease keeps holding its root) and copies
its bytes to the ``quarantine`` database under ``<db>/<key>``. Left alone it fails closed for ever, which is
honest but not a repair. This module is the repair, run **offline** (the CLI refuses while a live system serves
the data dir, since an authority holds what it loaded in memory):

* :func:`listing` — every quarantined copy, and what became of its original: ``in place`` (still the same bytes),
  ``changed`` (rewritten since: an operator set the posture again, say), ``gone``, or ``discarded``.
* :func:`discard` — delete the original from its database, in one transaction that also records who discarded
  it and when (``discarded/<db>/<key>`` in ``quarantine``); the quarantined copy stays as evidence. Only where
  removing a record is itself a safe state: a ``grants`` record (an approval is then unknown — never approved —
  and a rule set or posture falls back to the configured ones) and a ``workspace`` record (a lease or worktree
  owner the authority no longer holds). A session's records are its history and are never discarded here
  (:data:`DISCARDABLE`); neither is an original that changed since it was quarantined — the copy no longer
  describes it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import lmdb

from ...core.errors import OuroactorsError
from .commit import Committed, write
from .env import db

__all__ = ["DISCARDABLE", "QuarantineError", "Quarantined", "discard", "listing"]

QUARANTINE = b"quarantine"
MAX_KEY_BYTES = 511  # LMDB's default key limit
DISCARDED = b"discarded/"
DISCARDABLE = {
    "grants": "the approval is then unknown (never approved); a rule set or posture falls back to the configured one",
    "workspace": "the lease or worktree owner is then not held: its root is free",
}


class QuarantineError(OuroactorsError):
    """A discard that is refused (nothing changed)."""


@dataclass(frozen=True)
class Quarantined:
    key: str  # in the quarantine database: "<db>/<key>"
    db: str
    original: str  # the key in its own database
    size: int
    state: str  # in place | changed | gone | discarded
    discarded_by: str | None = None
    discarded_ns: int | None = None


def _split(key: bytes) -> tuple[str, bytes]:
    name, _, original = key.partition(b"/")
    return name.decode(errors="backslashreplace"), original


def _describe(txn: lmdb.Transaction, env: lmdb.Environment, key: bytes, copy: bytes) -> Quarantined:
    name, original = _split(key)
    shown = key.decode(errors="backslashreplace")
    mark = txn.get(DISCARDED + key, db=db(env, QUARANTINE))
    if mark is not None:
        info = json.loads(bytes(mark))
        return Quarantined(shown, name, original.decode(errors="backslashreplace"), len(copy), "discarded",
                           info.get("by"), info.get("at_ns"))
    try:
        now = txn.get(original, db=db(env, name.encode()))
    except KeyError:  # a database this code does not know: nothing to compare with
        now = None
    state = "gone" if now is None else ("in place" if bytes(now) == copy else "changed")
    return Quarantined(shown, name, original.decode(errors="backslashreplace"), len(copy), state)


def listing(env: lmdb.Environment) -> list[Quarantined]:
    """Every quarantined record and what became of its original, in key order."""
    with env.begin() as txn:
        return [_describe(txn, env, bytes(key), bytes(value)) for key, value in txn.cursor(db=db(env, QUARANTINE))
                if not bytes(key).startswith(DISCARDED)]


def discard(env: lmdb.Environment, key: str, operator: str, now_ns: int | None = None) -> Quarantined:
    """Delete the original of quarantined ``key`` (see the module docstring); :class:`QuarantineError` otherwise."""
    unknown = QuarantineError(f"{key!r} is not a quarantined record (see: ouroactors storage quarantine list)")
    try:
        raw = key.encode()
    except UnicodeEncodeError:  # not text at all (a command line's undecodable bytes): no such key
        raise unknown from None
    if not raw or len(raw) > MAX_KEY_BYTES:  # no LMDB key is empty or longer: asked before LMDB refuses it
        raise unknown
    at = time.time_ns() if now_ns is None else now_ns

    def run(txn: lmdb.Transaction) -> Quarantined:
        copy = txn.get(raw, db=db(env, QUARANTINE))
        if copy is None or raw.startswith(DISCARDED):
            raise QuarantineError(f"{key!r} is not a quarantined record (see: ouroactors storage quarantine list)")
        found = _describe(txn, env, raw, bytes(copy))
        if found.db not in DISCARDABLE:
            raise QuarantineError(f"{key!r}: a {found.db!r} record is not discarded here (only "
                                  f"{', '.join(sorted(DISCARDABLE))}: a session's records are its history)")
        if found.state != "in place":
            raise QuarantineError(f"{key!r} is {found.state}: only an original that is still the quarantined bytes "
                                  "is discarded")
        txn.delete(found.original.encode(), db=db(env, found.db.encode()))
        txn.put(DISCARDED + raw, json.dumps({"by": operator, "at_ns": at}).encode(), db=db(env, QUARANTINE))
        return Quarantined(found.key, found.db, found.original, found.size, "discarded", operator, at)

    outcome = write(env, run)  # a QuarantineError raised inside aborts the transaction and reaches the caller
    if not isinstance(outcome, Committed):
        raise QuarantineError(f"{key!r}: the discard was not committed ({outcome.kind}: {outcome.reason})")
    return outcome.value
