"""The data-directory marker: which live system serves a data directory, and how to reach it.

``<data_dir>/system.json`` is written when a system starts and removed when it shuts down. A
second terminal finds the system through it (``ouroactors status --data-dir D``), and a second
start on the same directory is refused while the marker names a live system. A marker whose
processes are gone (the system was killed) is *stale*: it is detected, reported and removed.

Liveness is checked on the processes, never assumed from the file: the admin's process group must
have a live member and the start time of its leader must match the one recorded, so a recycled
pid is not mistaken for the system.

Before anything is *signalled* on the marker's word (``ouroactors stop`` kills the processes of the admin's
session, which its group's id names), :func:`verify_processes` checks that the processes belong to the system
of this data directory, not merely that they are alive: the admin must run as our user, sit in the process
group the marker names, and hold this data dir's ``admin.out`` open as its output (the file the
system was started with); an in-process system's owner must hold its ``events.jsonl`` open; the
owner of a foreground run must run as our user and be older than its admin. A forged or stale
marker naming an unrelated process is refused with :class:`MarkerMismatch` and nothing is killed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from ..core.errors import ActorSystemError
from ..core.procs import process_start_ticks as process_start_ticks

MARKER = "system.json"
START_LOCK = "system.lock"  # held by a start from its claim until its marker is written
ADMIN_OUTPUT = "admin.out"  # the admin's stdout/stderr (see handle.start)
EVENTS = "events.jsonl"


@dataclass(frozen=True)
class Marker:
    base: str
    admin_port: int | None
    admin_pid: int | None
    admin_pgid: int | None
    admin_start_ticks: int | None
    owner_pid: int  # the process that started the system (it may have exited if detached)
    detached: bool
    bind_host: str
    node_epoch: int
    started_ns: int
    origin_ns: int
    name: str = "ouroactors"

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)


class DataDirInUse(ActorSystemError):
    def __init__(self, data_dir: Path, marker: Marker) -> None:
        self.marker = marker
        who = marker.owner_pid if marker.base == "simple" else marker.admin_pid
        super().__init__(
            f"data dir {data_dir} is already served by a live system (pid {who}, started by pid "
            f"{marker.owner_pid}); stop it first with `ouroactors stop --data-dir {shlex.quote(str(data_dir))}`"
        )


class MarkerMismatch(ActorSystemError):
    """The marker names processes that cannot be shown to belong to this data dir's system."""

    def __init__(self, data_dir: Path, problem: str) -> None:
        self.problem = problem
        super().__init__(
            f"{Path(data_dir) / MARKER}: {problem}; refusing to signal it (if no system runs on {data_dir}, "
            "remove the marker)"
        )


def read_marker(data_dir: Path) -> Marker | None:
    path = Path(data_dir) / MARKER
    try:
        data = json.loads(path.read_text())
        return Marker(**data)
    except FileNotFoundError:
        return None
    except (ValueError, TypeError) as exc:
        raise ActorSystemError(f"{path}: unreadable system marker ({exc}); remove it if no system runs") from None


def is_live(marker: Marker) -> bool:
    if marker.base == "simple":
        return process_start_ticks(marker.owner_pid) is not None
    if marker.admin_pid is None:
        return False
    ticks = process_start_ticks(marker.admin_pid)
    return ticks is not None and (marker.admin_start_ticks is None or ticks == marker.admin_start_ticks)


def claim(data_dir: Path) -> Marker | None:
    """Before a start: refuse if a live system serves ``data_dir``; remove a stale marker.

    Returns the stale marker that was removed (for the caller to report), or None.
    """
    marker = read_marker(data_dir)
    if marker is None:
        return None
    if is_live(marker):
        raise DataDirInUse(data_dir, marker)
    (Path(data_dir) / MARKER).unlink(missing_ok=True)
    return marker


class DataDirStarting(ActorSystemError):
    """Another process is starting a system on this data dir at this moment (it holds the start lock)."""

    def __init__(self, data_dir: Path, holder: int | None) -> None:
        self.holder = holder
        who = f"pid {holder}" if holder else "another process"
        super().__init__(
            f"data dir {data_dir} is being claimed by another start ({who}) right now: only one system serves a "
            f"data dir; see which won with `ouroactors status --data-dir {shlex.quote(str(data_dir))}`"
        )


@contextlib.contextmanager
def claiming(data_dir: Path) -> Iterator[Marker | None]:
    """:func:`claim` ``data_dir`` and hold its start lock until the block ends (the marker written, or the start
    failed): of starts racing on one data dir exactly one gets through; the others are refused at once.

    Without it, the check (no live marker) and the claim (the marker written after the whole boot, a second or
    more later) left a window in which several starts all succeeded and wrote the same event log and LMDB
    environment, and ``stop`` could reach only the last. The lock is a POSIX record lock (``lockf``) on
    ``<data_dir>/system.lock``, not a ``flock``: the admin is forked during the boot, and a ``flock`` would go
    with the inherited descriptor and stay held as long as the system lives; a record lock belongs to this
    process alone and ends with it, whatever way it ends. The holder writes its pid into the file for the
    refusal to name. A record lock does not exclude the threads of its own process: a set of the data dirs this
    process is claiming does.
    """
    here = os.path.realpath(data_dir)
    with _claims_lock:
        if here in _claims:
            raise DataDirStarting(data_dir, os.getpid())
        _claims.add(here)
    try:
        fd = os.open(Path(data_dir) / START_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                raise DataDirStarting(data_dir, _holder(fd)) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
            yield claim(data_dir)
        finally:
            os.close(fd)  # releases the lock
    finally:
        with _claims_lock:
            _claims.discard(here)


_claims: set[str] = set()  # the data dirs this process is claiming now (realpath)
_claims_lock = threading.Lock()


def _holder(fd: int) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        return int(os.pread(fd, 32, 0).decode().strip() or "0") or None
    return None


def write_marker(data_dir: Path, marker: Marker) -> None:
    path = Path(data_dir) / MARKER
    tmp = path.with_name(f".{MARKER}.tmp-{os.getpid()}")
    tmp.write_text(marker.to_json())
    os.replace(tmp, path)


def remove_marker(data_dir: Path, expected: Marker | None = None) -> None:
    current = read_marker_quietly(data_dir)
    if current is not None and (expected is None or current == expected):
        (Path(data_dir) / MARKER).unlink(missing_ok=True)


def remove_marker_of(data_dir: str | Path, admin_pid: int) -> None:
    """Remove the marker if it names the system whose admin is ``admin_pid`` (that system ends)."""
    current = read_marker_quietly(Path(data_dir))
    if current is not None and current.admin_pid == admin_pid:
        (Path(data_dir) / MARKER).unlink(missing_ok=True)


def read_marker_quietly(data_dir: Path) -> Marker | None:
    try:
        return read_marker(data_dir)
    except ActorSystemError:
        return None


def verify_processes(data_dir: Path, marker: Marker) -> None:
    """Raise :class:`MarkerMismatch` unless the marker's live processes are this system's."""
    directory = Path(data_dir)
    if marker.base == "simple":
        _ours(directory, marker.owner_pid, "the in-process system's owner")
        if not _holds(marker.owner_pid, directory / EVENTS):
            raise MarkerMismatch(directory, f"pid {marker.owner_pid} does not have {directory / EVENTS} open")
        return
    if marker.admin_pid is None or marker.admin_pgid is None:
        raise MarkerMismatch(directory, "the marker names no admin process")
    _ours(directory, marker.admin_pid, "the admin")
    if marker.admin_start_ticks is None or process_start_ticks(marker.admin_pid) != marker.admin_start_ticks:
        raise MarkerMismatch(directory, f"pid {marker.admin_pid} is not the admin the marker recorded (start time)")
    group = _pgid(marker.admin_pid)
    if group != marker.admin_pgid:
        raise MarkerMismatch(
            directory, f"the admin (pid {marker.admin_pid}) is in process group {group}, not {marker.admin_pgid}")
    if not _holds(marker.admin_pid, directory / ADMIN_OUTPUT):
        raise MarkerMismatch(
            directory, f"pid {marker.admin_pid} does not write to {directory / ADMIN_OUTPUT}: not this system's admin")


def verify_owner(data_dir: Path, marker: Marker) -> None:
    """Before signalling a foreground owner: it runs as our user and was there before its admin."""
    directory = Path(data_dir)
    _ours(directory, marker.owner_pid, "the owner")
    owner_ticks = process_start_ticks(marker.owner_pid)
    admin_ticks = marker.admin_start_ticks
    if owner_ticks is None or (admin_ticks is not None and owner_ticks > admin_ticks):
        raise MarkerMismatch(directory, f"pid {marker.owner_pid} started after the admin: it cannot have started it")


def _ours(directory: Path, pid: int, what: str) -> None:
    uid = _uid(pid)
    if uid is None:
        raise MarkerMismatch(directory, f"{what} (pid {pid}) is gone")
    if uid != os.geteuid():
        raise MarkerMismatch(directory, f"{what} (pid {pid}) runs as uid {uid}, not as uid {os.geteuid()}")


def _uid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("Uid:"):
                    return int(line.split()[2])  # real, *effective*, saved, fs
    except (OSError, ValueError, IndexError):
        return None
    return None


def _pgid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[2])
    except (OSError, ValueError, IndexError):
        return None


def _holds(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has ``path`` open (the same file: device and inode)."""
    try:
        wanted = os.stat(path)
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            found = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if (found.st_dev, found.st_ino) == (wanted.st_dev, wanted.st_ino):
            return True
    return False
