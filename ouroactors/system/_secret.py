"""The per-system secret that authenticates frames (:mod:`._frames`): where it lives, who may read it.

The secret is 32 random bytes, stored hex-encoded in ``<data dir>/secret``, created 0600 and
reused by every later run on the same data dir (so a convention's nodes share it once, by copying
the file, not at every restart; delete the file to rotate it). Processes of the system get it by
fork, never through argv or the environment. A process that attaches later
(:meth:`~.handle.ActorSystem.connect`) reads the file, which only the data dir's owner can.

A secret file is refused unless it is a regular file (not a symlink) owned by this user and
readable by nobody else: a secret others can read or replace authenticates nothing.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

from ..core.errors import ActorSystemError

SECRET_NAME = "secret"
SECRET_BYTES = 32
MIN_SECRET_BYTES = 16


def read_secret_file(path: str | os.PathLike[str]) -> bytes:
    """The secret in ``path``; :class:`ActorSystemError` naming the file and the problem otherwise."""
    where = os.fspath(path)
    try:
        fd = os.open(where, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ActorSystemError(f"secret file {where}: does not exist") from None
    except OSError as exc:
        raise ActorSystemError(f"secret file {where}: cannot open it ({exc.strerror or exc}; "
                               "a symlink is refused)") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ActorSystemError(f"secret file {where}: not a regular file")
        if info.st_uid != os.geteuid():
            raise ActorSystemError(f"secret file {where}: owned by uid {info.st_uid}, not by this user "
                                   f"(uid {os.geteuid()})")
        if info.st_mode & 0o077:
            raise ActorSystemError(f"secret file {where}: mode {stat.S_IMODE(info.st_mode):04o} lets other "
                                   "users read or change it; chmod 600 it")
        raw = os.read(fd, 4096)
    finally:
        os.close(fd)
    text = raw.decode("ascii", errors="replace").strip()
    try:
        secret = bytes.fromhex(text)
    except ValueError:
        raise ActorSystemError(f"secret file {where}: expected hex digits (as `ouroactors run` writes them)") from None
    if len(secret) < MIN_SECRET_BYTES:
        raise ActorSystemError(f"secret file {where}: {len(secret)} bytes is too short (at least "
                               f"{MIN_SECRET_BYTES})")
    return secret


def write_secret(directory: Path, secret: bytes) -> Path:
    """Store ``secret`` as the data dir's secret (0600, replaced atomically)."""
    path = directory / SECRET_NAME
    temporary = directory / f".{SECRET_NAME}.{os.getpid()}.tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary)  # left by a crash of an earlier process with this pid
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, secret.hex().encode("ascii") + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    return path


def load_or_create(directory: Path) -> bytes:
    """The data dir's secret, created on first use."""
    path = directory / SECRET_NAME
    if os.path.lexists(path):
        return read_secret_file(path)
    secret = secrets.token_bytes(SECRET_BYTES)
    write_secret(directory, secret)
    return secret


def for_start(directory: Path, secret_file: str | os.PathLike[str] | None) -> bytes:
    """The secret a system starting on ``directory`` uses: ``secret_file``'s (kept in the data dir,
    so later attaches find it) or the data dir's own."""
    if secret_file is None:
        return load_or_create(directory)
    secret = read_secret_file(secret_file)
    if os.path.realpath(secret_file) != os.path.realpath(directory / SECRET_NAME):
        write_secret(directory, secret)
    return secret
