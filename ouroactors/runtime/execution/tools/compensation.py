"""Compensation for file writes: undo a ``write`` or ``edit`` that cannot be taken back by retrying.

A write is not idempotent in the way that matters to an operator: once it ran, running it "again" does not give
back what the file held before. So the file tools keep the **pre-image** — the file's content before the write,
content-addressed by its sha256 under the data dir's ``preimages/`` (0600, fsynced before the file is touched) —
and the write's ledger start records the intent (path, digest before, digest after). ``ouroactors ledger
compensate EFFECT`` then undoes it as an effect of its own, recorded in the ledger like any other:

1. the effect must be a ``file_write`` that may have happened (``ok`` or ``ambiguous``) with its intent;
2. the file must still hold exactly what the write left (digest ``after``): anything else means someone changed
   it since, and restoring would undo their change too — refused, nothing done;
3. the pre-image must be there and hash to ``before`` (a write that created the file has none: the file is
   removed instead);
4. a ``compensation`` entry is started (its own intent: from ``after`` back to ``before``, so the ``file_write``
   reconciler can settle it after a crash), the file restored (temp file, fsync, rename, directory fsync; never
   through a link), and the entry settled ``ok``.

:func:`plan` makes the decision from what it reads (no writes); :func:`apply` performs it. Pre-images are never
deleted automatically: the operator may need one long after the session ended (``rm`` them when no longer needed).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ....core.errors import OuroactorsError

PREIMAGES = "preimages"
MAX_PREIMAGE_BYTES = 8 * 1024 * 1024  # a larger file's pre-image is not kept (its write cannot be compensated)


class CannotCompensate(OuroactorsError):
    """The write cannot be undone safely: nothing was changed."""


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def keep_preimage(data_dir: str | None, data: bytes) -> str | None:
    """Keep ``data`` (a file's content before a write) durably under the data dir; its sha256, or None if it is
    not kept (no data dir, or larger than :data:`MAX_PREIMAGE_BYTES`)."""
    if data_dir is None or len(data) > MAX_PREIMAGE_BYTES:
        return None
    digest = hashlib.sha256(data).hexdigest()
    where = Path(data_dir) / PREIMAGES
    final = where / digest
    if final.exists():  # content-addressed: the same bytes are kept once
        return digest
    where.mkdir(mode=0o700, exist_ok=True)
    tmp = where / f".{digest}.{secrets.token_hex(4)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, final)
    _fsync_dir(where)
    return digest


def preimage_evidence(data_dir: str | None, before: bytes | None) -> dict[str, Any]:
    """Keep a file's content before a write (:func:`keep_preimage`) and say so, as the write's evidence.

    Called before the file is touched. A pre-image that cannot be kept does not stop the write (its ledger start
    admitted it): the evidence says so, and that write cannot be compensated."""
    if before is None:
        return {"preimage": None}  # the write creates the file: compensating removes it
    try:
        return {"preimage": keep_preimage(data_dir, before)}
    except OSError as exc:
        return {"preimage": None, "preimage_error": f"not kept: {exc.strerror}"}


def _read_nofollow(path: str) -> bytes | None:
    """The regular file at ``path`` (never through a link); None if there is none; raises if something else is."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CannotCompensate(f"{path}: {exc.strerror} (a link or unreadable): not touched") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CannotCompensate(f"{path} is not a regular file: not touched")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _sha(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Plan:
    """What compensating ``effect_id`` does to ``path``: write ``content`` back, or remove the file (None)."""

    effect_id: str
    path: str
    after: str  # the digest the write left (what the file holds now)
    before: str | None  # the digest it is restored to (None: the write created the file; it is removed)
    content: bytes | None

    def intent(self) -> dict[str, Any]:
        """The compensation's own intent, for its ledger start (and the ``file_write`` reconciler)."""
        return {"path": self.path, "before": self.after, "after": self.before}


def _check_target(path: str, data_dir: str, where: str) -> None:
    """The path an intent names is judged where it lands before anything is read or written: absolute, its
    directory already canonical (a write's intent names the resolved path; a link or ``..`` in it did not come
    from one), and never inside the data dir (its credentials, LMDB files and pre-images are not a workspace)."""
    parent = os.path.dirname(path)
    if not os.path.isabs(path) or os.path.realpath(parent) != parent or os.path.basename(path) in ("", ".", ".."):
        raise CannotCompensate(f"{where}: its intent names {path!r}, not a canonical path: not touched")
    data = os.path.realpath(data_dir)
    if path == data or path.startswith(data.rstrip("/") + "/"):
        raise CannotCompensate(f"{where}: its intent names {path!r}, inside the data dir: not touched")


def plan(entry: Any, data_dir: str) -> Plan:
    """Decide how to compensate the ledger ``entry``, from the file and the kept pre-image; nothing is written."""
    where = f"effect {entry.effect_id!r}"
    if entry.kind != "file_write":
        raise CannotCompensate(f"{where} is a {entry.kind!r} effect: only file writes (write, edit) can be "
                               "compensated")
    if entry.status.value not in ("ok", "ambiguous"):
        raise CannotCompensate(f"{where} is {entry.status.value}: it did not write, there is nothing to undo")
    intent = (entry.evidence or {}).get("intent")
    if not isinstance(intent, dict) or not isinstance(intent.get("path"), str) or not intent.get("after"):
        raise CannotCompensate(f"{where} recorded no intent (path and digests): it cannot be checked, not undone")
    path, before, after = intent["path"], intent.get("before"), intent["after"]
    _check_target(path, data_dir, where)
    now = _sha(_read_nofollow(path))
    if now != after:
        found = "no file" if now is None else f"content {now[:12]}"
        raise CannotCompensate(f"{path} changed since {where} wrote it (it left {after[:12]}, now {found}): "
                               "restoring would undo those changes too; not touched")
    if before is None:
        return Plan(entry.effect_id, path, after, None, None)
    kept = Path(data_dir) / PREIMAGES / before
    content = _read_nofollow(str(kept))
    if content is None or _sha(content) != before:
        raise CannotCompensate(f"the content {path} held before {where} ({before[:12]}) was not kept "
                               f"(no valid {kept}): not touched")
    return Plan(entry.effect_id, path, after, before, content)


def apply(p: Plan) -> dict[str, Any]:
    """Restore the file as :func:`plan` decided; the evidence for the compensation's settlement."""
    target = Path(p.path)
    if p.content is None:
        target.unlink()
        _fsync_dir(target.parent)
        return {"compensates": p.effect_id, "path": p.path, "removed": True, "sha256": None}
    mode = stat.S_IMODE(os.lstat(target).st_mode)
    tmp = target.parent / f".{target.name[:200]}.{secrets.token_hex(6)}.ouro-tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        view = memoryview(p.content)
        while view:
            view = view[os.write(fd, view):]
        os.fchmod(fd, mode)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, target)
    _fsync_dir(target.parent)
    return {"compensates": p.effect_id, "path": p.path, "removed": False, "sha256": p.before}


__all__ = ["MAX_PREIMAGE_BYTES", "PREIMAGES", "CannotCompensate", "Plan", "apply", "keep_preimage", "plan",
           "preimage_evidence"]
