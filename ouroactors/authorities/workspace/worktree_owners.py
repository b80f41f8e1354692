"""Who owns a worktree, who may remove it, and what an unreadable workspace record still holds (pure).

The workspace authority keeps two kinds of record in its ``workspace`` database: ``lease/<id>`` (a
:class:`~.lease_records.Lease`) and ``worktree/<sha256 of the path>`` (a :class:`WorktreeRecord`: the
session that owns the worktree). Everything here is a pure function of those records and the live
leases; the actor decodes, calls, commits, then acts and answers.

**Creating** (:func:`decide_create`): the worktree's path is known before git runs, so the owner
record is committed *before* the checkout exists (decide, persist, apply). Refused when the path is
another session's worktree, when another session's live lease or reservation overlaps the path
(the new checkout would appear inside its root), or when the record at that key is quarantined.

**Removing** (:func:`decide_cleanup`), in this order:

1. *Who.* The recorded owner's session, or a verified operator (the same credentials the grants
   authority checks: ``<data_dir>/operators.json``). A worktree with no readable owner record (made
   before owners were recorded, or its record is quarantined) is removed only by an operator.
   Session ids are asserted by the requester, as everywhere in this authority's protocol (``Acquire``
   trusts them too): this stops one session's cleanup of another's tree by mistake or bug; the
   operator path is the authenticated one.
2. *Held.* Refused — even for the owner or an operator — while any live lease or reservation
   overlaps the path (on it, inside it, or on an ancestor), or a quarantined lease record might: the
   holder releases (or its session ends) first. :class:`WorktreeHeld` names each holder.

**Corrupt records** (:func:`decode_entry`) fail closed: they are not guessed at and not dropped. An
unreadable lease record is :class:`Quarantined` and keeps holding what it may have held — its root
when the root field is still readable and canonical, otherwise *every* root (this authority refuses
all new acquisitions until an operator repairs it). Freeing its root instead would let another
session take a workspace a live (or recovering) session may still own: a silent double admission,
which is worse than an unavailable authority; refusing only new admissions keeps the existing
leases, reclaims and releases working. An unreadable worktree record holds no lease, but its
worktree has no known owner, so only an operator may remove it. An unknown key is treated like an
unreadable lease record (nothing says what it protects).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

import msgpack

from ...core.errors import OuroactorsError
from .lease_records import MODES, ConflictingRecoveryState, Lease, LeaseError, conflicts, lease_from_record
from .paths import is_canonical_form, overlaps

DB = "workspace"
LEASE_PREFIX = b"lease/"
WORKTREE_PREFIX = b"worktree/"
STATUSES = ("active", "reserved", "released")


@dataclass(frozen=True)
class WorktreeRecord:
    """A worktree the authority made, and the session that owns it."""

    path: str  # canonical
    repo: str  # the repository's top level, canonical
    session_id: str
    branch: str
    created_ns: int


@dataclass(frozen=True)
class Quarantined:
    """A record of the ``workspace`` database that does not decode (left in place, copied to ``quarantine``)."""

    key: str  # e.g. "lease/lease-0000000000000001"
    detail: str
    root: str | None = None  # the root it may hold, when still readable; None: unknown
    holds_leases: bool = True  # False: a worktree record (it holds no root)

    @property
    def where(self) -> str:
        return f"{DB}/{self.key}"

    def may_hold(self, path: str) -> bool:
        return self.holds_leases and (self.root is None or overlaps(self.root, path))


# -- errors (refusals: nothing changed) -------------------------------------------------------------


class WorktreeRefused(OuroactorsError):
    """A worktree request refused by the ownership rules; nothing changed."""


class NotWorktreeOwner(WorktreeRefused, PermissionError):
    def __init__(self, path: str, owner: str | None, requester: str | None, reason: str = "") -> None:
        self.path, self.owner, self.requester = path, owner, requester
        who = f"session {requester!r}" if requester is not None else "a request naming no session"
        if reason:
            text = f"worktree {path}: {reason}"
        elif owner is None:
            text = f"worktree {path} has no recorded owner: only a verified operator may remove it ({who} asked)"
        else:
            text = f"worktree {path} is owned by session {owner!r}: {who} may not remove it (nor create it)"
        super().__init__(text)


class WorktreeHeld(WorktreeRefused):
    def __init__(self, path: str, holders: Iterable[Lease], quarantined: Iterable[str] = ()) -> None:
        self.path, self.holders, self.quarantined = path, list(holders), list(quarantined)
        named = [f"session {h.session_id!r} holds {h.mode} on {h.root!r} ({h.status}, lease {h.lease_id})"
                 for h in self.holders]
        named += [f"quarantined record {q} may hold it" for q in self.quarantined]
        super().__init__(f"worktree {path} is in use: {'; '.join(named)}; release it first")


class CorruptRecordHolds(LeaseError):
    """A new acquisition refused because an unreadable lease record may hold its root."""

    def __init__(self, where: str, root: str | None, requested: str, detail: str) -> None:
        self.where, self.root, self.requested, self.detail = where, root, requested, detail
        held = f"root {root!r}" if root is not None else "an unknown root (so every root)"
        super().__init__(f"corrupt record {where} ({detail}; quarantined) may hold {held}: "
                         f"{requested!r} is not admitted until an operator repairs it")


# -- records ------------------------------------------------------------------------------------------


def worktree_key(path: str) -> bytes:
    """``worktree/<sha256 hex>``: a path may be longer than an LMDB key (511 bytes)."""
    return WORKTREE_PREFIX + hashlib.sha256(path.encode()).hexdigest().encode()


def worktree_record(record: WorktreeRecord) -> dict[str, object]:
    return asdict(record)


def worktree_from_record(data: object) -> WorktreeRecord:
    names = {f.name: f.type for f in fields(WorktreeRecord)}
    if not isinstance(data, Mapping) or set(data) != set(names):
        raise ConflictingRecoveryState(f"a worktree record must be a map of {sorted(names)}")
    record = WorktreeRecord(**{str(k): v for k, v in data.items()})
    if not (all(isinstance(getattr(record, k), str) and getattr(record, k) for k in ("path", "repo", "session_id",
                                                                                     "branch"))
            and is_canonical_form(record.path) and is_canonical_form(record.repo)
            and isinstance(record.created_ns, int) and not isinstance(record.created_ns, bool)):
        raise ConflictingRecoveryState(f"invalid worktree record {dict(data)!r}")
    return record


def _valid_lease(lease: Lease, key: bytes) -> str | None:
    """Why a decoded lease cannot be trusted (None: it can)."""
    for name in ("lease_id", "session_id", "owner", "capability_sha256", "request_sha256", "capability_sealed"):
        if not isinstance(getattr(lease, name), str):
            return f"{name} is not a string"
    if key != LEASE_PREFIX + lease.lease_id.encode():
        return f"its lease_id {lease.lease_id!r} is not its key's"
    if not isinstance(lease.root, str) or not is_canonical_form(lease.root):
        return f"root {lease.root!r} is not canonical"
    if lease.mode not in MODES or lease.status not in STATUSES:
        return f"mode {lease.mode!r} / status {lease.status!r} unknown"
    for name in ("fencing_token", "acquired_ns"):
        value = getattr(lease, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            return f"{name} {value!r} is not a non-negative int"
    return None


def decode_entry(key: bytes, raw: bytes) -> Lease | WorktreeRecord | Quarantined:
    """One record of the ``workspace`` database, or :class:`Quarantined` naming why (never raises)."""
    name = key.decode(errors="replace")
    try:
        data: Any = msgpack.unpackb(raw, raw=False)
    except Exception as exc:  # msgpack raises several types (FormatError, ExtraData, ValueError, …)
        data, undecodable = None, f"not msgpack: {type(exc).__name__}: {exc}"
    else:
        undecodable = ""
    if key.startswith(WORKTREE_PREFIX):
        if undecodable:
            return Quarantined(name, undecodable, holds_leases=False)
        try:
            return worktree_from_record(data)
        except (ConflictingRecoveryState, TypeError) as exc:
            return Quarantined(name, str(exc), holds_leases=False)
    readable = data.get("root") if isinstance(data, Mapping) else None
    root = readable if isinstance(readable, str) and is_canonical_form(readable) else None
    if not key.startswith(LEASE_PREFIX):
        return Quarantined(name, "not a key this authority writes", root=None)
    if undecodable:
        return Quarantined(name, undecodable, root=None)
    try:
        lease = lease_from_record(data)
    except ConflictingRecoveryState as exc:
        return Quarantined(name, str(exc), root=root)
    why = _valid_lease(lease, key)
    return lease if why is None else Quarantined(name, why, root=root)


# -- decisions ----------------------------------------------------------------------------------------


def check_admission(root: str, quarantined: Iterable[Quarantined]) -> None:
    """Refuse a *new* lease on ``root`` that an unreadable lease record may already hold."""
    for q in quarantined:
        if q.may_hold(root):
            raise CorruptRecordHolds(q.where, q.root, root, q.detail)


def _holders(path: str, live: Iterable[Lease], quarantined: Iterable[Quarantined],
             but_session: str | None = None) -> tuple[list[Lease], list[str]]:
    leases = [x for x in live if x.live and conflicts(x, path, "exclusive") and x.session_id != but_session]
    return leases, [q.where for q in quarantined if q.may_hold(path)]


def decide_create(path: str, session_id: str, record: WorktreeRecord | None, *, live: Iterable[Lease],
                  quarantined: Iterable[Quarantined]) -> None:
    """May ``session_id`` create its worktree at ``path``? (None: yes; else a refusal.)"""
    quarantined = list(quarantined)
    key = worktree_key(path).decode()
    bad = next((q for q in quarantined if q.key == key), None)
    if bad is not None:
        raise NotWorktreeOwner(path, None, session_id,
                               f"its owner record {bad.where} is corrupt (quarantined; {bad.detail}); "
                               "an operator repairs it first")
    if record is not None and record.session_id != session_id:
        raise NotWorktreeOwner(path, record.session_id, session_id)
    leases, unknown = _holders(path, live, quarantined, but_session=session_id)
    if leases or unknown:
        raise WorktreeHeld(path, leases, unknown)


def decide_cleanup(path: str, record: WorktreeRecord | None, *, session_id: str | None, operator: str | None,
                   live: Iterable[Lease], quarantined: Iterable[Quarantined]) -> str:
    """May this request remove the worktree at ``path``? Returns who authorised it (``session:<id>`` or
    ``operator:<name>``); raises :class:`NotWorktreeOwner` or :class:`WorktreeHeld` otherwise.

    ``operator`` must already be verified by the caller (a name a request merely asserts proves nothing).
    """
    if operator is None:
        if record is None or session_id != record.session_id:
            raise NotWorktreeOwner(path, None if record is None else record.session_id, session_id)
        who = f"session:{session_id}"
    else:
        who = f"operator:{operator}"
    leases, unknown = _holders(path, live, quarantined)
    if leases or unknown:
        raise WorktreeHeld(path, leases, unknown)
    return who
