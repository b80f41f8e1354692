"""The idempotency key of the coordinator's workspace ``Acquire`` for a runtime: derived, and unguessable.

**Why it must be unguessable.** The workspace answers a replayed ``request_id`` with the grant that key made —
*including its capability*, the secret that lets its holder use, release and reclaim the lease (see
:meth:`~ouroactors.authorities.workspace.leases.LeaseTable.acquire`). So whoever can compute a session's key and
send the workspace an ``Acquire`` with it gets that session's lease. The key used to be
``f"{session_id}.g{generation}"``: anyone who knows the session id (it is shown, logged, typed on command lines)
and can count runtime generations could take the lease.

**Why it must be derived, not drawn.** Every coordinator incarnation of a session must compute the *same* key for
the same runtime generation: when the workspace died after recording a grant and before answering it, the grant
is a reservation keyed by the request id of that runtime, and no lease was kept beside the record — the next
incarnation reclaims it only by recomputing the key from the durable record (``get_runtime``'s generation: the
``earlier`` fallback of :meth:`.runtimes.RuntimeLink._lease_workspace`). A random key would have to be made
durable before the ``Acquire`` (one more synced commit on every runtime start); an HMAC needs nothing kept but
one secret per data dir.

**The secret.** :data:`KEY_FILE` in the data dir: 32 random bytes, hex, 0600, created once on first use and read
by every later coordinator on the same data dir (each coordinator is its own process; all read the one file).
It is not the system's frame secret (``<data dir>/secret``): that one is copied to every node of a convention,
is absent on the simple base, and is replaced when a node joins with another leader's secret or the operator
rotates it — which would orphan a reservation keyed under the old one. This key never leaves the data dir.
It is read with the system secret's own checks (:func:`ouroactors.system._secret.read_secret_file`: a regular
file, not a symlink, owned by us, readable by nobody else — else refused, naming the file) and created
atomically: written 0600 to a temporary file, fsynced, then *linked* into place, which never replaces an
existing file — two coordinators creating it at once agree on the first one linked (a replace would let the
second overwrite a key the first already used in an ``Acquire``). Deleting the file rotates the key; a
reservation keyed under the old one is then no longer reclaimable by key (its acquire is refused:
``ReservationPending``), so rotate it only with no session running.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import threading
from pathlib import Path

from ...core.trusted_files import check_trusted
from ...system._secret import read_secret_file

KEY_FILE = "coordinator.key"
KEY_BYTES = 32
PREFIX = "acquire-"  # + 64 hex digits: 72 characters, within the workspace's request_id bounds (16 to 200)
_DOMAIN = b"ouroactors.coordinator.acquire"  # never the same message as another use of an HMAC under this key


def load_or_create_key(data_dir: str | os.PathLike[str]) -> bytes:
    """The data dir's acquire key (created on first use; see the module docstring).

    Raises :class:`~ouroactors.core.trusted_files.UntrustedFile` for a data dir another user could write, and
    :class:`~ouroactors.core.errors.ActorSystemError` for a key file that is not ours alone (nothing is changed).
    """
    directory = Path(data_dir)
    check_trusted(directory)
    path = directory / KEY_FILE
    if os.path.lexists(path):
        return read_secret_file(path)
    key = secrets.token_bytes(KEY_BYTES)
    temporary = directory / f".{KEY_FILE}.{os.getpid()}.{threading.get_ident()}.tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary)  # left by a crash of an earlier process with this pid and thread
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, key.hex().encode("ascii") + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temporary, path, follow_symlinks=False)  # never replaces: the first key linked wins
        except FileExistsError:
            return read_secret_file(path)  # another coordinator made it first: its key, with the same checks
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dir_fd)  # the link is durable before any Acquire is keyed under it
    finally:
        os.close(dir_fd)
    return key


def acquire_request_id(key: bytes, session_id: str, generation: int) -> str:
    """The ``request_id`` of the workspace ``Acquire`` for ``session_id``'s runtime of ``generation``.

    The same for the same (key, session, generation) — every incarnation on one data dir — and different for
    any other; without ``key`` it cannot be computed (HMAC-SHA256). Length-prefixed parts: no two (session,
    generation) pairs share a message.
    """
    if not isinstance(key, bytes) or len(key) < 16:
        raise ValueError("an acquire key has at least 16 bytes")
    if not isinstance(session_id, str) or not session_id:
        raise ValueError(f"session_id must be a non-empty str, got {session_id!r}")
    if not isinstance(generation, int) or isinstance(generation, bool) or generation < 0:
        raise ValueError(f"a runtime generation is a non-negative int, got {generation!r}")
    parts = [_DOMAIN, session_id.encode(), str(generation).encode("ascii")]
    message = b"".join(len(part).to_bytes(4, "big") + part for part in parts)
    return PREFIX + hmac.new(key, message, hashlib.sha256).hexdigest()


__all__ = ["KEY_FILE", "acquire_request_id", "load_or_create_key"]
