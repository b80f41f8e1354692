"""Argument checks of the lease table: every operation refuses a malformed argument with :class:`LeaseError`,
changing nothing, and a release is authorised by the owner or the one-time capability.

Roots must already be canonical (:func:`~.paths.is_canonical_form`: the caller canonicalises them first);
request ids are unguessable keys (see :meth:`~.leases.LeaseTable.acquire`), so a refusal names only their
length, never the key.
"""

from __future__ import annotations

import hmac

from .lease_records import MAX_REQUEST_ID, MIN_REQUEST_ID, NO_OWNER, Lease, LeaseError, capability_digest
from .paths import is_canonical_form


def _authorised(lease: Lease, owner: str | None, capability: bytes | None) -> bool:
    if owner is not None and lease.owner != NO_OWNER and owner == lease.owner:
        return True
    return (isinstance(capability, bytes | bytearray) and bool(lease.capability_sha256)
            and hmac.compare_digest(capability_digest(bytes(capability)), lease.capability_sha256))


def _check_root(root: object) -> None:
    if not isinstance(root, str) or not is_canonical_form(root):
        raise LeaseError(f"root {root!r} is not a canonical absolute path (canonicalise it first)")


def _check_request_id(request_id: object) -> None:
    if not isinstance(request_id, str) or not MIN_REQUEST_ID <= len(request_id) <= MAX_REQUEST_ID:
        shown = f"a str of {len(request_id)} characters" if isinstance(request_id, str) else type(request_id).__name__
        raise LeaseError(f"request_id must be a str of {MIN_REQUEST_ID} to {MAX_REQUEST_ID} characters (an "
                         f"unguessable key, e.g. secrets.token_urlsafe(16)), got {shown}")


def _one_of(value: object, allowed: tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise LeaseError(f"{what} {value!r} is not one of: {', '.join(allowed)}")
    return str(value)


def _check_name(what: str, value: object) -> None:
    if not isinstance(value, str) or not value or len(value) > 256:
        raise LeaseError(f"{what} must be a non-empty string of at most 256 characters, got {value!r}")
