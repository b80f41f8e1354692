"""Checking ``data.mdb`` against its own meta pages before LMDB maps it.

LMDB maps the whole data file and reads pages through the map. If the file is shorter than the
pages its newest meta page says are in use (it was truncated, or copied half-way), the first read
of a missing page is a SIGBUS in whatever process touches it — not an error LMDB can return. So
before opening, the file's size is compared with ``(last_pgno + 1) * page_size`` of the meta page
with the larger transaction id (the one LMDB would pick), and a short or unreadable file is refused
with :class:`DataFileDamaged`, naming the file and both sizes. Nothing is written.

The meta layout (LMDB 0.9, 64-bit, little-endian on the machines we run on) is fixed by the file
format: each of the first two pages is a 16-byte page header, then ``MDB_meta``: magic (u32),
version (u32), address (8), mapsize (8), two ``MDB_db`` of 48 bytes each (the free DB's first
u32 holds the page size), ``last_pgno`` (u64) and ``txnid`` (u64).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass

from ...core.errors import OuroactorsError

DATA_FILE = "data.mdb"
LOCK_FILE = "lock.mdb"
MAGIC = 0xBEEFC0DE
VERSION = 1
_HEADER = 16
_MAGIC_AT = _HEADER  # magic, version: <II
_PSIZE_AT = _HEADER + 24  # mm_dbs[FREE_DBI].md_pad
_LAST_PGNO_AT = _HEADER + 120  # last_pgno, txnid: <QQ
_META_BYTES = _LAST_PGNO_AT + 16
_MIN_PAGE = 512
_MAX_PAGE = 1 << 16


class StorageError(OuroactorsError):
    """The environment cannot be used as asked (re-exported by ``env``, where callers import it)."""


class DataFileDamaged(StorageError):
    """``data.mdb`` cannot be what LMDB will map: refuse to open rather than crash on a page read."""

    def __init__(self, path: str, problem: str, *, file_bytes: int | None = None,
                 used_bytes: int | None = None) -> None:
        self.path = path
        self.file_bytes = file_bytes
        self.used_bytes = used_bytes
        super().__init__(f"{path}: {problem}; refusing to open it (restore the data dir from a backup)")


@dataclass(frozen=True)
class Meta:
    """What one meta page says."""

    page_size: int
    last_pgno: int
    txnid: int

    @property
    def used_bytes(self) -> int:
        return (self.last_pgno + 1) * self.page_size


def parse_meta(page: bytes) -> Meta | None:
    """The meta fields of one meta page, or None if it is not a valid LMDB 0.9 meta page."""
    if len(page) < _META_BYTES:
        return None
    magic, version = struct.unpack_from("<II", page, _MAGIC_AT)
    if magic != MAGIC or version != VERSION:
        return None
    (page_size,) = struct.unpack_from("<I", page, _PSIZE_AT)
    last_pgno, txnid = struct.unpack_from("<QQ", page, _LAST_PGNO_AT)
    if not _MIN_PAGE <= page_size <= _MAX_PAGE or page_size & (page_size - 1):
        return None
    return Meta(page_size, last_pgno, txnid)


def newest_meta(first_page: bytes, read_at: Callable[[int], bytes]) -> Meta | None:
    """The meta LMDB would use: the valid one of the first two pages with the larger txnid.

    ``read_at(offset)`` returns the meta bytes at ``offset`` (the second meta page starts at the
    first one's page size). None if either page is invalid: LMDB refuses such a file itself.
    """
    first = parse_meta(first_page)
    if first is None:
        return None
    second = parse_meta(read_at(first.page_size))
    if second is None:
        return None
    return second if second.txnid > first.txnid else first


def check_data_file(env_dir: str) -> Meta | None:
    """Refuse ``env_dir/data.mdb`` if it is shorter than the pages its meta says are in use.

    Returns None when there is no data file yet (a new environment), else the meta that was checked.
    A file that exists but holds no valid meta pages (e.g. truncated to zero) is refused too: LMDB
    would silently start an empty environment over it. Callers serialise this with environment
    creation (see ``env.open_env``), so a file another process is creating is never seen half-made.
    """
    path = os.path.join(env_dir, DATA_FILE)
    try:
        with open(path, "rb") as handle:
            fd = handle.fileno()
            meta = newest_meta(os.pread(fd, _META_BYTES, 0), lambda offset: os.pread(fd, _META_BYTES, offset))
            # The size after the meta: a transaction's pages are written before its meta page, and LMDB never
            # shrinks the file, so the size read now covers the meta read before it unless pages were really lost.
            # Read the other way round, a commit of a running system landing in between (it extends the file and
            # writes a newer meta) looked like a truncation to a process opening the environment beside it.
            size = os.fstat(fd).st_size
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise DataFileDamaged(path, f"cannot be read ({exc.strerror})") from None
    if meta is None:
        raise DataFileDamaged(path, f"has no valid LMDB meta pages ({size} bytes; if this data dir never held "
                                   "data, remove the file)", file_bytes=size)
    if size < meta.used_bytes:
        raise DataFileDamaged(
            path,
            f"is truncated: {size} bytes on disk, but its meta page (txn {meta.txnid}) uses {meta.used_bytes} "
            f"bytes ({meta.last_pgno + 1} pages of {meta.page_size})",
            file_bytes=size, used_bytes=meta.used_bytes,
        )
    return meta
