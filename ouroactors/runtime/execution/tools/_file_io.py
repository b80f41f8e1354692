"""The file tools' blocking file work: read a regular file, write one atomically, run either in a thread.

Used by :mod:`.files`; every path here is already resolved (:mod:`._paths`) and every open is relative to a
verified directory descriptor without following links.

Writes are atomic: a temp file in the same directory (``O_EXCL | O_NOFOLLOW``), fsync, ``rename`` over the
name, fsync of the directory. ``rename`` replaces a symlink planted at the name instead of writing through it.
An existing file keeps its permission bits. File work is short and bounded by the size caps, so it runs in a
worker thread that a cancel waits for (a half-applied write is worse than a late cancel): :func:`_guarded`; a tool
that writes a file runs it with :func:`_guarded_write`, under the write lock of the file's resolved path
(:mod:`._serial`), and its work checks that the path still resolves there.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import stat
import time
from collections.abc import Callable
from typing import Any

import trio

from ._paths import Parents, PathRefused, Target, close_quietly, open_dir, open_in, resolve_file
from ._serial import PathBusy, serialised
from .base import ToolContext, ToolOutcome, ToolRefused


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _failed(exc: ToolRefused, started: float, **evidence: Any) -> ToolOutcome:
    return ToolOutcome(status="failed", error=exc.detail, error_kind=exc.kind, evidence=evidence,
                       duration_ms=_ms(started))


async def _guarded(tool: str, run: Callable[[Any, ToolContext, float], ToolOutcome], args: Any, ctx: ToolContext,
                   **evidence: Any) -> ToolOutcome:
    """Run the blocking file work in a thread; a refusal or an I/O error becomes a ``failed`` outcome.

    An ``OSError`` reaching here happened before anything was written (writes turn their own errors into
    refusals, and report a visible-but-unproven write as written), so ``failed`` is the honest settlement.
    """
    started = time.monotonic()
    try:
        return await trio.to_thread.run_sync(run, args, ctx, started)
    except ToolRefused as exc:
        return _failed(exc, started, **evidence)
    except OSError as exc:
        return _failed(ToolRefused(tool, f"I/O error: {exc.strerror or exc}", kind="io_error"), started, **evidence)


async def _guarded_write(tool: str, run: Callable[[Any, ToolContext, float, str], ToolOutcome], args: Any,
                         ctx: ToolContext, parents: Parents, **evidence: Any) -> ToolOutcome:
    """:func:`_guarded`, holding the write lock of the file's resolved path (:mod:`._serial`) across the whole run
    (read, check, write); ``run`` gets the path it is locked for as its last argument (see :func:`_still_at`)."""
    started = time.monotonic()
    try:
        locked = resolve_file(args.path, ctx.root, tool, "plan" if parents == "create" else parents).path
    except ToolRefused as exc:
        return _failed(exc, started, **evidence)
    except OSError as exc:
        return _failed(ToolRefused(tool, f"I/O error: {exc.strerror or exc}", kind="io_error"), started, **evidence)
    try:
        async with serialised((locked,)):
            return await _guarded(tool, lambda a, c, s: run(a, c, s, locked), args, ctx, **evidence)
    except PathBusy:
        return _failed(_moved(tool, locked, "it resolves to a file another call is writing"), started, **evidence)


def _still_at(target: Target, locked: str, tool: str) -> None:
    """The file work's own resolution must be the path it holds the lock of (a link changed in between: refused)."""
    if target.path != locked:
        raise _moved(tool, locked, f"it resolves to {target.path} now")


def _moved(tool: str, locked: str, why: str) -> ToolRefused:
    return ToolRefused(tool, f"{locked} changed while the write was prepared ({why}); nothing written",
                       kind="path_changed")


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _rel(path: str, root: str) -> str:
    return "." if path == root else path[len(root.rstrip("/")) + 1:]


def _read_regular(target: Target, root: str, tool: str, limit: int) -> tuple[bytes, os.stat_result]:
    """Up to ``limit`` bytes of a regular file (never blocks on a FIFO or device: it is refused first)."""
    if not target.exists:
        raise PathRefused(tool, f"{target.path} does not exist", "not_found")
    dfd = open_dir(target.parent, root, tool)
    try:
        fd = open_in(dfd, target.name, os.O_RDONLY | os.O_NONBLOCK, tool, target.path)
    finally:
        close_quietly(dfd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ToolRefused(tool, f"{target.path} is not a regular file", kind="not_a_file")
        chunks, got = [], 0
        while got < limit:
            chunk = os.read(fd, min(1 << 20, limit - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks), st
    finally:
        close_quietly(fd)


def _atomic_write(target: Target, root: str, tool: str, data: bytes, keep_mode: int | None) -> bool:
    """Temp file + fsync + rename in the same directory + directory fsync. Never writes through a link.

    Every failure before the rename is a refusal (nothing changed). After the rename the new content is visible:
    a failed directory fsync then returns False (written, durability not proven) instead of claiming failure.
    """
    dfd = open_dir(target.parent, root, tool)
    tmp = f".{target.name[:200]}.{secrets.token_hex(6)}.ouro-tmp"
    try:
        mode = keep_mode if keep_mode is not None else 0o644
        fd = open_in(dfd, tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, tool, f"{target.parent}/{tmp}", mode)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fchmod(fd, mode)  # the umask must not change an existing file's bits
            os.fsync(fd)
        finally:
            close_quietly(fd)
        try:
            os.rename(tmp, target.name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except OSError as exc:
            raise ToolRefused(tool, f"cannot replace {target.path}: {exc.strerror}", kind="write_failed") from None
        tmp = ""
        try:
            os.fsync(dfd)
        except OSError:
            return False
        return True
    except OSError as exc:
        raise ToolRefused(tool, f"cannot write {target.path}: {exc.strerror}", kind="write_failed") from None
    finally:
        if tmp:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
        close_quietly(dfd)


def _existing_mode(target: Target, tool: str) -> int | None:
    if not target.exists:
        return None
    st = os.lstat(target.path)
    if not stat.S_ISREG(st.st_mode):
        raise ToolRefused(tool, f"{target.path} exists and is not a regular file", kind="not_a_file")
    return stat.S_IMODE(st.st_mode)
