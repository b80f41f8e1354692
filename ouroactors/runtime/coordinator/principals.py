"""Who a session request comes from: the principal the channel verified, never the name it merely claims.

Every request that acts for a session's owner — creating it, a message, a steer, suspend/resume/cancel, a wait,
a job's completion — names a principal. A name proves nothing, so before it counts the coordinator asks the
channel who sent it (:func:`verify`):

* **The local channel vouches for one principal: the data dir's owner** (``user:<login of the owning uid>``).
  Whatever reaches the actor system came through frames authenticated by the system's secret, which only that
  user can read (:mod:`ouroactors.system._secret`); so a request that names the owner and no credential is the
  owner's. It may not name anyone else that way.
* **Any other principal presents its credential**: ``<data dir>/principals.json`` maps names to the SHA-256 of
  their tokens (mode 0600, refused when others may read it, like ``operators.json``); :func:`add_principal`
  makes one and returns its token once. A gateway that serves several users holds their tokens and sends each
  request with its user's.

A request that fails is refused with the reason — a resume event (a message, a job's completion) is refused
with code ``identity`` and recorded in the session's rejected-events log; a command (steer, control, wait,
create) is answered with an error — and changes nothing. The decision is the pure :func:`decide`;
:class:`PrincipalCheck` is the thin part that reads the data dir.

**Reads are scoped the same way** (list, show, events through the session directory): the reader is verified as a
command's principal is, and :func:`may_read` decides — a principal reads its own sessions; the data dir's owner
reads every one, as it could read the store itself. A session the reader may not read is answered as unknown, so
its existence is not told either.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import pwd
import secrets
from dataclasses import dataclass
from pathlib import Path

from ...authorities.grants.operators import CredentialsError, load_digests, write_private_text
from .resume import VerifiedActor, verified_principal

__all__ = ["PRINCIPALS_FILE", "PrincipalCheck", "Unverified", "add_principal", "decide", "load_principals",
           "local_principal", "may_read"]

PRINCIPALS_FILE = "principals.json"


def local_principal(uid: int | None = None) -> str:
    """The principal of the OS user ``uid`` (default: this process's effective user): ``user:<login>``."""
    uid = os.geteuid() if uid is None else uid
    try:
        return f"user:{pwd.getpwuid(uid).pw_name}"
    except KeyError:  # a uid with no passwd entry (a container's): still one principal per uid
        return f"user:uid-{uid}"


@dataclass(frozen=True)
class Unverified:
    """Why a claimed principal is not taken."""

    claimed: str
    why: str

    def __str__(self) -> str:
        return f"principal {self.claimed!r} is not verified: {self.why}"


def decide(claimed: str, token: str | None, *, channel_principal: str,
           principals: dict[str, str] | None) -> VerifiedActor | Unverified:
    """The pure decision (see the module docstring). ``principals``: name → token digest, None when the file
    could not be read (a token then verifies nothing)."""
    if token is None:
        if claimed == channel_principal:
            return verified_principal(claimed)
        return Unverified(claimed, f"the local channel vouches only for {channel_principal!r} (the data dir's "
                                   "owner); another principal presents its token")
    if principals is None:
        return Unverified(claimed, f"no readable {PRINCIPALS_FILE} to check its token against")
    expected = principals.get(claimed)
    if expected is None or not hmac.compare_digest(expected, hashlib.sha256(token.encode()).hexdigest()):
        return Unverified(claimed, "its token does not match")
    return verified_principal(claimed)


def may_read(reader: str, owner: str, *, channel_principal: str) -> bool:
    """Whether the verified principal ``reader`` may read a session ``owner`` owns: its own, or any when it is
    the data dir's owner (the local channel's principal, who can open the store itself)."""
    return reader in (owner, channel_principal)


def load_principals(data_dir: str | os.PathLike[str]) -> dict[str, str]:
    """``principals.json`` of ``data_dir`` (empty when there is none); :class:`CredentialsError` if it is unsafe or
    malformed."""
    return load_digests(Path(data_dir) / PRINCIPALS_FILE)


def add_principal(data_dir: str | os.PathLike[str], name: str) -> str:
    """Give principal ``name`` a new token (replacing any it had) and return it; only its digest is kept."""
    from .record import check_id

    check_id(name, "principal")
    directory = Path(data_dir)
    principals = load_principals(directory)
    token = secrets.token_urlsafe(32)
    principals[name] = hashlib.sha256(token.encode()).hexdigest()
    tmp = directory / f".{PRINCIPALS_FILE}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    write_private_text(tmp, json.dumps(principals, indent=2, sort_keys=True))
    os.replace(tmp, directory / PRINCIPALS_FILE)
    return token


class PrincipalCheck:
    """:func:`decide` over a data dir: its owner is the local channel's principal; tokens are read when presented."""

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.data_dir = Path(data_dir)
        self.channel_principal = local_principal(os.stat(self.data_dir).st_uid)

    def verify(self, claimed: str, token: str | None) -> VerifiedActor | Unverified:
        principals: dict[str, str] | None = None
        if token is not None:
            try:
                principals = load_principals(self.data_dir)
            except (CredentialsError, OSError):
                principals = None
        return decide(claimed, token, channel_principal=self.channel_principal, principals=principals)

    def reader(self, claimed: str | None, token: str | None) -> VerifiedActor | Unverified:
        """Who a read comes from: ``claimed`` verified as :meth:`verify` does (None: the local channel's own)."""
        return self.verify(self.channel_principal if claimed is None else claimed, token)

    def may_read(self, reader: VerifiedActor, owner: str) -> bool:
        return may_read(reader.name, owner, channel_principal=self.channel_principal)
