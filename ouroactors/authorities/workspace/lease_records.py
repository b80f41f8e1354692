"""Leases as records: the lease, its persisted form, the decisions :class:`~.leases.LeaseTable` makes about leases,
the errors it raises, and the capability sealed under an acquisition's request id.

Split from :mod:`.leases` (which re-exports every name here) so that the state machine there reads on its own;
everything here is plain data and pure functions over it.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Literal

from ...core.errors import OuroactorsError
from .paths import overlaps

Mode = Literal["exclusive", "shared_read"]
Status = Literal["active", "reserved", "released"]
SessionState = Literal["terminal", "active", "unknown"]
MODES: tuple[Mode, ...] = ("exclusive", "shared_read")
SESSION_STATES: tuple[SessionState, ...] = ("terminal", "active", "unknown")
MAX_TOMBSTONES = 1000
CAPABILITY_BYTES = 32
MIN_REQUEST_ID = 16  # characters: an idempotency key unlocks the capability, so it must not be guessable
MAX_REQUEST_ID = 256
NO_OWNER = ""  # a reservation rebuilt at boot has no live owner and no capability


class LeaseError(OuroactorsError, ValueError):
    """A lease request was refused; nothing changed."""


class LeaseConflict(LeaseError):
    def __init__(self, root: str, mode: str, holders: Iterable[Lease]) -> None:
        self.root, self.mode, self.holders = root, mode, list(holders)
        named = "; ".join(
            f"session {h.session_id!r} holds {h.mode} on {h.root!r} ({h.status}, lease {h.lease_id})"
            for h in self.holders)
        super().__init__(f"workspace conflict: {mode} on {root!r} overlaps {named}")

    def __reduce__(self) -> tuple[object, ...]:  # answers cross processes pickled
        return (type(self), (self.root, self.mode, self.holders))


# The other refusals (each a LeaseError; nothing changed when one is raised):
class ReservationPending(LeaseError): ...  # the requester's own conflicting reservation: reclaim it
class LeaseNotFound(LeaseError): ...  # never granted, or its tombstone was evicted
class NotLeaseOwner(LeaseError): ...  # wrong owner or capability, or the lease is reserved
class NoReservation(LeaseError): ...  # reclaim by a session that holds no reservation
class ReservationMismatch(LeaseError): ...  # reclaim of another root or mode than the one reserved
class NotReservationOwner(LeaseError): ...  # reclaim without proof of being that session's owner
class ConflictingRecoveryState(LeaseError): ...  # boot records (or loaded leases) that cannot all hold
class StaleFence(LeaseError): ...  # a write whose fencing token is not the active holder's
class StaleDecision(LeaseError): ...  # a decision made on an older table version; decide again
class IdempotencyConflict(LeaseError): ...  # a request_id reused with other arguments (root or mode)
class RequestCompleted(LeaseError): ...  # a request_id whose lease was released: use a new one


@dataclass(frozen=True)
class Lease:
    """One lease record (also the persisted form; ``status == 'released'`` is a tombstone)."""

    lease_id: str
    root: str
    mode: Mode
    session_id: str
    owner: str
    fencing_token: int
    acquired_ns: int
    capability_sha256: str
    status: Status = "active"
    # Idempotent acquisition (records written before it existed decode with the defaults: no key).
    request_sha256: str = ""  # request_digest(session_id, request_id) of the request that made it
    capability_sealed: str = field(default="", repr=False)  # hex: the capability sealed under that request_id

    @property
    def live(self) -> bool:
        return self.status in ("active", "reserved")


def lease_record(lease: Lease) -> dict[str, object]:
    """The persisted form of a lease (a msgpack map of its fields)."""
    return asdict(lease)


def lease_from_record(record: Mapping[str, object]) -> Lease:
    """A lease from its persisted form. Records written before idempotent acquisition existed (no
    ``request_sha256`` / ``capability_sealed``) decode with the defaults — the format only grew
    optional fields, so no schema version changes. An unknown or missing required field raises
    :class:`ConflictingRecoveryState` (fail closed: a record this code cannot read is not guessed at)."""
    if not isinstance(record, Mapping):
        raise ConflictingRecoveryState(f"a lease record must be a map, got {type(record).__name__}")
    try:
        return Lease(**{str(k): v for k, v in record.items()})  # type: ignore[arg-type]
    except TypeError as exc:
        raise ConflictingRecoveryState(f"undecodable lease record {dict(record)!r}: {exc}") from None


def conflicts(a: Lease, root: str, mode: str) -> bool:
    """Would ``a`` conflict with a lease of ``mode`` on ``root``? (overlap, unless both shared_read)."""
    return overlaps(a.root, root) and not (a.mode == "shared_read" and mode == "shared_read")


def invariant_violations(leases: Iterable[Lease]) -> list[tuple[Lease, Lease]]:
    """Pairs of live leases that break invariant 5 (for tests and the fault-injection checkers)."""
    live = [lease for lease in leases if lease.live]
    return [(a, b) for i, a in enumerate(live) for b in live[i + 1:] if conflicts(a, b.root, b.mode)]


# -- decisions --------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Decision:
    """What to persist (``changes``: upserted records, ``next_token``) and apply, bound to ``base_version``."""

    changes: tuple[Lease, ...]
    next_token: int
    base_version: int


@dataclass(frozen=True, kw_only=True)
class Acquired(Decision):
    lease: Lease
    capability: bytes = field(repr=False)  # returned once; never persist the decision itself
    replayed: bool = False  # answered from an earlier request with the same request_id


@dataclass(frozen=True, kw_only=True)
class Reclaimed(Acquired):
    reservation: Lease  # the reservation it replaces (now a tombstone)


@dataclass(frozen=True, kw_only=True)
class Released(Decision):
    lease: Lease
    already: bool  # True: it was released before (idempotent answer, no changes)


@dataclass(frozen=True, kw_only=True)
class Transitioned(Decision):
    """owner_died / session_ended / rebuild: which leases became reserved, which were released."""

    reserved: tuple[Lease, ...] = ()
    released: tuple[Lease, ...] = ()


def capability_digest(capability: bytes) -> str:
    return hashlib.sha256(capability).hexdigest()


def request_digest(session_id: str, request_id: str) -> str:
    """What a lease keeps of the request that made it: a digest bound to the session (the key itself
    is never stored — it unseals the capability)."""
    parts = [b"ouroactors.workspace.request", session_id.encode(), request_id.encode()]
    return hashlib.sha256(b"".join(len(p).to_bytes(4, "big") + p for p in parts)).hexdigest()


def _pad(request_id: str, lease: Lease) -> bytes:
    message = b"\0".join([b"ouroactors.workspace.capability", lease.lease_id.encode(), lease.session_id.encode()])
    return hmac.new(request_id.encode(), message, hashlib.sha256).digest()


def seal_capability(capability: bytes, request_id: str, lease: Lease) -> str:
    """The capability XOR an HMAC keyed by the request_id: only a holder of the key can unseal it."""
    if len(capability) != CAPABILITY_BYTES:
        raise LeaseError(f"a capability has {CAPABILITY_BYTES} bytes, got {len(capability)}")
    return bytes(a ^ b for a, b in zip(capability, _pad(request_id, lease), strict=True)).hex()


def unseal_capability(lease: Lease, request_id: str) -> bytes:
    """The capability ``lease`` was granted with, unsealed by ``request_id`` and checked against its digest."""
    try:
        sealed = bytes.fromhex(lease.capability_sealed)
    except ValueError:
        sealed = b""
    if len(sealed) != CAPABILITY_BYTES:
        raise LeaseError(f"lease {lease.lease_id!r} keeps no sealed capability to answer a repeated request with")
    capability = bytes(a ^ b for a, b in zip(sealed, _pad(request_id, lease), strict=True))
    if not hmac.compare_digest(capability_digest(capability), lease.capability_sha256):
        raise LeaseError(f"lease {lease.lease_id!r}: the sealed capability does not match its digest")
    return capability
