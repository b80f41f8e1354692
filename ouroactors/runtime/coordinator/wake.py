"""A wake-up line from a session's runtime to its coordinator: a FIFO in the data dir, one per session.

**Why.** A carried checkpoint (:func:`.publication.carry`) is durable the moment the runtime's ledger commit
returns. Telling the coordinator by a thespian push cost about 1.3 ms on the publication path, measured: the
runtime's actor thread must first win the GIL back from the turn loop (which goes straight on to spawn the tool,
holding it), then send, then the message crosses TCP. A byte the committing thread writes itself to a FIFO wakes
the coordinator's actor loop, which watches the FIFO's descriptor, in microseconds.

**What it carries: nothing but the wake.** The coordinator learns what was committed from the durable record,
so a lost, repeated or forged byte costs one read and changes nothing. Only the data dir's owner can open the FIFO
anyway (0600, in the 0700 data dir; opened without following links and checked to be a FIFO of ours). Whenever the
FIFO cannot be written, the runtime pushes as before.

**Incarnations.** A new coordinator of the session replaces the FIFO (a fresh inode at the same path); a runtime
that kept the old one open gets ``EPIPE`` (its reader is gone) and opens the path again. A coordinator that stops
removes the path only while it is still its own.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from pathlib import Path

from .record import check_id

__all__ = ["WAKE_DIR", "WakeReader", "WakeWriter", "wake_path"]

log = logging.getLogger("ouroactors.coordinator")

WAKE_DIR = "wake"
_READ = 4096


def wake_path(data_dir: str | os.PathLike[str], session_id: str) -> Path:
    return Path(data_dir) / WAKE_DIR / check_id(session_id, "session_id")


class WakeReader:
    """The coordinator's end: a FIFO it reads, plus a writer of its own so it never reads end-of-file (which
    would leave the descriptor readable for ever) when runtimes close theirs."""

    def __init__(self, path: Path, fd: int, keep: int) -> None:
        self.path, self.fd, self._keep = path, fd, keep
        self._inode = os.fstat(fd).st_ino

    @classmethod
    def open(cls, data_dir: str | os.PathLike[str], session_id: str) -> WakeReader | None:
        """A fresh FIFO for this incarnation (None if the data dir will not hold one: runtimes push instead)."""
        path = wake_path(data_dir, session_id)
        try:
            path.parent.mkdir(mode=0o700, exist_ok=True)
            path.unlink(missing_ok=True)
            os.mkfifo(path, 0o600)
            flags = os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(path, os.O_RDONLY | flags)
            keep = os.open(path, os.O_WRONLY | flags)
        except OSError as exc:
            log.warning("no wake-up FIFO for session %s at %s (%s): the runtime's pushes tell of its commits",
                        session_id, path, exc)
            return None
        return cls(path, fd, keep)

    def drain(self) -> bool:
        """Read every byte waiting; whether there was any (a wake-up)."""
        woke = False
        while True:
            try:
                chunk = os.read(self.fd, _READ)
            except BlockingIOError:
                return woke
            if not chunk:
                return woke
            woke = True

    def close(self) -> None:
        try:
            if os.stat(self.path).st_ino == self._inode:  # a later incarnation's FIFO is not ours to remove
                self.path.unlink()
        except OSError:
            pass
        for fd in (self.fd, self._keep):
            try:
                os.close(fd)
            except OSError:
                pass


class WakeWriter:
    """The runtime's end: :meth:`wake` from any thread; False when there is no reader to wake (push instead)."""

    def __init__(self, data_dir: str | os.PathLike[str], session_id: str) -> None:
        self.path = wake_path(data_dir, session_id)
        self._fd: int | None = None

    def wake(self) -> bool:
        for _ in range(2):  # once more after a reader went away: a new incarnation may have a new FIFO there
            fd = self._fd if self._fd is not None else self._open()
            if fd is None:
                return False
            try:
                os.write(fd, b"!")
                return True
            except BlockingIOError:
                return True  # full of wake-ups: the reader has some to read already
            except OSError as exc:
                self.close()
                if exc.errno != errno.EPIPE:
                    return False
        return False

    def _open(self) -> int | None:
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None  # no such FIFO, or nobody reading it (ENXIO)
        info = os.fstat(fd)
        if not stat.S_ISFIFO(info.st_mode) or info.st_uid != os.geteuid():
            os.close(fd)
            return None
        self._fd = fd
        return fd

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass
