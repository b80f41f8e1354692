"""The file tools: ``read``, ``write``, ``edit`` (exact-match replace) and ``list``, confined to the session's lease.

Paths are resolved by :mod:`._paths` (the workspace's canonicalisation, links at the last component followed by
hand, re-checked after open). :meth:`grant_request` resolves too, so grants judge the real path on disk; ``run``
resolves again, because the filesystem may have changed since (the lease keeps other *sessions* out, not the
session's own shell commands).

``write`` creates missing parent directories by default (``make_dirs``), one at a time inside verified
directories; its grant request names where they would be, and nothing is made before the run. Writes are atomic
and keep an existing file's permission bits. ``edit`` refuses unless ``old`` occurs exactly once (or
``replace_all``), saying how many times it occurs; it also refuses when the file changed between its read and
its write. File work runs in a worker thread that a cancel waits for. The blocking file work itself (the read of
a regular file, the atomic write, the thread) is in :mod:`._file_io`.

**Parallel writes of one file.** The calls of one model turn run concurrently, and ``edit`` is a
read-modify-write: two edits of one file that both read before either renamed its result would each report
``ok`` while the second rename dropped the first change. A before/after ``(inode, size, mtime)`` comparison cannot
close that window (both comparisons may pass before either rename), and a file lock (``flock``) would not either
(an atomic write replaces the inode the lock is on). So ``write`` and ``edit`` hold a per-path lock of the runtime
process, keyed by the canonical resolved path, across read → check → write (:mod:`._serial`); the effect port
takes the same lock earlier, from the call's intent through its run, so that the digests the ledger's start records
describe the content the call really ran on. Every ``ok`` edit is then in the file. Changes from *outside* the
process are not ordered by it: ``edit``'s comparison still refuses them (``changed_during_edit``).
"""

from __future__ import annotations

import os
import stat
from typing import Any

from pydantic import Field

from ....authorities.grants.rules import Effect, Request
from ._file_io import (
    _atomic_write,
    _existing_mode,
    _guarded,
    _guarded_write,
    _ms,
    _read_regular,
    _rel,
    _sha256,
    _still_at,
)
from ._paths import close_quietly, open_dir, resolve_dir, resolve_file
from .base import Tool, ToolArgs, ToolContext, ToolError, ToolOutcome, ToolRefused, cap_bytes, clean_text
from .compensation import MAX_PREIMAGE_BYTES, preimage_evidence

READ_SCAN_BYTES = 8 * 1024 * 1024  # read never looks further into a file than this
EDIT_MAX_BYTES = 8 * 1024 * 1024  # edit refuses larger files (it must hold the whole text)
WRITE_MAX_BYTES = 8 * 1024 * 1024
LIST_MAX_ENTRIES = 10_000
RECONCILER = "ouroactors.authorities.ledger.reconcilers:file_written"  # settles a lost write by looking at the file
COMPENSATION = "ouroactors ledger compensate EFFECT: the content from before the write, kept in the data dir"
LIST_SCAN_LIMIT = 100_000  # entries read from one directory at most
LIST_MAX_DEPTH = 32  # levels a recursive listing descends


# -- read -------------------------------------------------------------------------------------------


class ReadArgs(ToolArgs):
    path: str = Field(min_length=1, max_length=4096, description="file path, relative to the workspace root")
    offset: int = Field(0, ge=0, description="first line to return (0-based)")
    limit: int | None = Field(None, gt=0, le=1_000_000, description="how many lines to return (default: all)")


class ReadTool(Tool[ReadArgs]):
    name = "read"
    description = "Read a text file of the workspace (optionally a range of lines)."
    effect = Effect.READ
    ledger_kind = "read"  # changes nothing: the ledger's default reconciler settles it after a crash
    reconciler = "ouroactors.authorities.ledger.reconcilers:nothing_to_reconcile"
    Args = ReadArgs
    fingerprint_fields = ("path", "offset", "limit")

    def grant_request(self, args: ReadArgs, ctx: ToolContext) -> Request:
        target = resolve_file(args.path, ctx.root, self.name)
        return Request(principal=ctx.session_id, tool=self.name, effect=self.effect, paths=(target.path,))

    async def run(self, args: ReadArgs, ctx: ToolContext) -> ToolOutcome:
        return await _guarded(self.name, self._run, args, ctx, path=args.path)

    def _run(self, args: ReadArgs, ctx: ToolContext, started: float) -> ToolOutcome:
        target = resolve_file(args.path, ctx.root, self.name)
        data, st = _read_regular(target, ctx.root, self.name, READ_SCAN_BYTES + 1)
        scanned_all = len(data) <= READ_SCAN_BYTES
        data = data[:READ_SCAN_BYTES]
        if args.offset or args.limit is not None:
            lines = data.splitlines(keepends=True)
            end = None if args.limit is None else args.offset + args.limit
            data = b"".join(lines[args.offset:end])
        text, cut = cap_bytes(data, ctx.output_cap_bytes)
        return ToolOutcome(status="ok", output=text, truncated=cut or not scanned_all,
                           output_cap_bytes=ctx.output_cap_bytes, duration_ms=_ms(started),
                           evidence={"path": target.path, "size": st.st_size, "bytes_returned": len(text.encode()),
                                     "scanned_whole_file": scanned_all})


# -- write ------------------------------------------------------------------------------------------


class WriteArgs(ToolArgs):
    path: str = Field(min_length=1, max_length=4096, description="file path, relative to the workspace root")
    content: str = Field(max_length=WRITE_MAX_BYTES, description="the whole new content of the file")
    make_dirs: bool = Field(True, description="create missing parent directories (inside the workspace)")


class WriteTool(Tool[WriteArgs]):
    name = "write"
    description = "Create or replace a file of the workspace with the given content (atomically)."
    effect = Effect.WRITE
    Args = WriteArgs
    fingerprint_fields = ("path", "content", "make_dirs")
    ledger_kind = "file_write"
    reconciler = RECONCILER
    compensation = COMPENSATION
    writes_files = True

    def grant_request(self, args: WriteArgs, ctx: ToolContext) -> Request:
        target = resolve_file(args.path, ctx.root, self.name, "plan" if args.make_dirs else "exist")
        return Request(principal=ctx.session_id, tool=self.name, effect=self.effect, paths=(target.path,))

    def intent(self, args: WriteArgs, ctx: ToolContext) -> dict[str, Any] | None:
        try:
            target = resolve_file(args.path, ctx.root, self.name, "plan" if args.make_dirs else "exist")
            before = _sha256(_read_regular(target, ctx.root, self.name, WRITE_MAX_BYTES + 1)[0]) \
                if target.exists else None
        except (ToolError, OSError):
            return None  # the run says what is wrong
        return {"path": target.path, "before": before, "after": _sha256(args.content.encode())}

    async def run(self, args: WriteArgs, ctx: ToolContext) -> ToolOutcome:
        return await _guarded_write(self.name, self._run, args, ctx, "create" if args.make_dirs else "exist",
                                    path=args.path, written=False)

    def _run(self, args: WriteArgs, ctx: ToolContext, started: float, locked: str) -> ToolOutcome:
        target = resolve_file(args.path, ctx.root, self.name, "create" if args.make_dirs else "exist")
        _still_at(target, locked, self.name)
        data = args.content.encode()
        keep_mode = _existing_mode(target, self.name)
        before = _read_regular(target, ctx.root, self.name, MAX_PREIMAGE_BYTES + 1)[0] if target.exists else None
        kept = preimage_evidence(ctx.data_dir, before)
        durable = _atomic_write(target, ctx.root, self.name, data, keep_mode)
        rel = _rel(target.path, ctx.root)
        verb = "replaced" if target.exists else "created"
        return ToolOutcome(status="ok", output=f"{verb} {rel} ({len(data)} bytes)", duration_ms=_ms(started),
                           output_cap_bytes=ctx.output_cap_bytes,
                           evidence={"path": target.path, "written": True, "created": not target.exists,
                                     "bytes_written": len(data), "sha256": _sha256(data),
                                     "dirs_created": list(target.created), "durable": durable, **kept})


# -- edit -------------------------------------------------------------------------------------------


class EditArgs(ToolArgs):
    path: str = Field(min_length=1, max_length=4096, description="file path, relative to the workspace root")
    old: str = Field(min_length=1, max_length=EDIT_MAX_BYTES, description="exact text to replace")
    new: str = Field(max_length=EDIT_MAX_BYTES, description="replacement text")
    replace_all: bool = Field(False, description="replace every occurrence instead of requiring exactly one")


def occurrences(text: str, old: str) -> int:
    """How many places ``old`` occurs; overlapping ones count when that decides ambiguity (``aa`` in ``aaa``: 2).

    ``str.count`` (non-overlapping, C speed) answers whenever it finds two or more: ambiguous either way. Only
    below two are overlapping matches looked for, and then they all overlap the first, so the loop is short.
    """
    found = text.count(old)
    if found >= 2:
        return found
    count, at = 0, text.find(old)
    while at >= 0:
        count += 1
        at = text.find(old, at + 1)
    return count


class EditTool(Tool[EditArgs]):
    name = "edit"
    description = ("Replace an exact piece of text in a workspace file. The text must occur exactly once unless "
                   "replace_all is set; otherwise nothing changes and the number of matches is reported.")
    effect = Effect.WRITE
    Args = EditArgs
    fingerprint_fields = ("path", "old", "new", "replace_all")
    ledger_kind = "file_write"
    reconciler = RECONCILER
    compensation = COMPENSATION
    writes_files = True

    def grant_request(self, args: EditArgs, ctx: ToolContext) -> Request:
        target = resolve_file(args.path, ctx.root, self.name)
        return Request(principal=ctx.session_id, tool=self.name, effect=self.effect, paths=(target.path,))

    def intent(self, args: EditArgs, ctx: ToolContext) -> dict[str, Any] | None:
        """The file's digest now and after the edit (the same replacement :meth:`_run` makes); None when the edit
        would not write (no match, an ambiguous one, not a UTF-8 file…): the run reports that."""
        try:
            target = resolve_file(args.path, ctx.root, self.name)
            data = _read_regular(target, ctx.root, self.name, EDIT_MAX_BYTES + 1)[0]
            text = data.decode("utf-8")
        except (ToolError, OSError, UnicodeDecodeError):
            return None
        found = occurrences(text, args.old)
        if len(data) > EDIT_MAX_BYTES or found == 0 or (found > 1 and not args.replace_all):
            return None
        new_text = text.replace(args.old, args.new) if args.replace_all else text.replace(args.old, args.new, 1)
        return {"path": target.path, "before": _sha256(data), "after": _sha256(new_text.encode())}

    async def run(self, args: EditArgs, ctx: ToolContext) -> ToolOutcome:
        return await _guarded_write(self.name, self._run, args, ctx, "exist", path=args.path, written=False)

    def _run(self, args: EditArgs, ctx: ToolContext, started: float, locked: str) -> ToolOutcome:
        target = resolve_file(args.path, ctx.root, self.name)
        _still_at(target, locked, self.name)
        data, st = _read_regular(target, ctx.root, self.name, EDIT_MAX_BYTES + 1)
        if len(data) > EDIT_MAX_BYTES:
            raise ToolRefused(self.name, f"{target.path} is larger than {EDIT_MAX_BYTES} bytes", kind="too_large")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ToolRefused(self.name, f"{target.path} is not UTF-8 text (byte {exc.start})",
                              kind="not_text") from None
        found = occurrences(text, args.old)
        if found == 0 or (found > 1 and not args.replace_all):
            why = "not found" if found == 0 else f"found {found} times (ambiguous; give more context or replace_all)"
            return ToolOutcome(status="failed", error=f"old text {why} in {_rel(target.path, ctx.root)}; "
                                                      "nothing changed",
                               error_kind="no_match" if found == 0 else "ambiguous_match",
                               output_cap_bytes=ctx.output_cap_bytes, duration_ms=_ms(started),
                               evidence={"path": target.path, "matches": found, "written": False})
        new_text = text.replace(args.old, args.new) if args.replace_all else text.replace(args.old, args.new, 1)
        now = os.lstat(target.path)
        if (now.st_ino, now.st_size, now.st_mtime_ns) != (st.st_ino, st.st_size, st.st_mtime_ns):
            raise ToolRefused(self.name, f"{target.path} changed while it was being edited; nothing written",
                              kind="changed_during_edit")
        out = new_text.encode()
        kept = preimage_evidence(ctx.data_dir, data)
        durable = _atomic_write(target, ctx.root, self.name, out, stat.S_IMODE(st.st_mode))
        replaced = text.count(args.old) if args.replace_all else 1
        return ToolOutcome(status="ok", output=f"edited {_rel(target.path, ctx.root)}: {replaced} replacement(s)",
                           output_cap_bytes=ctx.output_cap_bytes, duration_ms=_ms(started),
                           evidence={"path": target.path, "matches": found, "replacements": replaced,
                                     "written": True, "bytes_written": len(out), "sha256_before": _sha256(data),
                                     "sha256": _sha256(out), "durable": durable, **kept})


# -- list -------------------------------------------------------------------------------------------


class ListArgs(ToolArgs):
    path: str = Field(".", min_length=1, max_length=4096, description="directory, relative to the workspace root")
    recursive: bool = Field(False, description="descend into subdirectories (symlinks are listed, not followed)")
    max_entries: int = Field(1000, gt=0, le=LIST_MAX_ENTRIES)


class ListTool(Tool[ListArgs]):
    name = "list"
    description = "List a workspace directory: directories end with '/', symlinks show their target."
    effect = Effect.READ
    ledger_kind = "read"  # changes nothing: the ledger's default reconciler settles it after a crash
    reconciler = "ouroactors.authorities.ledger.reconcilers:nothing_to_reconcile"
    Args = ListArgs
    fingerprint_fields = ("path", "recursive", "max_entries")

    def grant_request(self, args: ListArgs, ctx: ToolContext) -> Request:
        path = resolve_dir(args.path, ctx.root, self.name)
        return Request(principal=ctx.session_id, tool=self.name, effect=self.effect, paths=(path,))

    async def run(self, args: ListArgs, ctx: ToolContext) -> ToolOutcome:
        return await _guarded(self.name, self._run, args, ctx, path=args.path)

    def _run(self, args: ListArgs, ctx: ToolContext, started: float) -> ToolOutcome:
        top = resolve_dir(args.path, ctx.root, self.name)
        lines: list[str] = []
        more = self._walk(top, top, ctx.root, args, lines)
        text, cut = cap_bytes("\n".join(clean_text(line) for line in lines).encode(), ctx.output_cap_bytes)
        return ToolOutcome(status="ok", output=text, truncated=cut or more, output_cap_bytes=ctx.output_cap_bytes,
                           duration_ms=_ms(started), evidence={"path": top, "entries": len(lines),
                                                               "complete": not more})

    def _walk(self, top: str, directory: str, root: str, args: ListArgs, lines: list[str], depth: int = 0) -> bool:
        """Append entries; True when the listing is incomplete (``max_entries``, a directory too large or deep).

        Bounded on every axis a hostile tree could push: entries kept, entries scanned per directory, depth.
        """
        dfd = open_dir(directory, root, self.name)
        found: list[tuple[str, str]] = []  # (name, "-> target" | "/" | "(size bytes)")
        incomplete = False
        try:
            with os.scandir(dfd) as it:
                for entry in it:
                    if len(found) >= LIST_SCAN_LIMIT:
                        incomplete = True
                        break
                    if entry.is_symlink():
                        found.append((entry.name, "-> " + os.readlink(entry.name, dir_fd=dfd)))
                    elif entry.is_dir(follow_symlinks=False):
                        found.append((entry.name, "/"))
                    else:
                        found.append((entry.name, f"({entry.stat(follow_symlinks=False).st_size} bytes)"))
        finally:
            close_quietly(dfd)
        prefix = "" if directory == top else directory[len(top.rstrip("/")) + 1:] + "/"
        for name, info in sorted(found):
            if len(lines) >= args.max_entries:
                return True
            if info == "/":
                lines.append(f"{prefix}{name}/")
                if args.recursive and depth + 1 >= LIST_MAX_DEPTH:
                    incomplete = True
                elif args.recursive and self._walk(top, f"{directory}/{name}", root, args, lines, depth + 1):
                    if len(lines) >= args.max_entries:
                        return True
                    incomplete = True
            else:
                lines.append(f"{prefix}{name} {info}")
        return incomplete
