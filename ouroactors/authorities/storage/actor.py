"""The storage authority: first child of the agent tree, owner of the node's LMDB environment.

It creates the environment, checks the schema version (a newer one is refused and the start
fails, naming it), runs the stale-reader check at start and periodically, takes consistent
backups, and its generation is the environment's: it writes the generation into the ``meta``
database at start, so every writer bound to another generation is fenced off inside its own
write transaction. A reopen is a new generation announced without a crash (rest_for_one then
restarts every writer after it); a panicked environment makes this process crash, and the
restart is a new generation too.

Writers (ledger, grants, workspace) are leaf actors that open the same environment in their own
processes — LMDB serialises writers across processes — so an effect costs one actor round trip
and one commit per record, with no hop through this actor (see README, architecture notes).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

import lmdb
from thespian.actors import WakeupMessage

from ...core.boundary import Size, Text
from ...core.errors import BadRequest
from ...supervision.worker import Worker
from .commit import Committed, write
from .datafile import DATA_FILE, check_data_file
from .env import (
    DIR_MODE,
    FILE_MODE,
    GENERATION_KEY,
    StorageConfig,
    StorageError,
    close_env,
    encode_u64,
    ensure_schema,
    meta_db,
    open_env,
)

log = logging.getLogger("ouroactors.storage")
_READER_CHECK = "ouroactors:reader-check"
_DATA_CHECK = "ouroactors:data-check"


@dataclass(frozen=True)
class Backup:
    """Write a consistent, compacted copy of the environment into the empty directory ``target``."""

    target: Annotated[str, Size(1, 4096)]

    def check(self) -> None:
        if not self.target:
            raise BadRequest("Backup", "target", "is empty: name the directory the backup goes into", "''")
        if not self.target.startswith("/"):
            raise BadRequest("Backup", "target", "must be an absolute path", repr(self.target[:80]))
        if "\0" in self.target:
            raise BadRequest("Backup", "target", "holds a NUL byte", repr(self.target[:80]))


def backup_target(target: str, data_dir: str, *env_paths: str) -> Path:
    """The real directory a backup into ``target`` writes, judged before anything is created: refused
    (:class:`BadRequest`, field ``target``) when it is a symbolic link (dangling or not: the copy would land
    wherever it points), when its real path is the data dir, inside it or above it (or the environment's
    ``env_paths``: a backup inside the live data dir it copies), and when its parent does not exist (a backup
    creates at most the target itself, never its parents)."""
    shown = repr(target[:200])
    if os.path.islink(target):
        raise BadRequest("Backup", "target", f"is a symbolic link (to {os.readlink(target)!r}): name the real "
                         "directory", shown)
    real = Path(os.path.realpath(target))
    for live in (data_dir, *env_paths):
        live_real = Path(os.path.realpath(live))
        if real == live_real or live_real in real.parents or real in live_real.parents:
            where = "is" if real == live_real else "is inside" if live_real in real.parents else "contains"
            raise BadRequest("Backup", "target", f"{where} the live data dir {live_real} it backs up "
                             f"(real path {real}): choose a directory outside it", shown)
    if not real.parent.exists():
        raise BadRequest("Backup", "target", f"has no parent directory {real.parent} (a backup creates the "
                         "target directory, never its parents)", shown)
    return real


@dataclass(frozen=True)
class Reopen:
    """Close and reopen the environment (e.g. after a restore): a new storage generation."""

    cause: Text = "reopened"


def storage_config(data_dir: str, map_size: int | None = None) -> StorageConfig:
    return StorageConfig.under(data_dir, **({"map_size": map_size} if map_size else {}))


class Storage(Worker):
    """The storage authority. Asks: ``"status"``, :class:`Backup`, :class:`Reopen` (both stamped
    with the storage generation and checked at the door)."""

    protocol = (Backup, Reopen)
    stamped_only = True

    def on_start(self, map_size: int | None = None, reader_check_s: float = 30.0, data_check_s: float = 1.0) -> None:
        assert self.context is not None
        self.config = storage_config(self.context.data_dir, map_size)
        self.reader_check_s = reader_check_s
        self.data_check_s = data_check_s
        self._open()
        self.wakeupAfter(timedelta(seconds=reader_check_s), payload=_READER_CHECK)
        self.wakeupAfter(timedelta(seconds=data_check_s), payload=_DATA_CHECK)

    def _open(self) -> None:
        self.env = open_env(self.config)
        self.schema = ensure_schema(self.env, self.config.path)
        self.stale_readers_cleared = self.env.reader_check()
        self._publish_generation()

    def _publish_generation(self) -> None:
        assert self.generation is not None
        generation = self.generation
        outcome = write(self.env, lambda txn: txn.put(GENERATION_KEY, encode_u64(generation), db=meta_db(self.env)))
        if not isinstance(outcome, Committed):
            raise RuntimeError(f"cannot record storage generation {generation}: {outcome}")

    def on_generation(self, generation: int) -> None:
        self._publish_generation()

    def on_stop(self, reason: Any) -> None:
        close_env(self.config)

    def handle_WakeupMessage(self, message: WakeupMessage, sender: Any) -> None:
        if message.payload == _READER_CHECK:
            cleared = self.env.reader_check()
            if cleared:
                log.warning("%s: cleared %d stale reader slot(s)", self.path, cleared)
            self.wakeupAfter(timedelta(seconds=self.reader_check_s), payload=_READER_CHECK)
        elif message.payload == _DATA_CHECK:
            # A data file cut short under the map crashes this actor with the sizes, before a page
            # read in some writer turns into a SIGBUS; its restart is refused at open (datafile).
            check_data_file(self.config.path)
            self.wakeupAfter(timedelta(seconds=self.data_check_s), payload=_DATA_CHECK)

    def handle_str(self, message: str, sender: Any) -> Any:
        if message == "status":
            return self.status()
        return self.unhandled(message, sender)

    def handle_Backup(self, message: Backup, sender: Any) -> str | StorageError:
        """A refused backup is answered, not a crash: a crash here would restart every writer.

        The copy is the data dir's whole content, which only its owner may read (0700 directories, 0600 files): it
        is written into a private directory (``mkdtemp``: 0700) inside the target, made 0600 there and only then
        moved into the target. LMDB creates the file with the process's umask (0644 here), so a copy made straight
        into an existing, open directory could be opened by another local user while it was being written, and
        that descriptor keeps reading after any later ``chmod``."""
        assert self.context is not None
        target = backup_target(message.target, self.context.data_dir, self.config.path)  # refused: nothing made
        try:
            target.mkdir(mode=DIR_MODE, exist_ok=True)
            if any(target.iterdir()):
                return StorageError(f"backup target {target} is not empty")
            private = Path(tempfile.mkdtemp(prefix=".backup-", dir=target))
            try:
                self.env.copy(str(private), compact=True)  # a consistent snapshot from one read transaction
                os.chmod(private / DATA_FILE, FILE_MODE)
                os.rename(private / DATA_FILE, target / DATA_FILE)
            finally:
                shutil.rmtree(private, ignore_errors=True)
        except (OSError, lmdb.Error) as exc:
            return StorageError(f"cannot back up into {target}: {exc}")
        return str(target)

    def handle_Reopen(self, message: Reopen, sender: Any) -> str:
        close_env(self.config)
        self.env = open_env(self.config)
        self.schema = ensure_schema(self.env, self.config.path)
        self.change_generation(message.cause)  # on_generation writes the new number
        return "reopening"

    def status(self) -> dict[str, Any]:
        info = self.env.info()
        stat = self.env.stat()
        return {
            "path": self.config.path,
            "schema": self.schema,
            "generation": self.generation,
            "map_size": info["map_size"],
            "used_bytes": (info["last_pgno"] + 1) * stat["psize"],
            "readers": info["num_readers"],
            "file_bytes": os.path.getsize(Path(self.config.path) / "data.mdb"),
        }
