"""One git worktree per session, so parallel sessions never edit the same checkout.

This module drives the real ``git`` binary through :mod:`subprocess` (no library: the porcelain
formats used here — ``worktree list --porcelain`` and ``status --porcelain=v1 -z`` — are the
stable, documented interfaces). A repository's own configuration is **input from outside**: its
``core.fsmonitor``, filter drivers, hooks and the like name programs git would run inside the
workspace authority. So every call runs with a neutral configuration:

* ``GIT_CONFIG_NOSYSTEM=1``, ``GIT_CONFIG_GLOBAL=/dev/null`` and none of the caller's ``GIT_*``
  variables (``GIT_DIR``, ``GIT_CONFIG_PARAMETERS``, ``GIT_SSH_COMMAND``, ``GIT_EXTERNAL_DIFF`` …):
  only the repository's own config is read, and ``-C`` means what it says;
* ``-c core.hooksPath=/dev/null -c core.fsmonitor=false`` and the other fixed overrides in
  :data:`NEUTRAL`; then every key of the repository's config (``git config --list``, which runs
  nothing) that names a program — filter drivers, diff and merge drivers, textconv, pagers,
  editors, credential helpers, ssh and proxy commands, gpg programs (:data:`RUNS_CODE`) — is
  overridden on the command line with an empty value, which git treats as unset;
* ``safe.directory`` for the repository itself only (the global one is not read any more);
* a fixed author/committer identity, ``LC_ALL=C`` (stderr we can quote), no terminal prompts.

Choices:

* a session's branch is ``ouroactors/<session>``; the session id must be a *safe name* (letters,
  digits, ``.``, ``_``, ``-``; no ``..``, no ``.lock`` suffix) because it becomes both a ref and a
  directory name. If the branch already exists (the session had a worktree before), it is checked out
  again instead of failing — its commits are the session's work.
* worktrees live in ``root_dir/<session>``; by default ``<repo-parent>/<repo-name>.worktrees``, next
  to the repository rather than inside it (a checkout inside the repo would show up as untracked).
  With ``allowed_roots`` (the workspace authority always passes them) the repository's top level
  and the worktree must both lie inside them — a worktree outside would be a writable checkout the
  workspace never leases; configure a ``root_dir`` inside them when the default is not.
* **cleanup never deletes a dirty worktree**: if ``git status`` shows modified, staged or untracked
  files, the worktree is kept and the changes are reported. Ignored files do not make a tree dirty
  (git's own rule for ``worktree remove``). ``git worktree remove`` is run *without* ``--force``, so
  a file that appears between our status check and the removal makes git refuse, and we report the
  tree kept rather than lose it. The branch is never deleted: committed work stays reachable.

Node-local: worktrees are directories on this node's disk.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field

from ...core.errors import OuroactorsError

BRANCH_PREFIX = "ouroactors/"
GIT_TIMEOUT_S = 60.0
_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
NEUTRAL = ("core.hooksPath=/dev/null", "core.fsmonitor=false", "core.pager=cat", "core.editor=false",
           "core.askPass=", "core.sshCommand=", "credential.helper=", "diff.external=", "sequence.editor=false",
           "gpg.program=false", "protocol.ext.allow=never", "submodule.recurse=false")
# Config keys (lower case, fnmatch) whose value is a program git may run while checking out or status.
RUNS_CODE = ("filter.*.clean", "filter.*.smudge", "filter.*.process", "filter.*.required", "diff.*.command",
             "diff.*.textconv", "merge.*.driver", "core.fsmonitor", "core.hookspath", "core.pager", "core.editor",
             "core.askpass", "core.sshcommand", "core.gitproxy", "credential.*", "gpg.*.program", "pager.*",
             "uploadpack.packobjectshook", "remote.*.uploadpack", "remote.*.receivepack", "diff.external",
             "sequence.editor")
_IDENTITY = {
    "GIT_AUTHOR_NAME": "ouroactors", "GIT_AUTHOR_EMAIL": "ouroactors@localhost",
    "GIT_COMMITTER_NAME": "ouroactors", "GIT_COMMITTER_EMAIL": "ouroactors@localhost",
}


class WorktreeError(OuroactorsError):
    """A git operation failed; names the repository, the command and git's stderr."""

    def __init__(self, repo: str, message: str, *, command: list[str] | None = None, stderr: str = "") -> None:
        self.repo, self.command, self.stderr = repo, command or [], stderr
        text = f"{repo}: {message}" if repo else message
        if command:
            text += f" (git {' '.join(command)})"
        if stderr:
            text += f": {stderr.strip()}"
        super().__init__(text)


class UnsafeSessionId(WorktreeError, ValueError):
    pass


class GitMissing(WorktreeError):
    pass


@dataclass(frozen=True)
class Worktree:
    path: str
    branch: str  # short name, e.g. "ouroactors/s1"
    session_id: str
    new_branch: bool = True  # False: the session's branch existed and was checked out again


@dataclass(frozen=True)
class ListedWorktree:
    """One entry of ``git worktree list --porcelain``."""

    path: str
    head: str | None
    branch: str | None  # short name; None when detached or bare
    main: bool  # the repository's main worktree (never removed by cleanup)
    locked: bool = False
    prunable: bool = False
    session_id: str | None = None  # set when the branch is ouroactors/<session>


@dataclass(frozen=True)
class CleanupResult:
    removed: bool
    kept_dirty: bool
    changes: list[str] = field(default_factory=list)  # porcelain lines, e.g. "?? new.txt", " M a.py"


def git_available() -> bool:
    return shutil.which("git") is not None


def safe_session_id(session_id: object, repo: str = "") -> str:
    """The session id if it is safe as a ref component and a directory name, else :class:`UnsafeSessionId`."""
    if (not isinstance(session_id, str) or not _SAFE.fullmatch(session_id) or ".." in session_id
            or session_id.endswith((".lock", "."))):
        raise UnsafeSessionId(repo, f"session id {session_id!r} is not a safe name "
                                    "(1-128 of A-Z a-z 0-9 . _ -, starting alphanumeric, no '..', no '.lock')")
    return session_id


def _env() -> dict[str, str]:
    """The caller's environment without any ``GIT_*`` (or pager/editor) variable, plus ours."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("GIT_") and k not in ("PAGER", "EDITOR", "VISUAL", "SSH_ASKPASS", "LESSOPEN")}
    env.update(_IDENTITY, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null", GIT_TERMINAL_PROMPT="0",
               GIT_OPTIONAL_LOCKS="0", LC_ALL="C", LANG="C")
    return env


def _run(command: list[str], repo: str, args: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(command, env=_env(), capture_output=True, text=True, timeout=GIT_TIMEOUT_S,
                              stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired:
        raise WorktreeError(repo, f"git timed out after {GIT_TIMEOUT_S:.0f}s", command=list(args)) from None


def neutral_config(repo: str) -> list[str]:
    """``-c`` options that make git ignore every program the repository's config names.

    Reading the config runs nothing; each key that names a program is then overridden with an
    empty value (git treats an empty filter, driver or helper as unset), and the fixed
    :data:`NEUTRAL` overrides come last.
    """
    base = ["-c", f"safe.directory={repo}", *(x for item in NEUTRAL for x in ("-c", item))]
    listed = _run(["git", "-C", repo, *base, "config", "--list", "--includes", "--name-only"], repo, ())
    options: list[str] = []
    for key in dict.fromkeys(listed.stdout.split("\n") if listed.returncode == 0 else ()):
        lowered = key.strip().lower()
        if lowered and any(fnmatch.fnmatchcase(lowered, pattern) for pattern in RUNS_CODE):
            value = "false" if lowered.endswith((".required", "core.fsmonitor")) else ""
            options += ["-c", f"{key.strip()}={value}"]
    return [*options, *base]  # the fixed overrides win over anything listed


def git(repo: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``git -C repo <neutral config> ARGS``; raise :class:`WorktreeError` on failure."""
    if not git_available():
        raise GitMissing(repo, "the git executable was not found on PATH")
    done = _run(["git", "-C", repo, *neutral_config(repo), *args], repo, args)
    if check and done.returncode != 0:
        raise WorktreeError(repo, f"git failed with exit status {done.returncode}", command=list(args),
                            stderr=done.stderr)
    return done


def _toplevel(repo: str) -> str:
    if not os.path.isdir(repo):
        raise WorktreeError(repo, "not a directory")
    return os.path.realpath(git(repo, "rev-parse", "--show-toplevel").stdout.strip())


def list_worktrees(repo: str) -> list[ListedWorktree]:
    """The repository's worktrees, main first (parsed from ``git worktree list --porcelain``)."""
    out = git(repo, "worktree", "list", "--porcelain").stdout
    entries: list[ListedWorktree] = []
    for block in out.strip().split("\n\n"):
        attrs: dict[str, str] = {}
        for line in block.splitlines():
            key, _, value = line.partition(" ")
            attrs[key] = value
        if "worktree" not in attrs:
            continue
        ref = attrs.get("branch")
        branch = ref.removeprefix("refs/heads/") if ref else None
        session = branch[len(BRANCH_PREFIX):] if branch and branch.startswith(BRANCH_PREFIX) else None
        entries.append(ListedWorktree(
            path=attrs["worktree"], head=attrs.get("HEAD"), branch=branch, main=not entries,
            locked="locked" in attrs, prunable="prunable" in attrs, session_id=session))
    return entries


def _branch_exists(repo: str, branch: str) -> bool:
    return git(repo, "show-ref", "--verify", "--quiet", f"refs/heads/{branch}", check=False).returncode == 0


def _inside(path: str, roots: tuple[str, ...] | None, repo: str, what: str) -> None:
    if roots is None:
        return
    real = os.path.realpath(path)
    if not any(real == root or real.startswith(root.rstrip("/") + "/") for root in roots):
        raise WorktreeError(repo, f"{what} {real} is outside the allowed roots ({', '.join(roots) or 'none'})")


def plan(repo: str, session_id: str, root_dir: str | None = None,
         allowed_roots: tuple[str, ...] | None = None) -> tuple[str, str]:
    """Where :func:`create` would put ``session_id``'s worktree: ``(repository top level, path)``, both
    canonical, after the same checks (safe session id, inside ``allowed_roots``); creates nothing. The
    workspace authority records the worktree's owner at this path before git runs."""
    safe_session_id(session_id, repo)
    top = _toplevel(repo)
    _inside(top, allowed_roots, repo, "the repository's top level")
    if root_dir is None:
        root_dir = os.path.join(os.path.dirname(top), os.path.basename(top) + ".worktrees")
    _inside(root_dir, allowed_roots, repo, "the worktree directory")
    return top, os.path.join(os.path.realpath(root_dir), session_id)


def create(repo: str, session_id: str, base: str = "HEAD", root_dir: str | None = None,
           allowed_roots: tuple[str, ...] | None = None) -> Worktree:
    """Add a worktree for ``session_id`` at ``root_dir/<session>`` on branch ``ouroactors/<session>``.

    A new branch starts at ``base``; an existing session branch is checked out as it is (``base`` is
    then not used, and ``new_branch`` is False). With ``allowed_roots`` (canonical), the repository's
    top level and the worktree must lie inside them, or nothing is created.
    """
    top, path = plan(repo, session_id, root_dir=root_dir, allowed_roots=allowed_roots)
    if os.path.lexists(path):
        raise WorktreeError(repo, f"worktree path {path} already exists")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    branch = BRANCH_PREFIX + session_id
    if _branch_exists(top, branch):
        git(top, "worktree", "add", path, branch)
        return Worktree(path=path, branch=branch, session_id=session_id, new_branch=False)
    if base.startswith("-"):
        raise WorktreeError(repo, f"base {base!r} is not a revision")
    git(top, "worktree", "add", "-b", branch, path, base)
    return Worktree(path=path, branch=branch, session_id=session_id)


def changes(path: str) -> list[str]:
    """Modified, staged and untracked files in a worktree, as ``XY path`` porcelain lines."""
    out = git(path, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=none").stdout
    records = out.split("\0")
    lines: list[str] = []
    i = 0
    while i < len(records):
        record = records[i]
        i += 1
        if not record:
            continue
        status, name = record[:2], record[3:]
        if status[0] in "RC":  # rename/copy: the next record is the source
            name = f"{records[i]} -> {name}"
            i += 1
        lines.append(f"{status} {name}")
    return lines


def cleanup(repo: str, worktree: Worktree | str) -> CleanupResult:
    """Remove a session worktree if it is clean; otherwise keep it and report its changes."""
    path = os.path.realpath(worktree.path if isinstance(worktree, Worktree) else worktree)
    top = _toplevel(repo)
    listed = {os.path.realpath(w.path): w for w in list_worktrees(top)}
    entry = listed.get(path)
    if entry is None:
        raise WorktreeError(repo, f"{path} is not a worktree of this repository")
    if entry.main:
        raise WorktreeError(repo, f"{path} is the main worktree; it is never removed")
    if entry.session_id is None:
        # Detached or on another branch: removing it could drop commits only its HEAD reaches.
        raise WorktreeError(repo, f"{path} is not on a session branch ({BRANCH_PREFIX}<session>); not removed")
    if not os.path.isdir(path):
        git(top, "worktree", "prune")  # the directory is already gone: forget its bookkeeping
        return CleanupResult(removed=True, kept_dirty=False)
    dirty = changes(path)
    if dirty:
        return CleanupResult(removed=False, kept_dirty=True, changes=dirty)
    done = git(top, "worktree", "remove", path, check=False)  # no --force: git re-checks cleanliness
    if done.returncode != 0:
        dirty = changes(path) if os.path.isdir(path) else []
        if dirty:
            return CleanupResult(removed=False, kept_dirty=True, changes=dirty)
        raise WorktreeError(repo, f"could not remove worktree {path}", command=["worktree", "remove", path],
                            stderr=done.stderr)
    return CleanupResult(removed=True, kept_dirty=False)
