"""What an approval was judged against: the workspace content a call's proposal is bound to.

An operator who approves ``edit notes.txt: replace A with B`` approves it *for the file as it is*; an approval of
``sh build.sh`` is an approval of what ``build.sh`` says now. If the content changes between the question and
the re-run that uses the answer (another session, a person, the agent's own earlier step), the answer was given
about something else. So the proposal an approval is asked for carries a binding, ``_judged_against``, inside its
arguments — and the approval's call digest covers it:

* a call whose ledger intent names the file it changes and its digest before (``write``, ``edit``): that file's
  SHA-256 (``None``: it did not exist);
* an ``execute`` call (``shell``): a digest of the whole lease root — every path, kind, and the content of every
  regular file and link, ``.git`` excluded (git rewrites its own index on a mere ``git status``; what a command
  reads from the work tree is the tree) — bounded by :data:`MAX_FILES` and :data:`MAX_BYTES`; a root past the
  bounds is bound by its listing with sizes only, and says so;
* anything else: no binding (a read or a network call does not depend on the work tree's content).

The re-run computes the binding again; when the content changed the digest differs, the answered approval is not
found, and the operator is asked again — the old answer is never applied to new content.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from typing import Any

__all__ = ["KEY", "MAX_BYTES", "MAX_FILES", "judged_against", "tree_digest"]

KEY = "_judged_against"
MAX_FILES = 20_000
MAX_BYTES = 256 * 1024 * 1024
_CHUNK = 1 << 20


def judged_against(intent: Mapping[str, Any] | None, effect: str, root: str | None) -> dict[str, Any] | None:
    """The binding of a call's proposal (see the module docstring), or None."""
    if intent is not None and "path" in intent and "before" in intent:
        return {"file": intent["path"], "sha256": intent["before"]}
    if effect == "execute" and root is not None:
        return {"workspace": root, **tree_digest(root)}
    return None


def tree_digest(root: str) -> dict[str, Any]:
    """``{"sha256": …, "files": n}`` over ``root`` (links not followed; ``.git`` skipped); ``"bounded": True`` and
    sizes instead of contents once the tree is past the bounds."""
    entries: list[tuple[str, str, int, str]] = []
    total = 0
    bounded = False
    for directory, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not (directory == root and d == ".git"))
        rel_dir = os.path.relpath(directory, root)
        for name in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(directory, d))]:
            path = os.path.join(directory, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            try:
                info = os.lstat(path)
            except OSError:
                continue  # gone while walking: it is not part of the tree now
            if os.path.islink(path):
                entries.append((rel, "link", 0, os.readlink(path)))
                continue
            if not os.path.isfile(path):
                entries.append((rel, "other", 0, ""))
                continue
            total += info.st_size
            bounded = bounded or len(entries) >= MAX_FILES or total > MAX_BYTES
            entries.append((rel, "file", info.st_size, "" if bounded else _file_sha256(path)))
        entries.extend((os.path.normpath(os.path.join(rel_dir, d)), "dir", 0, "") for d in dirs
                       if not os.path.islink(os.path.join(directory, d)))
    digest = hashlib.sha256()
    for rel, kind, size, content in sorted(entries):
        digest.update(f"{len(rel)}:{rel}\0{kind}\0{size}\0{content}\n".encode("utf-8", "surrogateescape"))
    out: dict[str, Any] = {"sha256": digest.hexdigest(), "files": len(entries)}
    if bounded:
        out["bounded"] = True  # past MAX_FILES / MAX_BYTES: later files by size only
    return out


def _file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return "unreadable"
    with os.fdopen(fd, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
