"""A wake-up line from a session's runtime to its coordinator: a FIFO in the data dir, one per session.

**Why.** A carried checkpoint (:func:`.publication.carry`) is durable the moment the runtime's ledger commit
returns. Telling the coordinator by a thespian push cost about 1.3 ms on the publication path, measured: the
runtime's actor thread must first win the GIL back from the turn loop (which goes straight on to spawn the tool,
holding it), then send, then the message crosses TCP. A byte the committing thread writes itself to a FIFO wakes
the coordinator's actor loop, which watches the FIFO's descriptor, in microseconds.

**What it carries: nothing but the wake.** The coordinator learns what was committed from the durable record,
so a lost, repeated or forged byte costs one read and changes nothing. Only the data dir's owner can open the FIFO
anyway (0600, in the 0700 data dir; opened without following links and checked to be a FIFO of ours). Whenever the
FIFO cannot be written, the runtime pushes as before. While the coordinator has no follower to serve and no ack
is due, it asks for no wake-up at all (:mod:`.quiet`), and the runtime writes nothing.

**Incarnations.** A new coordinator of the session replaces the FIFO (a fresh inode at the same path); a runtime
that kept the old one open gets ``EPIPE`` (its reader is gone) and opens the path again. A coordinator that stops
removes the path only while it is still its own.

**Subscribers reading the log themselves** (:mod:`.direct_follow`) are woken the same way, each by a FIFO of its
own under ``<data dir>/followers/<session>/``: whoever commits to the session's log — the runtime carrying its
events, the coordinator checkpointing — writes to each (:func:`wake_subscribers`) after its commit returned: the
cursor that commit made durable. A subscriber publishes events up to the highest cursor vouched for; an event it
reads beyond that (a later commit visible before its synced write returned) waits for its own committer's wake-up.
A subscriber makes its FIFO under a dot-name, opens it, and only then renames it into place, so a writer never
finds a FIFO of a live subscriber with no reader; one it finds with no reader (its subscriber died) it removes.
"""

from __future__ import annotations

import errno
import logging
import os
import secrets
import select
import stat
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path

from .quiet import is_quiet, quiet_path
from .record import check_id

__all__ = ["WAKE_DIR", "SubscriberWake", "SubscriberWaker", "WakeReader", "WakeWriter", "wake_path",
           "wake_subscribers"]

log = logging.getLogger("ouroactors.coordinator")

WAKE_DIR = "wake"
FOLLOWERS_DIR = "followers"
_READ = 4096
_VOUCH = struct.Struct(">Q")  # a subscriber's wake-up: the cursor the waking commit made durable
_VOUCH_MAX = 2**64 - 1


def wake_path(data_dir: str | os.PathLike[str], session_id: str) -> Path:
    return Path(data_dir) / WAKE_DIR / check_id(session_id, "session_id")


def subscribers_dir(data_dir: str | os.PathLike[str], session_id: str) -> Path:
    """Where the FIFOs of ``session_id``'s subscribers are (a directory per session: an id is one path part)."""
    return Path(data_dir) / FOLLOWERS_DIR / check_id(session_id, "session_id")


def _open_writer(path: str | os.PathLike[str]) -> int | None:
    """A non-blocking write end of the FIFO at ``path`` if it is one of ours with a reader (else None)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None  # no such FIFO, or nobody reading it (ENXIO)
    info = os.fstat(fd)
    if not stat.S_ISFIFO(info.st_mode) or info.st_uid != os.geteuid():
        os.close(fd)
        return None
    return fd


def _vouch(cursor: int) -> bytes:
    """A wake-up's bytes: ``cursor`` as the 8 bytes every FIFO end reads (clamped to what they can hold)."""
    return _VOUCH.pack(max(0, min(cursor, _VOUCH_MAX)))


def wake_subscribers(data_dir: str | os.PathLike[str], session_id: str, cursor: int = 0) -> int:
    """After a commit to ``session_id``'s log returned: the cursor it made durable, to every subscriber's FIFO; how
    many were woken. Never raises (a subscriber not woken reads at its next poll). One-off: a committer that wakes
    the same session again and again keeps a :class:`SubscriberWaker` instead."""
    waker = SubscriberWaker(data_dir, session_id)
    try:
        return waker.wake(cursor)
    finally:
        waker.close()


class SubscriberWaker:
    """Wakes ``session_id``'s subscribers, keeping their FIFOs open between wake-ups.

    **Why keep them open.** Opening a FIFO's write end and closing it each wake up its reader's wait queue, so a
    wake-up that opened, wrote and closed woke every subscriber three times. On a two-core box the woken reader is
    put on the committing thread's CPU (a pipe's wake-up is a "sync" one: the kernel expects the waker to sleep),
    and the turn loop waited for it: 0.57 ms per commit, measured in ``bench_peers --breakdown``, against 0.10 ms
    with the descriptors kept. The directory is listed again only when its mtime changed (a subscriber came or
    went), and whenever the last listing was taken within :data:`RACY_NS` of that mtime: the kernel stamps
    directories from a coarse clock, so a change in the same tick as the listing would leave the mtime as it was.

    **Never write to a descriptor we cannot vouch for.** Before each write the descriptor is checked to still be
    the FIFO that was opened (same inode): should anything in the process have closed it and had the number reused
    (an LMDB file, say), the write would corrupt it. One that fails the check is forgotten, never closed (it is
    no longer ours). After a fork, the parent's descriptors are forgotten the same way. Thread-safe: a runtime's
    ledger commits and its journal's own commits may return on different threads.
    """

    RACY_NS = 20_000_000

    def __init__(self, data_dir: str | os.PathLike[str], session_id: str) -> None:
        try:
            self.where: Path | None = subscribers_dir(data_dir, session_id)
        except ValueError:
            self.where = None  # not an id: nothing is ever touched
        self._lines: dict[str, tuple[int, int]] = {}  # FIFO name → (write end, its inode)
        self._listed: tuple[int, int] | None = None  # (the directory's mtime, when it was listed), both ns
        self._pid = os.getpid()
        self._lock = threading.Lock()

    def wake(self, cursor: int = 0) -> int:
        """Write ``cursor`` to every subscriber; how many were woken. Never raises."""
        if self.where is None:
            return 0
        with self._lock:
            return self._wake(self.where, cursor)

    def _wake(self, where: Path, cursor: int) -> int:
        if os.getpid() != self._pid:
            self._lines, self._listed, self._pid = {}, None, os.getpid()
        try:
            mtime = os.stat(where).st_mtime_ns
        except OSError:
            self._close()  # no subscriber reads this session itself (the common case: one failed stat)
            return 0
        for name, (fd, inode) in list(self._lines.items()):
            if not _still_fifo(fd, inode):  # not ours any more: forgotten, and the FIFO opened afresh
                del self._lines[name]
                self._listed = None
        if self._listed is None or self._listed[0] != mtime or self._listed[1] - mtime < self.RACY_NS:
            self._relist(where, mtime)
        message = _vouch(cursor)
        woken = 0
        for name, (fd, inode) in list(self._lines.items()):
            try:
                os.write(fd, message)  # 8 bytes: one atomic write (<= PIPE_BUF), never interleaved with another's
                woken += 1
            except BlockingIOError:
                pass  # full: it has wake-ups to read already
            except OSError:  # its reader went: the subscriber is gone
                self._drop(name)
                _remove_if(where / name, inode)
        return woken

    def _relist(self, where: Path, mtime: int) -> None:
        listed_at = time.time_ns()
        try:
            names = {name for name in os.listdir(where) if not name.startswith(".")}  # a dot-name is being made
        except OSError:
            names = set()
        for name in set(self._lines) - names:
            self._drop(name)
        for name in names - set(self._lines):
            path = where / name
            fd = _open_writer(path)
            if fd is None:
                try:
                    if stat.S_ISFIFO(os.lstat(path).st_mode):
                        path.unlink()  # no reader: its subscriber is gone
                except OSError:
                    pass
                continue
            self._lines[name] = (fd, os.fstat(fd).st_ino)
        self._listed = (mtime, listed_at)

    def _drop(self, name: str) -> None:
        fd, inode = self._lines.pop(name)
        if _still_fifo(fd, inode):
            os.close(fd)

    def close(self) -> None:
        """Close every write end kept (the waker may be used again: it lists the directory afresh)."""
        with self._lock:
            self._close()

    def _close(self) -> None:
        if os.getpid() == self._pid:
            for name in list(self._lines):
                self._drop(name)
        self._lines, self._listed = {}, None


def _still_fifo(fd: int, inode: int) -> bool:
    """Whether ``fd`` is still the FIFO of inode ``inode`` that was opened (not closed, not a reused number)."""
    try:
        info = os.fstat(fd)
    except OSError:
        return False
    return info.st_ino == inode and stat.S_ISFIFO(info.st_mode)


def _remove_if(path: Path, inode: int) -> None:
    """Remove the FIFO at ``path`` if it is still the one of inode ``inode`` (its subscriber is gone)."""
    try:
        info = os.lstat(path)
        if info.st_ino == inode and stat.S_ISFIFO(info.st_mode):
            path.unlink()
    except OSError:
        pass


class _FifoEnd:
    """A FIFO's read end plus a write end of its own, so it never reads end-of-file (which would leave the
    descriptor readable for ever) when the writers close theirs."""

    def __init__(self, path: Path, fd: int, keep: int) -> None:
        self.path, self.fd, self._keep = path, fd, keep

    @staticmethod
    def _open_ends(path: Path) -> tuple[int, int]:
        flags = os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(path, os.O_RDONLY | flags)
        try:
            return fd, os.open(path, os.O_WRONLY | flags)
        except OSError:
            os.close(fd)
            raise

    vouched = 0  # the highest cursor a wake-up said its commit made durable

    def drain(self) -> bool:
        """Read every wake-up waiting; whether there was any. Each is the cursor the waking commit made durable (8
        bytes; :attr:`vouched` keeps the highest). A forged one needs the data dir's owner, who could write the
        log itself."""
        woke = False
        while True:
            try:
                chunk = os.read(self.fd, _READ)
            except BlockingIOError:
                return woke
            if not chunk:
                return woke
            woke = True
            whole = len(chunk) - len(chunk) % _VOUCH.size  # writes are whole; a stray tail is not a cursor
            for (cursor,) in _VOUCH.iter_unpack(chunk[:whole]):
                self.vouched = max(self.vouched, cursor)

    def _close_ends(self) -> None:
        for fd in (self.fd, self._keep):
            try:
                os.close(fd)
            except OSError:
                pass


class SubscriberWake(_FifoEnd):
    """A subscriber's end: a FIFO of its own that committers write to (:func:`wake_subscribers`).

    A reader may publish events up to :attr:`vouched` without a flush of its own: the committer's synced commit had
    returned when it wrote."""

    @classmethod
    def open(cls, data_dir: str | os.PathLike[str], session_id: str) -> SubscriberWake | None:
        """A FIFO for this subscriber, in place and read (None if the data dir will not hold one: poll instead)."""
        where = subscribers_dir(data_dir, session_id)
        name = secrets.token_hex(8)
        making = where / f".{name}"
        try:
            where.parent.mkdir(mode=0o700, exist_ok=True)
            where.mkdir(mode=0o700, exist_ok=True)
            if os.lstat(where).st_uid != os.geteuid() or not stat.S_ISDIR(os.lstat(where).st_mode):
                raise OSError(f"{where} is not a directory of ours")
            os.mkfifo(making, 0o600)
            fd, keep = cls._open_ends(making)
            os.rename(making, where / name)
        except OSError as exc:
            log.debug("no wake-up FIFO for a subscriber of %s under %s (%s): it polls", session_id, where, exc)
            try:
                making.unlink()
            except OSError:
                pass
            return None
        return cls(where / name, fd, keep)

    def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for a wake-up; whether one came (every byte waiting is taken)."""
        ready, _, _ = select.select([self.fd], [], [], max(timeout_s, 0.0))
        return bool(ready) and self.drain()

    def close(self) -> None:
        try:
            self.path.unlink()
            self.path.parent.rmdir()  # the session's last subscriber: no empty directory left per session
        except OSError:
            pass
        self._close_ends()


class WakeReader(_FifoEnd):
    """The coordinator's end of the session's FIFO."""

    def __init__(self, path: Path, fd: int, keep: int) -> None:
        super().__init__(path, fd, keep)
        self._inode = os.fstat(fd).st_ino

    @classmethod
    def open(cls, data_dir: str | os.PathLike[str], session_id: str) -> WakeReader | None:
        """A fresh FIFO for this incarnation (None if the data dir will not hold one: runtimes push instead)."""
        path = wake_path(data_dir, session_id)
        try:
            path.parent.mkdir(mode=0o700, exist_ok=True)
            path.unlink(missing_ok=True)
            os.mkfifo(path, 0o600)
            fd, keep = cls._open_ends(path)
        except OSError as exc:
            log.warning("no wake-up FIFO for session %s at %s (%s): the runtime's pushes tell of its commits",
                        session_id, path, exc)
            return None
        return cls(path, fd, keep)

    def close(self) -> None:
        try:
            if os.stat(self.path).st_ino == self._inode:  # a later incarnation's FIFO is not ours to remove
                self.path.unlink()
        except OSError:
            pass
        self._close_ends()


class WakeWriter:
    """The runtime's end: :meth:`wake` from any thread; False when there is no reader to wake (push instead).

    ``unacked(cursor)``, when given, says how many events up to ``cursor`` the coordinator has not acked yet; while
    that stays under ``ack_every`` and the coordinator keeps its quiet marker (:mod:`.quiet`), it is not woken."""

    def __init__(self, data_dir: str | os.PathLike[str], session_id: str,
                 unacked: Callable[[int], int] | None = None, ack_every: int = 0) -> None:
        self.path = wake_path(data_dir, session_id)
        self.quiet = quiet_path(data_dir, session_id)
        self.subscribers = SubscriberWaker(data_dir, session_id)
        self.unacked, self.ack_every = unacked, ack_every
        self.skipped = 0  # wake-ups the coordinator's quiet marker spared it (tests, metrics)
        self._fd: int | None = None

    def wake(self, cursor: int = 0) -> bool:
        """Wake the coordinator (whether there was one to wake) and every subscriber reading the log itself, telling
        them the cursor the commit that just returned made durable."""
        self.subscribers.wake(cursor)
        if self._coordinator_quiet(cursor):
            self.skipped += 1
            return True  # it asked for none: told, as far as it cares (no push either)
        return self._wake_coordinator(_vouch(cursor))

    def _coordinator_quiet(self, cursor: int) -> bool:
        """Whether the coordinator asked for no wake-up: no ack is due, and its marker is there beside a FIFO that
        has a reader. A marker with no FIFO to read (one a killed coordinator left, a data dir reopened on the
        in-process base) is not a coordinator asking anything: the runtime then pushes, as before."""
        if self.unacked is None or self.unacked(cursor) >= self.ack_every or not is_quiet(self.quiet):
            return False
        return (self._fd if self._fd is not None else self._open()) is not None

    def _wake_coordinator(self, message: bytes) -> bool:
        for _ in range(2):  # once more after a reader went away: a new incarnation may have a new FIFO there
            fd = self._fd if self._fd is not None else self._open()
            if fd is None:
                return False
            try:
                os.write(fd, message)  # 8 bytes: atomic
                return True
            except BlockingIOError:
                return True  # full of wake-ups: the reader has some to read already
            except OSError as exc:
                self.close()
                if exc.errno != errno.EPIPE:
                    return False
        return False

    def _open(self) -> int | None:
        self._fd = _open_writer(self.path)
        return self._fd

    def close(self) -> None:
        self.subscribers.close()
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass
