"""Where a requested path really is: the view of one path that the path rules judge.

A rule about paths is only as good as the path it is shown. Spellings lie — ``ws/../outside/x``,
``ws/link_out/x`` (a symlink out of the workspace), ``ws/g/hooks/pre-commit`` (``g -> .git``),
``/proc/self/cwd/x``, ``/WS/x`` — so each path is resolved on disk by the workspace's own
canonicaliser (:func:`~ouroactors.authorities.workspace.paths.canonicalize_target`: symlinks
followed component by component, ``..`` after resolution, loops refused, ``/proc`` refused) before
any rule sees it. Relative paths are resolved against the workspace root; without a root they
cannot be resolved.

The resulting :class:`PathView` keeps two kinds of forms, and the asymmetry is deliberate:

* ``spelled`` — the path as written (normalised lexically, and made absolute against the root).
  Deny and ask rules see these too, so a deny written against a spelling still bites.
* ``real`` — the resolved absolute path and, when it lies inside the resolved root, its form
  relative to the root. Allow rules see only these: a relative glob covers only what is really
  inside the root, an absolute glob only the real location.

A path that cannot be resolved (loop, ``..`` after a missing component, ``/proc``, unreadable
link, a relative path without a root) has no real forms: no allow covers it, the caller asks.

:func:`protected_reason` refuses writes into ``.git`` and the data dir by their real location:
a ``.git`` segment in the spelling or the resolved path, anything under the resolved protected
roots or the root's resolved git dir, or an existing ancestor that *is* one of those directories
(same device and inode: a case-insensitive spelling or a bind mount of ``.git``) or has the shape
of a git directory (a bare repository ``x.git``, a worktree's git dir). This module
reads the filesystem (``lstat``/``readlink``/``stat``) and nothing else; it writes nothing.
"""

from __future__ import annotations

import os
import posixpath
import stat
from dataclasses import dataclass

from ..workspace.paths import PathError, canonicalize_roots, canonicalize_target, under

# Writing to these never creates or changes a file the rules could care about.
HARMLESS_SINKS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})


@dataclass(frozen=True)
class PathView:
    raw: str
    spelled: tuple[str, ...]  # lexical forms: deny/ask only
    real: tuple[str, ...]  # resolved absolute (+ relative to the root when inside it): every rule
    resolved: str | None  # the resolved absolute path, None when it cannot be resolved
    problem: str | None = None  # why it could not be resolved

    @property
    def forms(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*self.spelled, *self.real)))


@dataclass(frozen=True)
class Context:
    """The workspace root and protected roots, resolved once per decision."""

    root: str | None  # as given (absolute), lexically normalised
    real_root: str | None  # resolved; None when there is no root or it cannot be resolved
    protected: tuple[str, ...]  # spelled (normalised) protected roots
    real_protected: tuple[str, ...]  # resolved protected roots and the root's git dir
    identities: frozenset[tuple[int, int]]  # (st_dev, st_ino) of the protected directories that exist


def norm(path: str) -> str:
    """``posixpath.normpath``, with POSIX's implementation-defined leading ``//`` folded to ``/``
    (else ``//etc/passwd`` would escape ``Write(/etc/**)`` and the protected roots)."""
    path = posixpath.normpath(path) if path else "."
    return "/" + path.lstrip("/") if path.startswith("//") else path


def _real(path: str) -> str | None:
    try:
        return canonicalize_target(path, cwd="/")
    except (PathError, OSError, ValueError):
        return None


def _real_dir(root: str) -> str | None:
    """The workspace root must be an existing directory (the workspace's own rule for roots)."""
    try:
        return canonicalize_roots((root,), cwd="/")[0]
    except (PathError, OSError, ValueError, IndexError):
        return None


def _git_dir(real_root: str) -> str | None:
    """The root's git directory: ``.git`` itself, or where a ``.git`` file (``gitdir: …``) points."""
    dot_git = real_root.rstrip("/") + "/.git"
    try:
        if os.path.isfile(dot_git):
            with open(dot_git, encoding="utf-8", errors="replace") as f:
                line = f.read(4096).strip()
            if line.startswith("gitdir:"):
                target = line[len("gitdir:") :].strip()
                return _real(target if target.startswith("/") else posixpath.join(real_root, target))
    except OSError:
        return None
    return _real(dot_git)


def context(root: str | None, protected: tuple[str, ...]) -> Context:
    spelled_root = norm(root) if root else None
    real_root = _real_dir(spelled_root) if spelled_root and spelled_root.startswith("/") else None
    real_protected = [r for r in (_real(norm(p)) for p in protected) if r]
    if real_root is not None and (git_dir := _git_dir(real_root)) is not None:
        real_protected.append(git_dir)
    identities = set()
    for directory in real_protected:
        try:
            st = os.stat(directory)
            identities.add((st.st_dev, st.st_ino))
        except OSError:
            pass
    return Context(spelled_root, real_root, tuple(norm(p) for p in protected), tuple(real_protected),
                   frozenset(identities))


def view(raw: str, ctx: Context) -> PathView:
    """The spelled and real forms of ``raw`` (see the module docstring)."""
    path = norm(raw)
    absolute = norm(posixpath.join(ctx.root, path)) if ctx.root and not path.startswith("/") else path
    spelled = {path, absolute}
    if ctx.root and under(absolute, ctx.root):
        spelled.add(posixpath.relpath(absolute, ctx.root))
    if "\0" in raw or not raw:
        return PathView(raw, tuple(sorted(spelled)), (), None, "empty or contains NUL")
    if not raw.startswith("/") and ctx.real_root is None:
        why = "the workspace root cannot be resolved" if ctx.root else "a relative path without a workspace root"
        return PathView(raw, tuple(sorted(spelled)), (), None, why)
    try:
        resolved = canonicalize_target(raw if raw.startswith("/") else f"{ctx.real_root}/{raw}", cwd="/")
    except (PathError, OSError, ValueError) as e:
        return PathView(raw, tuple(sorted(spelled)), (), None, str(e))
    real = [resolved]
    if ctx.real_root and under(resolved, ctx.real_root):
        real.append(posixpath.relpath(resolved, ctx.real_root))
    return PathView(raw, tuple(sorted(spelled)), tuple(real), resolved)


def _is_git_dir(directory: str) -> bool:
    """A git directory by its shape (``HEAD``, ``objects/``, ``refs/``), whatever it is called: a bare
    repository's ``config`` runs code (``core.pager``, ``core.fsmonitor``) as surely as ``.git/config``."""
    return (os.path.isfile(f"{directory}/HEAD") and os.path.isdir(f"{directory}/objects")
            and os.path.isdir(f"{directory}/refs"))


def _inside_protected_dir(resolved: str, identities: frozenset[tuple[int, int]]) -> str | None:
    """The existing ancestor of ``resolved`` (or itself) that is a protected directory or a git
    directory, if any."""
    current = resolved
    while True:
        try:
            st = os.stat(current)
            if (st.st_dev, st.st_ino) in identities or (stat.S_ISDIR(st.st_mode) and _is_git_dir(current)):
                return current
        except OSError:
            pass
        if current == "/":
            return None
        current = posixpath.dirname(current)


def protected_reason(v: PathView, ctx: Context) -> str | None:
    """Why writing ``v`` is refused before any rule is read, or None."""
    for form in (*v.spelled, *v.real):
        if ".git" in (part.lower() for part in form.split("/")):
            where = f" (really {v.resolved})" if v.resolved and form == v.resolved and form not in v.spelled else ""
            return f"protected: {v.raw!r} is inside .git{where}"
    for form in v.spelled:
        for prot in ctx.protected:
            if form.startswith("/") and under(form, prot):
                return f"protected: {v.raw!r} is under {prot}"
    if v.resolved is not None:
        for prot in ctx.real_protected:
            if under(v.resolved, prot):
                return f"protected: {v.raw!r} is really {v.resolved}, under {prot}"
        if (directory := _inside_protected_dir(v.resolved, ctx.identities)) is not None:
            return f"protected: {v.raw!r} ({v.resolved}) is inside {directory}, a git or protected directory"
    return None


__all__ = ["HARMLESS_SINKS", "Context", "PathView", "context", "norm", "protected_reason", "view"]
