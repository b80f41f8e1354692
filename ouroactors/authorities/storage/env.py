"""Opening the node's LMDB environment, the way every process must.

Rules from measurement (``shared/notes/lmdb.md``):

* One environment per path per process: LMDB forbids a second open (py-lmdb raises), so
  :func:`open_env` keeps a per-process registry and hands out the same handle.
* Never across ``fork``: a forked child must neither use nor close an inherited handle (closing
  frees the parent's reader slots). The registry remembers the pid that opened each handle and
  refuses to serve it to another process. Thespian forks actors, so a process that opened the
  environment must create no children: writers are leaf actors.
* Every process opens with the same large ``map_size`` (sparse: only address space) and the same
  ``max_readers``/``max_dbs``; nothing resizes in normal operation.
* ``sync=True, metasync=True``: a commit that returned is durable. Never ``lock=False``.
* ``reader_check()`` at open and periodically: a killed reader otherwise pins pages forever.
* Before LMDB maps ``data.mdb``, its size is checked against its own meta pages
  (:mod:`.datafile`): a truncated file is refused with :class:`DataFileDamaged` instead of
  crashing the first process that reads a missing page (SIGBUS). The check and LMDB's creation of
  a new environment are serialised by ``flock`` on ``open.lock``, so a file another process is
  creating is never mistaken for a damaged one.
* The files are private: created ``0600`` in a ``0700`` directory, and an existing file (or the
  directory) that another user owns, or that group or others may write, is refused
  (:class:`~ouroactors.core.trusted_files.UntrustedFile`); one only readable by others is
  tightened to ``0600``. A data dir that group or others may enter is warned about, once per process
  (:func:`_warn_if_shared`): what the system writes beside the environment (its event log, its secret's name, its
  logs) is the node's own; ``ouroactors run`` makes the data dirs it creates ``0700``.
* Opening takes LMDB's locks, which it keeps in ``lock.mdb`` (created if missing, as ``open.lock`` is): even a
  read-only look (``storage quarantine list`` on a stopped system) opens the environment this way, since
  ``lock=False`` and a read-only environment are not safe beside a writer (``shared/notes/lmdb.md`` pitfall 9).

The environment's metadata lives in the ``meta`` database: the schema version (a data dir written
by a newer schema is refused, naming the version) and the storage generation that writers check
inside their own write transactions (fencing enforced by the transaction, not by a message).
"""

from __future__ import annotations

import fcntl
import logging
import os
import stat
import struct
from dataclasses import dataclass, replace
from pathlib import Path

import lmdb

from ...core.trusted_files import check_trusted
from .datafile import DATA_FILE, LOCK_FILE, check_data_file
from .datafile import DataFileDamaged as DataFileDamaged
from .datafile import StorageError as StorageError

log = logging.getLogger("ouroactors.storage")

# py-lmdb 3 imports this helper at a process's first open (~0.7 ms, measured in forked actors): imported here, it is
# inherited by every actor forked after this module was loaded.
try:
    import lmdb._envid
except ImportError:  # an older py-lmdb opens without it
    pass

SCHEMA_VERSION = 1
DEFAULT_MAP_SIZE = 256 << 30  # 256 GiB of address space; the file stays sparse
META_DB = b"meta"
# Every named database, opened once when the environment opens: ``open_db`` starts a transaction
# of its own, which would deadlock inside a writer's transaction.
KNOWN_DBS = (META_DB, b"ledger", b"ledger_seq", b"ledger_writers", b"ledger_runs", b"quarantine", b"grants",
             b"workspace", b"journal", b"journal_anchor", b"journal_blobs",
             b"sessions", b"sessions_live", b"session_events", b"session_resume", b"session_timers")
SCHEMA_KEY = b"schema_version"
GENERATION_KEY = b"storage_generation"
OPEN_LOCK = "open.lock"
FILE_MODE = 0o600
DIR_MODE = 0o700


def generation_key(authority: str) -> bytes:
    """Where an authority publishes its current generation in ``meta`` (``storage_generation``, …)."""
    return f"{authority}_generation".encode()


class SchemaTooNew(StorageError):
    def __init__(self, path: str, found: int, supported: int) -> None:
        self.found = found
        self.supported = supported
        super().__init__(
            f"{path} was written by storage schema version {found}; this build supports up to {supported} "
            "— refusing to start rather than misread it (upgrade ouroactors)"
        )


@dataclass(frozen=True)
class StorageConfig:
    path: str
    map_size: int = DEFAULT_MAP_SIZE
    max_readers: int = 1024
    max_dbs: int = 32

    @classmethod
    def under(cls, data_dir: str | os.PathLike[str], **overrides: int) -> StorageConfig:
        return cls(path=str(Path(data_dir) / "lmdb"), **overrides)


_open: dict[str, tuple[int, lmdb.Environment, StorageConfig]] = {}
_dbs: dict[int, dict[bytes, lmdb._Database]] = {}
_handed_out: dict[str, int] = {}  # path -> how many times open_env handed its handle out in this process


def open_env(config: StorageConfig) -> lmdb.Environment:
    """The process's one handle on ``config.path`` (opened on first use, in this process)."""
    key = os.path.realpath(config.path)
    found = _open.get(key)
    if found is not None:
        pid, env, opened_with = found
        if pid != os.getpid():
            raise StorageError(
                f"{config.path}: this handle was opened by pid {pid} before a fork; a forked process must "
                "open its own (and never close the inherited one)"
            )
        if replace(opened_with, path=config.path) != config:  # the same path may be spelled otherwise
            raise StorageError(f"{config.path} is already open in this process with other settings")
        _handed_out[key] += 1
        return env
    env = _open_checked(config)
    env.reader_check()
    _dbs[id(env)] = {name: env.open_db(name) for name in KNOWN_DBS}
    _open[key] = (os.getpid(), env, config)
    _handed_out[key] = 1
    return env


def is_open(config: StorageConfig) -> bool:
    """Whether this process holds a handle on ``config.path`` it opened itself (not one inherited across a fork)."""
    found = _open.get(os.path.realpath(config.path))
    return found is not None and found[0] == os.getpid()


def handed_out(config: StorageConfig) -> int:
    """How many times :func:`open_env` handed out this process's handle on ``config.path`` since it was opened (0:
    not open). A borrower that opened the handle may close it only while this is still what it was after its own
    open: otherwise another part of the process holds the handle too."""
    key = os.path.realpath(config.path)
    return _handed_out.get(key, 0) if is_open(config) else 0


def _open_checked(config: StorageConfig) -> lmdb.Environment:
    """Check the directory and files, then let LMDB open (or create) them, under ``open.lock``."""
    directory = Path(config.path)
    # the data dir around it too, when made here (``journal import --data-dir NEW``): 0700 as a system's own is
    directory.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    directory.mkdir(mode=DIR_MODE, exist_ok=True)
    check_trusted(directory)
    _warn_if_shared(directory.parent)
    lock_path = directory / OPEN_LOCK
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    try:
        check_trusted(lock_path)
        # flock, not fcntl: LMDB holds fcntl locks on lock.mdb, and those would not mix.
        fcntl.flock(fd, fcntl.LOCK_EX)
        for name in (DATA_FILE, LOCK_FILE):
            _check_private(directory / name)
        check_data_file(config.path)
        return lmdb.open(
            config.path, map_size=config.map_size, max_readers=config.max_readers, max_dbs=config.max_dbs,
            subdir=True, sync=True, metasync=True, lock=True, writemap=False, readahead=False, mode=FILE_MODE,
        )
    finally:
        os.close(fd)  # releases the flock


_warned_shared: set[str] = set()


def _warn_if_shared(data_dir: Path) -> None:
    """Warn (once per process and directory) when group or others may enter ``data_dir``: not refused, as an
    existing data dir is its owner's to arrange, but said, naming the mode and the fix."""
    try:
        mode = stat.S_IMODE(os.stat(data_dir).st_mode)
    except OSError:
        return
    key = os.path.realpath(data_dir)
    if mode & 0o077 and key not in _warned_shared:
        _warned_shared.add(key)
        log.warning("data dir %s: mode %04o lets other users look into it (a system's data dir is private, "
                    "0700); chmod 700 it", data_dir, mode)


def _check_private(path: Path) -> None:
    """Refuse a file another user could have written; make one others may read private."""
    if not check_trusted(path):
        return
    mode = stat.S_IMODE(os.lstat(path).st_mode)
    if mode & 0o077:
        log.warning("%s: mode %04o lets other users read it; tightening to %04o", path, mode, FILE_MODE)
        os.chmod(path, FILE_MODE)


def close_env(config: StorageConfig) -> None:
    """Close this process's handle (only the process that opened it may)."""
    key = os.path.realpath(config.path)
    found = _open.get(key)
    if found is not None and found[0] == os.getpid():
        del _open[key]
        _handed_out.pop(key, None)
        _dbs.pop(id(found[1]), None)
        found[1].close()


def db(env: lmdb.Environment, name: bytes) -> lmdb._Database:
    """A named database of an environment opened by :func:`open_env`."""
    try:
        return _dbs[id(env)][name]
    except KeyError:
        raise StorageError(f"unknown database {name!r} (add it to KNOWN_DBS)") from None


def meta_db(env: lmdb.Environment) -> lmdb._Database:
    return db(env, META_DB)


def encode_u64(value: int) -> bytes:
    return struct.pack(">Q", value)


def decode_u64(data: bytes | memoryview) -> int:
    return int(struct.unpack(">Q", data)[0])


def ensure_schema(env: lmdb.Environment, path: str) -> int:
    """Stamp a new environment with our schema version; refuse one written by a newer schema."""
    meta = meta_db(env)
    with env.begin(write=True, db=meta) as txn:
        raw = txn.get(SCHEMA_KEY)
        if raw is None:
            txn.put(SCHEMA_KEY, encode_u64(SCHEMA_VERSION))
            return SCHEMA_VERSION
        found = decode_u64(raw)
    if found > SCHEMA_VERSION:
        raise SchemaTooNew(path, found, SCHEMA_VERSION)
    return found


def read_generation(env: lmdb.Environment) -> int | None:
    with env.begin(db=meta_db(env)) as txn:
        raw = txn.get(GENERATION_KEY)
    return decode_u64(raw) if raw is not None else None


def env_panicked(env: lmdb.Environment) -> bool:
    """Whether the environment is in LMDB's PANIC state (a failed meta-page write)."""
    try:
        env.begin().abort()
    except lmdb.PanicError:
        return True
    except lmdb.Error:
        return False
    return False
