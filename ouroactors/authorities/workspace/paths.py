"""Canonical workspace roots: resolve a path component by component, then check where it landed.

Why not ``os.path.realpath`` or ``pathlib.Path.resolve``? Both would do the resolution, but neither
says *which* component escaped or looped, ``realpath`` silently accepts missing components, and
``os.path.normpath`` (lexical ``..``) is wrong in the presence of symlinks: ``link/..`` is the
parent of the link's *target*, not the directory holding the link. So the walk here is explicit:

* the path (made absolute against ``cwd``) is a stack of pending components;
* ``.`` and empty components are skipped;
* ``..`` pops the last *resolved* component — everything resolved so far is a real directory with
  every symlink already followed, so popping it is exactly what the kernel does;
* a symlink is read and its target spliced in front of the remaining components (an absolute
  target restarts from ``/``); every link followed counts against ``max_links`` (64 by default,
  like the reference runtime), and revisiting the same link with the same remaining components is
  reported as a loop at once;
* any component that is followed by more components must be a directory (``file/..`` is an error,
  as it is for the kernel).

The result must exist, be a directory, and be equal to or under one of the allowed roots, which are
canonicalised the same way first (so an allowed root may itself be a symlink). Every error is a
:class:`PathError` naming the input, the offending component and the allowed roots.

Canonicalisation describes the filesystem at the moment it runs (node-local; a concurrent rename can
change the answer afterwards) — which is why the lease table, not this function, is what keeps two
writers apart, and fencing tokens are checked at write time.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Iterable

from ...core.errors import OuroactorsError

__all__ = [
    "DEFAULT_MAX_LINKS",
    "InvalidPath",
    "NotADirectory",
    "NotFound",
    "PathError",
    "PathEscapes",
    "SymlinkLoop",
    "canonicalize",
    "canonicalize_roots",
    "canonicalize_target",
    "is_canonical_form",
    "overlaps",
    "under",
]

DEFAULT_MAX_LINKS = 64
MAX_PATH_CHARS = 4096


class PathError(OuroactorsError, ValueError):
    """A path was refused. ``path`` is the input, ``component`` the offending part (when known)."""

    reason = "path refused"

    def __init__(self, path: str, component: str | None, allowed_roots: Iterable[str], detail: str = "") -> None:
        self.path = path
        self.component = component
        self.allowed_roots = tuple(allowed_roots)
        self.detail = detail
        roots = ", ".join(repr(r) for r in self.allowed_roots) or (
            "(none configured: every lease is refused until the tree file lists roots in the workspace child's "
            "kwargs, e.g. allowed_roots = [\"/srv/projects\"])")
        where = f" at component {component!r}" if component is not None else ""
        extra = f" ({detail})" if detail else ""
        super().__init__(f"{self.reason}{where}: {path!r}{extra}; allowed roots: {roots}")

    def __reduce__(self) -> tuple[object, ...]:
        return (self.__class__, (self.path, self.component, self.allowed_roots, self.detail))


class InvalidPath(PathError):
    reason = "invalid path"


class PathEscapes(PathError):
    reason = "path escapes the allowed roots"


class SymlinkLoop(PathError):
    reason = "symlink loop"


class NotADirectory(PathError):
    reason = "not a directory"


class NotFound(PathError):
    reason = "no such file or directory"


def under(path: str, root: str) -> bool:
    """``path`` equals ``root`` or lies below it on a ``/`` boundary (``/a/bc`` is not under ``/a/b``).

    Both are expected in canonical form (absolute, no ``.``/``..``, no trailing ``/``).
    """
    if path == root:
        return True
    prefix = root if root.endswith("/") else root + "/"
    return path.startswith(prefix)


def overlaps(a: str, b: str) -> bool:
    """Two canonical roots overlap when they are equal or one is a ``/``-boundary prefix of the other."""
    return under(a, b) or under(b, a)


def is_canonical_form(path: str) -> bool:
    """Lexical check only: absolute, normalised, no trailing slash (``/`` itself is fine)."""
    return (
        isinstance(path, str)
        and path.startswith("/")
        and "\x00" not in path
        and posixpath.normpath(path) == path
        and not path.startswith("//")
    )


def canonicalize_roots(allowed_roots: Iterable[str], *, cwd: str | None = None,
                       max_links: int = DEFAULT_MAX_LINKS) -> tuple[str, ...]:
    """Canonicalise the configured allowed roots themselves (each must be an existing directory)."""
    if isinstance(allowed_roots, str):
        raise TypeError("allowed_roots must be a tuple of paths, not one string")
    roots = tuple(allowed_roots)
    out: list[str] = []
    for root in roots:
        try:
            resolved = _resolve(root, cwd=cwd, max_links=max_links, allowed=roots)
        except PathError as exc:
            detail = f"configured allowed root; {exc.detail}" if exc.detail else "configured allowed root"
            raise type(exc)(exc.path, exc.component, exc.allowed_roots, detail) from None
        if resolved not in out:
            out.append(resolved)
    return tuple(out)


def canonicalize(path: str, *, allowed_roots: tuple[str, ...], cwd: str | None = None,
                 max_links: int = DEFAULT_MAX_LINKS) -> str:
    """Resolve ``path`` to a canonical directory equal to or under one of ``allowed_roots``.

    Raises :class:`PathEscapes`, :class:`SymlinkLoop`, :class:`NotADirectory`, :class:`NotFound`
    or :class:`InvalidPath` (all :class:`PathError`).
    """
    roots = canonicalize_roots(allowed_roots, cwd=cwd, max_links=max_links)
    return _resolve(path, cwd=cwd, max_links=max_links, allowed=roots, check_roots=True)


def canonicalize_target(path: str, *, cwd: str | None = None, max_links: int = DEFAULT_MAX_LINKS,
                        opaque: tuple[str, ...] = ("/proc",)) -> str:
    """Where a path that may not exist yet really points: the same walk as :func:`canonicalize`,
    for a file that is about to be written (or read) rather than a workspace root.

    Every existing component is resolved (symlinks followed, ``..`` after resolution, loops
    refused); from the first missing component on, the rest is appended as written — a dangling
    symlink therefore lands where writing through it would create the file. A ``..`` after a
    missing component cannot be resolved (the kernel refuses it too), nor can anything under an
    ``opaque`` root: ``/proc`` links (``/proc/self/cwd``, ``/dev/fd`` …) name whatever process
    resolves them, which is not the process that will act. No allowed roots are checked: the
    caller judges where the answer lies. Raises :class:`PathError` subclasses.
    """
    return _resolve(path, cwd=cwd, max_links=max_links, allowed=(), missing_ok=True, opaque=opaque)


# -- the walk ---------------------------------------------------------------------------------------

# Pending components carry where they came from, so an error can say "'..' (from symlink /r/l -> ../..)".
_Pending = tuple[str, str | None]


def _position(path: str, roots: tuple[str, ...]) -> str:
    """``inside`` an allowed root, ``ancestor`` of one (still on the way in), or ``outside``."""
    if any(under(path, r) for r in roots):
        return "inside"
    if any(under(r, path) for r in roots):
        return "ancestor"
    return "outside"


def _describe(component: str, origin: str | None) -> str:
    return component if origin is None else f"{component} (from symlink {origin})"


def _resolve(path: str, *, cwd: str | None, max_links: int, allowed: tuple[str, ...],
             check_roots: bool = False, missing_ok: bool = False, opaque: tuple[str, ...] = ()) -> str:
    if not isinstance(path, str):
        raise InvalidPath(repr(path), None, allowed, f"expected a string, got {type(path).__name__}")
    if not path or "\x00" in path or len(path) > MAX_PATH_CHARS:
        why = "empty" if not path else "contains NUL" if "\x00" in path else f"longer than {MAX_PATH_CHARS}"
        raise InvalidPath(path, None, allowed, why)
    if max_links < 0:
        raise ValueError(f"max_links must be >= 0, got {max_links}")
    base = cwd if cwd is not None else os.getcwd()
    full = path if path.startswith("/") else f"{base}/{path}"
    if not full.startswith("/"):
        raise InvalidPath(path, None, allowed, f"cwd {base!r} is not absolute")

    pending: list[_Pending] = [(c, None) for c in reversed(full.split("/"))]
    resolved: list[str] = []
    links = 0
    seen: set[tuple[str, tuple[str, ...]]] = set()
    left: str | None = None  # the step that last took the walk out of an allowed root
    strayed: str | None = None  # the step that last took it off every path towards one
    was = _position("/", allowed)

    def fail(kind: type[PathError], candidate: str, component: str, origin: str | None, detail: str) -> PathError:
        # Failing somewhere outside the roots is an escape: never say "missing", "not a directory"
        # or "loop" about places outside (no oracle for what exists there).
        if check_roots and _position(candidate, allowed) == "outside":
            return PathEscapes(path, left or strayed or _describe(component, origin), allowed,
                               f"leaves the allowed roots at {candidate}")
        return kind(path, _describe(component, origin), allowed, detail)

    def current() -> str:
        return "/" + "/".join(resolved)

    def step_done(component: str, origin: str | None) -> None:
        nonlocal left, strayed, was
        now = _position(current(), allowed)
        if was == "inside" and now != "inside":
            left = _describe(component, origin)
        if was != "outside" and now == "outside":
            strayed = _describe(component, origin)
        was = now

    while pending:
        component, origin = pending.pop()
        if component in ("", "."):
            continue
        if component == "..":
            if resolved:
                resolved.pop()
            step_done(component, origin)
            continue
        candidate = current().rstrip("/") + "/" + component
        if any(under(candidate, o) for o in opaque):
            raise InvalidPath(path, _describe(component, origin), allowed,
                              f"{candidate} is resolved differently by each process")
        try:
            st = os.lstat(candidate)
        except FileNotFoundError:
            if missing_ok:
                return _append_missing(path, resolved, [(component, origin), *reversed(pending)], allowed)
            raise fail(NotFound, candidate, component, origin, f"{candidate} does not exist") from None
        except OSError as exc:
            raise fail(PathError, candidate, component, origin, f"cannot inspect {candidate}: {exc.strerror}") from None
        if stat.S_ISLNK(st.st_mode):
            key = (candidate, tuple(c for c, _ in pending))
            links += 1
            if key in seen or links > max_links:
                why = "revisited with the same remaining path" if key in seen else f"more than {max_links} links"
                raise fail(SymlinkLoop, candidate, component, origin, f"{candidate}: {why}")
            seen.add(key)
            try:
                target = os.readlink(candidate)
            except OSError as exc:
                raise fail(PathError, candidate, component, origin,
                           f"cannot read symlink {candidate}: {exc.strerror}") from None
            label = f"{candidate} -> {target}"
            if target.startswith("/"):
                resolved.clear()
                step_done(f"{component} (symlink {label})", None)
            pending.extend((c, label) for c in reversed(target.split("/")))
            continue
        if pending and not stat.S_ISDIR(st.st_mode):
            # More components follow (even just a trailing "/"): this one must be a directory.
            raise fail(NotADirectory, candidate, component, origin,
                       f"{candidate} is not a directory but the path continues")
        resolved.append(component)
        step_done(component, origin)

    result = current()
    if missing_ok:
        return result
    try:
        final = os.stat(result)
    except OSError as exc:  # pragma: no cover - raced with a concurrent change
        raise NotFound(path, None, allowed, f"{result}: {exc.strerror}") from None
    if check_roots and _position(result, allowed) != "inside":
        raise PathEscapes(path, left or strayed or result, allowed, f"resolves to {result}")
    if not stat.S_ISDIR(final.st_mode):
        last = resolved[-1] if resolved else "/"
        raise NotADirectory(path, last, allowed, f"{result} is not a directory")
    return result


def _append_missing(path: str, resolved: list[str], rest: list[_Pending], allowed: tuple[str, ...]) -> str:
    """The components from the first missing one on, appended as written; ``..`` cannot follow."""
    out = list(resolved)
    for component, origin in rest:
        if component in ("", "."):
            continue
        if component == "..":
            raise NotFound(path, _describe(component, origin), allowed, "'..' after a component that does not exist")
        out.append(component)
    return "/" + "/".join(out)
