"""Resolve a tool's path argument inside the session's lease, and open what it names without following links.

Why a file tool cannot just ``open(root + path)``: the kernel would follow a symlink anywhere (``link ->
/etc``, ``/proc/self/root/…``), ``..`` after a symlink climbs from the link's *target*, and a component can be
swapped between the check and the open. So:

* the **directory part** goes through the workspace's canonicalisation (:func:`canonical_dir`, the single call
  into :mod:`ouroactors.authorities.workspace.paths`), which must land inside the lease root;
* the **last component** is looked at with ``lstat``: a symlink is followed by hand (its target is resolved
  the same way, at most :data:`MAX_LINKS` times), so the final name is never a link;
* the directory is then opened (``O_DIRECTORY | O_NOFOLLOW``) and **re-checked after open** through
  ``/proc/self/fd`` — a directory renamed or swapped in the meantime is caught — and the file itself is
  opened relative to that descriptor with ``O_NOFOLLOW``, so a link planted after the check is refused (ELOOP).

Every refusal is a :class:`PathRefused` (a :class:`~.base.ToolRefused`) whose ``kind`` names the workspace
error (``path_escapes``, ``symlink_loop``, ``not_found``, ``not_a_directory``, ``invalid_path``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import stat
from dataclasses import dataclass
from typing import Literal

from ....authorities.workspace.paths import (
    InvalidPath,
    NotADirectory,
    NotFound,
    PathError,
    PathEscapes,
    SymlinkLoop,
    canonicalize,
    canonicalize_roots,
    under,
)
from .base import ToolRefused

MAX_LINKS = 40

_KINDS: tuple[tuple[type[PathError], str], ...] = (
    (PathEscapes, "path_escapes"), (SymlinkLoop, "symlink_loop"), (NotFound, "not_found"),
    (NotADirectory, "not_a_directory"), (InvalidPath, "invalid_path"),
)


class PathRefused(ToolRefused):
    """A path argument the session may not use; ``path_error`` is the workspace's own error when there is one."""

    def __init__(self, tool: str, detail: str, kind: str, path_error: PathError | None = None) -> None:
        super().__init__(tool, detail, kind=kind)
        self.path_error = path_error


def refused(tool: str, exc: PathError) -> PathRefused:
    kind = next((name for cls, name in _KINDS if isinstance(exc, cls)), "path_refused")
    return PathRefused(tool, str(exc), kind, exc)


def _check_raw(raw: object, tool: str) -> None:
    if not isinstance(raw, str) or not raw or "\0" in raw:
        raise PathRefused(tool, f"invalid path {raw!r}: empty or contains NUL", "invalid_path")
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: the OS call would raise something that is not an OSError
        raise PathRefused(tool, f"invalid path {raw!r}: not encodable as UTF-8", "invalid_path") from None


def canonical_dir(path: str, root: str) -> str:
    """The one call into the workspace's canonicalisation: ``path`` (relative to ``root``) → a canonical directory
    inside ``root``. When ``paths`` gains its "may not exist yet under a root" function, swap it in here.

    ``"."`` (the shell tool's every call, ``list`` by default) is the root itself: :func:`canonicalize` walks the
    root on disk once to canonicalise it as the allowed root and then again as the path, the same components to
    the same place. So the first walk answers — the same function :func:`canonicalize` starts with, raising what
    it raises — and the root is returned when it resolved to itself; a root that did not (not canonical) goes
    through the whole call, which answers as it always did."""
    if path == "." and canonicalize_roots((root,), cwd=root) == (root,):
        return root
    return canonicalize(path, allowed_roots=(root,), cwd=root)


Parents = Literal["exist", "plan", "create"]


@dataclass(frozen=True)
class Target:
    """A resolved file path: ``parent`` is canonical and inside the root, ``name`` a single component, not a link.

    ``created`` lists the directories made to hold it (``parents="create"``); with ``parents="plan"`` they are
    listed but do not exist yet (what grants judge before anything is done).
    """

    parent: str
    name: str
    exists: bool
    created: tuple[str, ...] = ()

    @property
    def path(self) -> str:
        return f"{self.parent.rstrip('/')}/{self.name}"


def _parent_dir(head: str, root: str, tool: str, parents: Parents, made: list[str]) -> str:
    """The canonical directory ``head`` inside ``root``; missing directories are refused, planned or created.

    Only a *missing* directory is planned or created, one component at a time, each inside an already verified
    directory (``mkdirat`` on a descriptor :func:`open_dir` re-checked): an escape, a loop or a file in the way is
    refused as the workspace names it, and ``..`` after a missing component is refused (it cannot be resolved).
    """
    try:
        return canonical_dir(head or "/", root)
    except NotFound as exc:
        up, name = posixpath.split(head.rstrip("/"))
        if parents == "exist" or name in ("", ".", ".."):
            raise refused(tool, exc) from None
        base = _parent_dir(up or "/", root, tool, parents, made)
        planned = f"{base.rstrip('/')}/{name}"
        if parents == "plan":
            made.append(planned)
            return planned
        dfd = open_dir(base, root, tool)
        try:
            os.mkdir(name, 0o755, dir_fd=dfd)
            made.append(planned)
        except FileExistsError:
            pass  # made meanwhile, or a dangling link: the walk below says which
        except OSError as err:
            raise PathRefused(tool, f"cannot create directory {planned}: {err.strerror}", "mkdir_failed") from None
        finally:
            close_quietly(dfd)
        try:
            return canonical_dir(head, root)
        except PathError as again:
            raise refused(tool, again) from None
    except PathError as exc:
        raise refused(tool, exc) from None


def resolve_file(raw: str, root: str, tool: str, parents: Parents = "exist") -> Target:
    """Where a file path argument really points, inside ``root`` — or :class:`PathRefused`.

    ``parents``: ``exist`` (the directory must exist), ``plan`` (missing directories are fine: where they would
    be is returned, nothing is made) or ``create`` (they are made, see :func:`_parent_dir`).
    """
    _check_raw(raw, tool)
    path = raw if raw.startswith("/") else f"{root}/{raw}"
    made: list[str] = []
    for _ in range(MAX_LINKS + 1):
        head, tail = posixpath.split(path)
        if tail in ("", ".", ".."):
            raise PathRefused(tool, f"{raw!r} names a directory, not a file", "is_a_directory")
        parent = _parent_dir(head, root, tool, parents, made)
        if made and parents == "plan":
            return Target(parent, tail, False, tuple(made))
        full = f"{parent.rstrip('/')}/{tail}"
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            return Target(parent, tail, False, tuple(made))
        except OSError as exc:
            raise PathRefused(tool, f"cannot inspect {full}: {exc.strerror}", "path_refused") from None
        if not stat.S_ISLNK(st.st_mode):
            return Target(parent, tail, True, tuple(made))
        target = os.readlink(full)
        path = target if target.startswith("/") else f"{parent}/{target}"
    raise PathRefused(tool, f"{raw!r}: more than {MAX_LINKS} symlinks at the last component", "symlink_loop")


def resolve_dir(raw: str, root: str, tool: str) -> str:
    _check_raw(raw, tool)
    try:
        return canonical_dir(raw, root)
    except PathError as exc:
        raise refused(tool, exc) from None


def open_dir(parent: str, root: str, tool: str) -> int:
    """Open the canonical directory ``parent`` and prove, after opening, that it is still inside ``root``."""
    try:
        fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise PathRefused(tool, f"cannot open directory {parent}: {exc.strerror}", "path_changed") from None
    try:
        actual = os.readlink(f"/proc/self/fd/{fd}")
    except OSError as exc:
        os.close(fd)
        raise PathRefused(tool, f"cannot verify directory {parent}: {exc.strerror}", "path_changed") from None
    if actual != parent or not under(actual, root):
        os.close(fd)
        raise PathRefused(tool, f"directory {parent} changed while opening (now {actual})", "path_changed")
    return fd


def open_in(dir_fd: int, name: str, flags: int, tool: str, where: str, mode: int = 0o644) -> int:
    """``openat`` that never follows a link at the last component (a link planted after the check → refused)."""
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # ELOOP: the last component became a symlink after resolution
            raise PathRefused(tool, f"{where} became a symlink while opening; refused", "path_changed") from None
        raise PathRefused(tool, f"cannot open {where}: {exc.strerror}", "open_failed") from None


def close_quietly(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)
