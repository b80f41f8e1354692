"""A coordinator that needs no wake-up per commit says so: a marker file beside its wake-up FIFO.

**Why.** A runtime wakes its session's coordinator (:mod:`.wake`) after every commit that carried output events:
two or three per tool call. The coordinator needs that wake-up for two things only — to serve the followers the
directory lent it (:mod:`.following`) at once, and to ack the runtime's output before its buffer fills
(:data:`.publishing.ACK_EVERY`). With neither, it woke, read the session record and went back to sleep: a second
process scheduled beside the turn at every step, on the turn's own CPU (a FIFO's wake-up is a "sync" one), for
nothing. So while it holds no follower the coordinator keeps a marker at ``<data dir>/wake.quiet/<session>``, and
the runtime skips the wake-up while the marker is there and no ack is due. The marker sits in a directory of its
own because a session id may contain dots: no name derived from one id can be another id's FIFO.

**Order, so that no wake-up a follower needs is lost.** The coordinator removes the marker *before* it reads the
record to serve a newly lent follower; a runtime checks the marker *after* its commit returned. A commit either
came before that read (the follower is served from the record) or its runtime finds no marker (and wakes the
coordinator). Putting the marker back late only costs wake-ups.

**What a wrong marker can cost.** Only latency, never an event: a skipped wake-up leaves the events committed, and
a lent follower the coordinator does not answer is answered by the directory (see :mod:`.following`). So a marker
that cannot be removed (or another incarnation's, made while this one runs) makes the coordinator decline the loan,
and one that cannot be made leaves wake-ups on.
Only the data dir's owner can write under it (0700); a marker that is not a regular file of ours is not one.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
from pathlib import Path

from .record import check_id

__all__ = ["QUIET_DIR", "QuietMarker", "is_quiet", "quiet_path"]

log = logging.getLogger("ouroactors.coordinator")

QUIET_DIR = "wake.quiet"


def quiet_path(data_dir: str | os.PathLike[str], session_id: str) -> Path:
    return Path(data_dir) / QUIET_DIR / check_id(session_id, "session_id")


def is_quiet(path: Path) -> bool:
    """Whether the coordinator at the other end asked for no wake-ups (a regular file of ours at ``path``)."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid()


class QuietMarker:
    """The coordinator's side: :meth:`want` wake-ups or not; one per coordinator incarnation, on its actor thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # what this incarnation wrote into the marker it made (None: none of ours is there). A token, not the inode:
        # a marker removed and made again at once gets the same inode number back
        self._token: bytes | None = None

    @classmethod
    def fresh(cls, data_dir: str | os.PathLike[str], session_id: str) -> QuietMarker:
        """A marker for a new incarnation: whatever an earlier one left is removed (it may have died holding it)."""
        path = quiet_path(data_dir, session_id)
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("cannot remove %s (%s): wake-ups for session %s may be skipped", path, exc, session_id)
        return cls(path)

    @property
    def quiet(self) -> bool:
        return self._token is not None

    def want(self, wanted: bool) -> bool:
        """Ask for wake-ups (``wanted``) or not; whether the marker now says so. Never raises."""
        if wanted and not self.quiet:  # none of ours: wake-ups come unless another incarnation's marker is there
            return not os.path.lexists(self.path)
        if not wanted and self.quiet:
            return True
        return self._remove() if wanted else self._make()

    def _make(self) -> bool:
        try:
            self.path.parent.mkdir(mode=0o700, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError:
            return False  # wake-ups stay on: they cost time, never an event
        token = secrets.token_hex(16).encode()
        try:
            os.write(fd, token)
        except OSError:
            os.close(fd)
            self.path.unlink(missing_ok=True)  # made by us a moment ago
            return False
        os.close(fd)
        self._token = token
        return True

    def _remove(self) -> bool:
        try:
            if _read(self.path) != self._token:
                return False  # not the marker this incarnation made: not ours to remove, nor to overrule
            self.path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("cannot remove %s (%s): a follower is left to the directory", self.path, exc)
            return False
        self._token = None
        return True

    def close(self) -> None:
        """Remove the marker if it is this incarnation's (a later one's is not ours to remove)."""
        if self.quiet:
            self._remove()


def _read(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        return os.read(fd, 64)
    finally:
        os.close(fd)
