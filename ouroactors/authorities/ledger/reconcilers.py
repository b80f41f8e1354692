"""Reconcilers the ledger has for every tree: effects whose kind changes nothing outside the session.

A reconciler settles an ``ambiguous`` entry by finding out what its effect did. For most kinds that means asking
the world (the ``http`` tool's asks the target by idempotency key) and, when the world cannot say, the entry stays
ambiguous for an operator. A ``read`` effect (the ``read`` and ``list`` tools) has nothing to find out: reading a
file or listing a directory changes nothing, so whether it ran before its runtime died does not matter to anyone —
only its result was lost, with the runtime. :func:`nothing_to_reconcile` settles it ``failed`` (the result was
never delivered; a re-run turn tells the model so, and it may read again), with evidence saying why. Without it, a
runtime killed in the middle of a read parked its session until an operator settled an effect that had no effect.

A ``file_write`` effect (the ``write`` and ``edit`` tools) is settled by looking at the file: its start records
the intent (:attr:`~.domain.StartRequest.intent`: the canonical path, the digest of the content before — None when
there was no file — and of the content the write leaves). :func:`file_written` hashes the file as it is now: the
intended content means the write happened (``ok``); the content from before — or still no file — means it did
not (``failed``: writing again is safe); anything else stays ambiguous, for an operator: someone else changed the
file, or the entry's intent is missing.

The ledger registers :data:`DEFAULT_RECONCILERS` under whatever a tree configures (``kwargs.reconcilers``); a
tree may replace one by naming its kind itself.
"""

from __future__ import annotations

import hashlib
import os
import stat
from typing import Any

from .domain import INTENT, Entry
from .messages import Verdict

READ_KIND = "read"
FILE_WRITE_KIND = "file_write"
MAX_HASHED_BYTES = 256 << 20  # a larger file is not read to settle a write: the entry stays ambiguous


def nothing_to_reconcile(entry: Entry) -> Verdict:
    """A ``read`` effect: settled ``failed`` — its result was lost, and it changed nothing to look for."""
    return Verdict("failed", {
        "reconciled": True, "effect_class": "read",
        "finding": "a read changes nothing outside the session: its result was lost with the runtime that ran it, "
                   "and reading again is safe",
    })


def file_written(entry: Entry) -> Verdict | None:
    """A ``file_write`` effect: ``ok`` if the file holds what it meant to write, ``failed`` if it is as it was
    before, else None (it stays ambiguous)."""
    intent: Any = (entry.evidence or {}).get(INTENT)
    if not isinstance(intent, dict):
        return None
    path, before, after = intent.get("path"), intent.get("before"), intent.get("after")
    # ``after`` None: the effect removes the file (a compensation of a write that created it)
    if not isinstance(path, str) or not os.path.isabs(path) or not isinstance(after, str | None) or before == after:
        return None
    now = _digest(path)
    if now is _UNREADABLE:
        return None
    finding = {"reconciled": True, "effect_class": "write", "path": path, "sha256_now": now}
    if now == after:
        done = "the file holds the content the write meant to leave" if after else "the file is gone, as meant"
        return Verdict("ok", {**finding, "finding": done})
    if now == before:
        gone = "there is still no file" if now is None else "the file is as it was before the write"
        return Verdict("failed", {**finding, "finding": f"{gone}: the write did not happen; writing again is safe"})
    return None  # changed by someone else since, or not what either digest says: an operator must look


_UNREADABLE = object()


def _digest(path: str) -> str | object | None:
    """The sha256 of the regular file at ``path`` (never following a symlink); None if there is no file there;
    :data:`_UNREADABLE` if something else is there or it cannot be read whole."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError:
        return _UNREADABLE
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_HASHED_BYTES:
            return _UNREADABLE
        h = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
        return h.hexdigest()
    except OSError:
        return _UNREADABLE
    finally:
        os.close(fd)


# A compensation (``ouroactors ledger compensate``) is a file write back to the content from before: the same check.
DEFAULT_RECONCILERS = {READ_KIND: f"{__name__}:nothing_to_reconcile", FILE_WRITE_KIND: f"{__name__}:file_written",
                       "compensation": f"{__name__}:file_written"}

__all__ = ["DEFAULT_RECONCILERS", "FILE_WRITE_KIND", "READ_KIND", "file_written", "nothing_to_reconcile"]
