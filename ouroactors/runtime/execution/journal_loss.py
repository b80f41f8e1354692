"""What a journal writer lost, and the durable marker that keeps it for the session's next writer.

A journal append can fail while the session goes on (the ledger is the gate, not the journal): its records are then
*lost*, and the next write that commits first writes a ``gap`` record naming them (:class:`Lost`: how many, of which
kinds, when, why). Kept only in the writer's memory, that account dies with the writer's process: a runtime killed
between the failed append and its next write would leave a journal that never says it lost anything — and when the
failure was the journal's part of a ledger transaction that committed (its nested puts failed), the ledger then
holds a ``started`` entry whose ``tool_call`` the journal silently lacks.

**The marker.** So a loss is also written down where the session's next writer — this one, or the runtime or
coordinator that writes after it — reads it: ``journal_anchor``'s ``session ‖ 0x04`` (:func:`marker_key`), holding
the writer's whole account and a token naming the writer. It is put

* in the same outer transaction, when only the journal's nested puts failed (the ledger's commit then carries the
  marker with its entry: the two are durable together);
* in a transaction of its own, right after an outer transaction that carried the journal's records was rejected.

Every write reads the marker inside its transaction (:meth:`~.journal.Journal._plan`, one ``get`` beside the
head's): a marker of *another* writer is merged into the gap record it writes first (once: :func:`absorb_marker`);
its own marker says nothing its memory does not, and is only deleted. Either way the marker is deleted in the
transaction that writes the gap, so a loss is named exactly once. A marker that does not decode is itself a loss: the
gap says so (never silent, never a crash). What no marker can cover: a loss whose marker's own commit failed too (a
full map or a dead disk fails both), and a commit whose outcome is unknown when the writer dies (its records may or
may not be there; the next writer cannot tell from a marker what it never wrote), and a record that could not be
encoded when it was staged (no transaction is at hand there; the writer's next write names it, if it lives to make
one). The other way round, a loss may be
named twice, never not at all: when another writer names a marker while the writer that lost the records still lives
(the coordinator ending a turn beside a runtime that has not gone yet), that writer's next gap names it again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgpack

MAX_GAP_KINDS = 32
MARKER_VERSION = 1
_MAX_REASON = 500


def lost_of(items: Iterable[tuple[str, int]], carried: Lost | None, reason: str) -> Lost:
    """What a batch that did not land lost: the gap it carried (``carried``), and its own records (kind, at)."""
    lost = Lost()
    if carried is not None:
        lost.merge(carried)
    for kind, at in items:
        lost.add(kind, at, reason)
    lost.reason = reason
    return lost


def gap_fields(lost: Lost, seq: int) -> dict[str, Any]:
    """The fields of the ``gap`` record (at ``seq``) that names ``lost``."""
    return {"lost_records": lost.count, "lost_kinds": dict(sorted(lost.kinds.items())), "reason": lost.reason,
            "lost_from_seq": seq, "first_lost_at": lost.first_at, "last_lost_at": lost.last_at}


def marker_key(sid: bytes) -> bytes:
    """The session's gap marker, in ``journal_anchor`` (``0x01`` is its head, ``0x02``/``0x03`` its snapshots)."""
    return sid + b"\x04"


@dataclass
class Lost:
    """Records a writer failed to write: named by the next ``gap`` record."""

    count: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    first_at: int | None = None
    last_at: int | None = None
    reason: str = ""

    def add(self, kind: str, at: int | None, reason: str, n: int = 1) -> None:
        self.count += n
        if kind in self.kinds or len(self.kinds) < MAX_GAP_KINDS:
            self.kinds[kind] += n
        else:
            self.kinds["(other)"] += n
        if at is not None:
            self.first_at = at if self.first_at is None else min(self.first_at, at)
            self.last_at = at if self.last_at is None else max(self.last_at, at)
        self.reason = reason

    def merge(self, other: Lost) -> None:
        for kind, n in other.kinds.items():
            self.add(kind, None, other.reason or self.reason, n)
        for at in (other.first_at, other.last_at):
            if at is not None:
                self.first_at = at if self.first_at is None else min(self.first_at, at)
                self.last_at = at if self.last_at is None else max(self.last_at, at)

    def copy(self) -> Lost:
        return Lost(self.count, Counter(self.kinds), self.first_at, self.last_at, self.reason)


def encode_marker(lost: Lost, token: bytes) -> bytes:
    """The marker's bytes: ``[version, token, kinds, first_at, last_at, reason]`` (msgpack; the count is the kinds'
    sum)."""
    return msgpack.packb([MARKER_VERSION, token, dict(lost.kinds), lost.first_at, lost.last_at,
                          lost.reason[:_MAX_REASON]], use_bin_type=True)


def decode_marker(raw: bytes | memoryview) -> tuple[bytes | None, Lost]:
    """``(token, lost)`` of a marker; one that does not decode is a loss of unknown records (token None: nobody's),
    so the gap that replaces it still says something was lost."""
    try:
        version, token, kinds, first_at, last_at, reason = msgpack.unpackb(bytes(raw), raw=False)
        if (version != MARKER_VERSION or not isinstance(token, bytes) or not isinstance(kinds, dict) or not kinds
                or not all(isinstance(k, str) and type(n) is int and n > 0 for k, n in kinds.items())
                or not all(at is None or type(at) is int for at in (first_at, last_at))
                or not isinstance(reason, str)):
            raise ValueError("unexpected fields")
    except Exception as exc:  # any bytes at all: a marker is read, never trusted to be well formed
        lost = Lost()
        lost.add("(unknown)", None, f"a gap marker that does not decode ({type(exc).__name__}): an earlier writer "
                 "lost records it could not name")
        return None, lost
    lost = Lost()  # what a marker says is bounded here as when it was written: ≤ MAX_GAP_KINDS kinds, a short reason
    reason = reason[:_MAX_REASON]
    for kind, n in kinds.items():
        lost.add(kind[:_MAX_REASON], None, reason, n)
    lost.first_at, lost.last_at = first_at, last_at
    return token, lost


def absorb_marker(lost: Lost, raw: Any, token: bytes, absorbed: set[bytes]) -> bool:
    """Fold the marker ``raw`` (None: there is none) into ``lost`` unless ``token`` (this writer) wrote it or its
    account is in this writer's memory already (``absorbed``: the markers merged before, by their writer's token, or
    their bytes when they do not decode); True when there is a marker, to be deleted by the write that names it.

    ``absorbed`` is what keeps a loss named once: a write that merged a marker and then failed keeps the account in
    memory while the marker stays on disk (its delete did not land either), and the next write must not merge it
    again."""
    if raw is None:
        return False
    writer, theirs = decode_marker(raw)
    name = writer if writer is not None else bytes(raw)
    if writer != token and name not in absorbed:
        lost.merge(theirs)
        absorbed.add(name)
    return True


__all__ = ["MAX_GAP_KINDS", "Lost", "absorb_marker", "decode_marker", "encode_marker", "gap_fields", "lost_of",
           "marker_key"]
