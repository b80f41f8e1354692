"""Workspace leases as a pure state machine: decide, persist, then apply.

A lease admits one session's owner (an opaque actor id) to a canonical root, ``exclusive`` or
``shared_read``; roots overlap when equal or one is a ``/``-boundary prefix of the other, and an
overlap conflicts unless both are ``shared_read``. **Invariant 5**: no two live (active or reserved)
leases conflict; a reservation is only reclaimed by its own session's recovering owner.

Every operation on :class:`LeaseTable` is a query returning a :class:`Decision` (or raising, with
nothing changed); :meth:`LeaseTable.apply` is the only mutation. A decision carries the records to
upsert (``changes``; a ``released`` record is a tombstone) and the new ``next_token``, so the actor
commits them first and applies only what is durable. It is bound to the table version it was made
on: applying it to a table that moved on raises :class:`StaleDecision` instead of breaking the invariant.

* **acquire** checks active leases *and* reservations; the refusal (:class:`LeaseConflict`) names each
  holder. The requester's own conflicting reservation must be reclaimed (:class:`ReservationPending`).
* **release** by the owner or the one-time capability (32 random bytes returned once; only its SHA-256
  is kept). Tombstones (newest 1,000) make a repeat idempotent. A *reserved* lease is not released
  this way — a zombie owner must not free it; it ends by ``reclaim`` or ``session_ended``.
* **owner_died**, **session_ended**, **reclaim** and **rebuild** (boot) make and end reservations: see
  :mod:`.lease_recovery`, mixed into :class:`LeaseTable`.
* **fencing**: tokens come from ``next_token``, which only grows (the lead persists it).
  ``check_fence`` admits a write only with the token of the *active* exclusive lease covering the
  path, so a zombie's late write (its lease reserved, reclaimed or released) gets :class:`StaleFence`.
* **idempotent acquisition** (``request_id``): an acquire whose answer was lost (the lease committed,
  then a crash or a timeout) is asked again with the same client-chosen key and answered from the
  lease it created; see :meth:`LeaseTable.acquire` for the rules and the capability decision.

Node-local: owners are actors on this node; this is admission control, not a distributed lock. The lease record,
the decisions, the errors and the sealed capability live in :mod:`.lease_records` (importable from here too);
the argument checks in :mod:`.lease_checks`.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import cast

from .lease_checks import _authorised, _check_name, _check_request_id, _check_root, _one_of
from .lease_records import (
    CAPABILITY_BYTES,
    MAX_REQUEST_ID,
    MAX_TOMBSTONES,
    MIN_REQUEST_ID,
    MODES,
    NO_OWNER,
    SESSION_STATES,
    Acquired,
    ConflictingRecoveryState,
    Decision,
    IdempotencyConflict,
    Lease,
    LeaseConflict,
    LeaseError,
    LeaseNotFound,
    Mode,
    NoReservation,
    NotLeaseOwner,
    NotReservationOwner,
    Reclaimed,
    Released,
    RequestCompleted,
    ReservationMismatch,
    ReservationPending,
    SessionState,
    StaleDecision,
    StaleFence,
    Status,
    Transitioned,
    capability_digest,
    conflicts,
    invariant_violations,
    lease_from_record,
    lease_record,
    request_digest,
    seal_capability,
    unseal_capability,
)
from .lease_recovery import LeaseRecovery
from .paths import under

__all__ = [  # the table, and (re-exported) everything of .lease_records it works with
    "CAPABILITY_BYTES", "MAX_REQUEST_ID", "MAX_TOMBSTONES", "MIN_REQUEST_ID", "MODES", "NO_OWNER", "SESSION_STATES",
    "Acquired", "ConflictingRecoveryState", "Decision", "IdempotencyConflict", "Lease", "LeaseConflict",
    "LeaseError", "LeaseNotFound", "LeaseTable", "Mode", "NoReservation", "NotLeaseOwner", "NotReservationOwner",
    "Reclaimed", "Released", "RequestCompleted", "ReservationMismatch", "ReservationPending", "SessionState",
    "StaleDecision", "StaleFence", "Status", "Transitioned", "capability_digest", "conflicts",
    "invariant_violations", "lease_from_record", "lease_record", "request_digest", "seal_capability",
    "unseal_capability",
]


class LeaseTable(LeaseRecovery):
    """The node's leases. Queries return decisions; :meth:`apply` is the only mutation."""

    def __init__(self, *, next_token: int = 1, leases: Iterable[Lease] = (), tombstones: Iterable[Lease] = (),
                 max_tombstones: int = MAX_TOMBSTONES,
                 random_bytes: Callable[[int], bytes] = secrets.token_bytes) -> None:
        self.next_token = next_token
        self.version = 0
        self.max_tombstones = max_tombstones
        self._random_bytes = random_bytes
        self.leases: dict[str, Lease] = {}
        self.tombstones: dict[str, Lease] = {}  # insertion order = release order; oldest evicted first
        for lease in leases:
            _check_root(lease.root)
            _one_of(lease.mode, MODES, "lease mode")
            if lease.status not in ("active", "reserved") or lease.lease_id in self.leases:
                raise ConflictingRecoveryState(f"bad live lease record {lease!r}")
            self.leases[lease.lease_id] = lease
        for lease in tombstones:
            if lease.status != "released":
                raise ConflictingRecoveryState(f"tombstone {lease.lease_id!r} has status {lease.status!r}")
            self._bury(lease)
        if bad := invariant_violations(self.leases.values()):
            a, b = bad[0]
            raise ConflictingRecoveryState(f"loaded leases {a.lease_id!r} and {b.lease_id!r} overlap")
        keyed = [x.request_sha256 for x in self.leases.values() if x.request_sha256]
        if len(keyed) != len(set(keyed)):
            raise ConflictingRecoveryState("loaded leases: two live leases were made by the same request")
        top = max((x.fencing_token for x in [*self.leases.values(), *self.tombstones.values()]), default=0)
        if next_token <= top:
            raise ConflictingRecoveryState(f"next_token {next_token} is not above the largest token {top}")

    # -- queries ------------------------------------------------------------------------------------

    def live(self) -> list[Lease]:
        return list(self.leases.values())  # active and reserved

    def get(self, lease_id: str) -> Lease | None:
        return self.leases.get(lease_id) or self.tombstones.get(lease_id)

    def covering(self, path: str) -> list[Lease]:
        """Live leases whose root is ``path`` or an ancestor of it."""
        return [lease for lease in self.leases.values() if under(path, lease.root)]

    def check_invariant(self) -> None:
        if bad := invariant_violations(self.leases.values()):
            raise AssertionError(f"invariant 5 broken: {bad}")

    # -- operations (pure: return a decision) --------------------------------------------------------

    def acquire(self, root: str, mode: str, session_id: str, owner: str, now_ns: int, *,
                request_id: str | None = None) -> Acquired:
        """A new active lease for ``owner`` (or a refusal naming who holds what).

        **Idempotency key.** ``request_id`` is chosen by the client, once per lease it wants, and sent
        again with every retry of that request. The lease records its digest (bound to the session:
        :func:`request_digest`). Asked again while the lease it made is live, with the same session,
        root and mode:

        * **active** → the same grant again, with no change: same lease id, fencing token and the
          capability the first answer carried (``replayed=True``). The capability is kept only
          *sealed* under the request_id (XOR an HMAC keyed by it), never in the clear: the table
          still holds nothing that lets a reader of the durable records forge a capability.
        * **reserved** (the authority restarted, or the owner was lost, after the grant) → the
          reservation is reclaimed for the requester, exactly as a :meth:`reclaim` would do: a new
          lease id, a *larger* fencing token and a new capability, still keyed by the same
          request_id. Fencing wins over sameness: whoever got the first answer may be a zombie
          holding the old token, and its writes must stay refused.

        A request_id reused with another root or mode raises :class:`IdempotencyConflict`; one whose
        lease has been released raises :class:`RequestCompleted` (a late retry must not take the
        root again behind its own release). Both change nothing. Once the tombstone is evicted (the
        newest ``max_tombstones`` are kept) the key is forgotten and acquires afresh.

        **Why re-issuing the capability is safe.** The capability is the proof of being the
        session's owner; a replay hands it to anyone presenting the same session id *and*
        request_id. So the request_id is a secret exactly as strong as the capability: the client
        must make it unguessable (at least 128 random bits, or an HMAC under a secret of its own:
        e.g. ``secrets.token_urlsafe(16)``), keep it with its durable session state (where it keeps
        the capability anyway) and never log it. Keys shorter than :data:`MIN_REQUEST_ID` characters
        are refused, and this module never puts one in an error message. Binding the digest to the
        session means another session cannot even probe a key: with its session id it matches nothing.
        """
        _check_root(root)
        checked = cast(Mode, _one_of(mode, MODES, "lease mode"))
        _check_name("session_id", session_id)
        _check_name("owner", owner)
        if not isinstance(now_ns, int) or now_ns < 0:
            raise LeaseError(f"now_ns must be a non-negative int, got {now_ns!r}")
        if request_id is not None:
            earlier = self.request_lease(session_id, root, checked, request_id)
            if earlier is not None and earlier.status == "active":
                return self._replay(earlier, request_id)
            if earlier is not None:  # reserved: reclaimed for the holder of the key (new token)
                gone = replace(earlier, status="released")
                new = self._new_active(root, checked, session_id, owner, now_ns, changes=(gone,),
                                       request_id=request_id)
                return Reclaimed(changes=new.changes, next_token=new.next_token, base_version=new.base_version,
                                 lease=new.lease, capability=new.capability, reservation=gone, replayed=True)
        clashing = [x for x in self.leases.values() if conflicts(x, root, checked)]
        others = [x for x in clashing if not (x.status == "reserved" and x.session_id == session_id)]
        if others:
            raise LeaseConflict(root, checked, others)
        if clashing:
            own = clashing[0]
            raise ReservationPending(
                f"session {session_id!r} holds a reservation ({own.mode} on {own.root!r}, lease {own.lease_id}) "
                f"that conflicts with {checked} on {root!r}; reclaim it instead of acquiring")
        return self._new_active(root, checked, session_id, owner, now_ns, changes=(), request_id=request_id)

    def request_lease(self, session_id: str, root: str, mode: str, request_id: str) -> Lease | None:
        """The live lease ``request_id`` made for ``session_id`` (None: the key is new here).

        Raises :class:`IdempotencyConflict` when that lease is for another root or mode, and
        :class:`RequestCompleted` when the key's lease has been released (a tombstone).
        """
        _check_request_id(request_id)
        _check_name("session_id", session_id)
        digest = request_digest(session_id, request_id)
        found = next((x for x in self.leases.values() if x.request_sha256 == digest), None)
        buried = None if found is not None else next(
            (x for x in reversed(self.tombstones.values()) if x.request_sha256 == digest), None)
        earlier = found or buried
        if earlier is None:
            return None
        if (earlier.root, earlier.mode) != (root, mode):
            raise IdempotencyConflict(
                f"session {session_id!r}: this request_id was used for {earlier.mode} on {earlier.root!r} "
                f"(lease {earlier.lease_id}), not {mode} on {root!r}; a new request needs a new request_id")
        if found is None:
            raise RequestCompleted(
                f"session {session_id!r}: the lease this request_id made ({earlier.lease_id}, {earlier.mode} on "
                f"{earlier.root!r}) has been released (or reclaimed without this key); acquire again with a new "
                "request_id")
        return found

    def replay(self, session_id: str, root: str, mode: str, request_id: str) -> Acquired | None:
        """The same grant again when ``request_id`` made an *active* lease of ``root``/``mode`` (no
        change); None when it made none or its lease is reserved; refusals as :meth:`request_lease`."""
        earlier = self.request_lease(session_id, root, mode, request_id)
        return self._replay(earlier, request_id) if earlier is not None and earlier.status == "active" else None

    def _replay(self, lease: Lease, request_id: str) -> Acquired:
        return Acquired(changes=(), next_token=self.next_token, base_version=self.version, lease=lease,
                        capability=unseal_capability(lease, request_id), replayed=True)

    def release(self, lease_id: str, *, owner: str | None = None, capability: bytes | None = None) -> Released:
        if owner is None and capability is None:
            raise NotLeaseOwner(f"release of {lease_id!r} needs the owner or the release capability")
        lease = self.get(lease_id)
        if lease is None:
            raise LeaseNotFound(f"no lease {lease_id!r} (never granted, or its tombstone was evicted)")
        if not _authorised(lease, owner, capability):
            raise NotLeaseOwner(f"lease {lease_id!r} is not released by this owner or capability")
        if lease.status == "reserved":
            raise NotLeaseOwner(
                f"lease {lease_id!r} is reserved for session {lease.session_id!r}'s recovering owner; "
                "it is reclaimed by that owner or ends with the session")
        already = lease.status == "released"
        done = lease if already else replace(lease, status="released")
        return Released(changes=() if already else (done,), next_token=self.next_token, base_version=self.version,
                        lease=done, already=already)

    def check_fence(self, path: str, token: int, *, write: bool = True) -> Lease:
        """Admit a tool's write (or read, ``write=False``) under ``path`` with fencing ``token``.

        Accepted only when an *active* lease covering ``path`` carries exactly this token (and is
        exclusive, for a write). Anything else — a lower token than the current holder's (the zombie
        case), a reserved or released lease, no lease at all — raises :class:`StaleFence`.
        """
        _check_root(path)
        covering = self.covering(path)
        for lease in covering:
            if lease.fencing_token == token and lease.status == "active":
                if write and lease.mode != "exclusive":
                    raise StaleFence(f"token {token} is a shared_read lease on {lease.root!r}: no writes to {path!r}")
                return lease
        if not covering:
            raise StaleFence(f"no live lease covers {path!r} (token {token} refused)")
        holders = ", ".join(f"session {x.session_id!r} {x.mode} {x.status} token {x.fencing_token}" for x in covering)
        newest = max(x.fencing_token for x in covering)
        why = "lower than the current holder's" if token < newest else "not an active lease's token"
        raise StaleFence(f"token {token} for {path!r} is {why} ({holders})")

    # -- the only mutation ----------------------------------------------------------------------------

    def apply(self, decision: Decision) -> None:
        if decision.base_version != self.version:
            raise StaleDecision(f"decision made at version {decision.base_version}, table is at {self.version}")
        if decision.next_token < self.next_token:
            raise StaleDecision(f"decision would move next_token back ({decision.next_token} < {self.next_token})")
        if not decision.changes and decision.next_token == self.next_token:
            return  # nothing to do (idempotent answers do not invalidate other pending decisions)
        for lease in decision.changes:
            if lease.live:
                self.leases[lease.lease_id] = lease
            else:
                self.leases.pop(lease.lease_id, None)
                self._bury(lease)
        self.next_token = decision.next_token
        self.version += 1

    def _new_active(self, root: str, mode: Mode, session_id: str, owner: str, now_ns: int,
                    changes: tuple[Lease, ...], request_id: str | None = None) -> Acquired:
        token = self.next_token
        capability = self._random_bytes(CAPABILITY_BYTES)
        if len(capability) != CAPABILITY_BYTES:
            raise LeaseError(f"random source returned {len(capability)} bytes, wanted {CAPABILITY_BYTES}")
        lease = Lease(lease_id=f"lease-{token:016x}", root=root, mode=mode, session_id=session_id, owner=owner,
                      fencing_token=token, acquired_ns=now_ns, capability_sha256=capability_digest(capability))
        if request_id is not None:
            lease = replace(lease, request_sha256=request_digest(session_id, request_id),
                            capability_sealed=seal_capability(capability, request_id, lease))
        return Acquired(changes=(*changes, lease), next_token=token + 1, base_version=self.version,
                        lease=lease, capability=capability)

    def _bury(self, lease: Lease) -> None:
        self.tombstones.pop(lease.lease_id, None)
        self.tombstones[lease.lease_id] = lease
        while len(self.tombstones) > self.max_tombstones:
            del self.tombstones[next(iter(self.tombstones))]
