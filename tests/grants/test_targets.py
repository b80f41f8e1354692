"""Where a path really is: the workspace canonicaliser's walk for paths that may not exist yet
(paths.canonicalize_target) and the grants' view of a requested path (targets)."""

from __future__ import annotations

import os

import pytest

from ouroactors.authorities.grants.targets import context, protected_reason, view
from ouroactors.authorities.workspace.paths import (
    InvalidPath,
    NotADirectory,
    NotFound,
    SymlinkLoop,
    canonicalize_target,
)


def test_canonicalize_target_resolves_what_exists_and_appends_the_rest(layout: dict[str, str]) -> None:
    ws, out = layout["{ws}"], layout["{out}"]
    assert canonicalize_target(f"{ws}/src/app.py") == f"{ws}/src/app.py"
    assert canonicalize_target(f"{ws}/src/new/deeper/x.py") == f"{ws}/src/new/deeper/x.py"
    assert canonicalize_target(f"{ws}/link_out/x") == f"{out}/x"
    assert canonicalize_target(f"{ws}/src_link/../link_out/y") == f"{out}/y"  # `..` after resolution
    assert canonicalize_target(f"{ws}/dangling") == f"{out}/newfile"  # where writing through it lands
    assert canonicalize_target(f"{ws}/g/hooks/pre-commit") == f"{ws}/.git/hooks/pre-commit"
    assert canonicalize_target("src/app.py", cwd=ws) == f"{ws}/src/app.py"


@pytest.mark.parametrize(("suffix", "error"), [
    ("loop_a/x", SymlinkLoop), ("src/new/../x", NotFound), ("notes.md/x", NotADirectory),
    ("proc_link/x", InvalidPath), ("", InvalidPath)])
def test_canonicalize_target_refuses_what_cannot_be_resolved(layout: dict[str, str], suffix: str,
                                                            error: type[Exception]) -> None:
    path = f"{layout['{ws}']}/{suffix}" if suffix else ""
    with pytest.raises(error):
        canonicalize_target(path)
    with pytest.raises(InvalidPath):
        canonicalize_target("/proc/self/cwd/x")
    with pytest.raises(InvalidPath):
        canonicalize_target("/dev/fd/1")  # /dev/fd -> /proc/self/fd


def test_view_keeps_spellings_for_denies_and_the_real_path_for_allows(layout: dict[str, str]) -> None:
    ws, out = layout["{ws}"], layout["{out}"]
    ctx = context(ws, ())
    v = view("link_out/x", ctx)
    assert v.resolved == f"{out}/x" and v.real == (f"{out}/x",)  # no relative real form: it is outside
    assert "link_out/x" in v.spelled and f"{ws}/link_out/x" in v.spelled
    v = view("src_link/app.py", ctx)
    assert v.real == (f"{ws}/src/app.py", "src/app.py")
    v = view("loop_a/x", ctx)
    assert v.resolved is None and v.real == () and "symlink loop" in (v.problem or "")
    assert view("src/a.py", context(None, ())).resolved is None  # relative without a root


def test_protected_by_real_location(layout: dict[str, str]) -> None:
    ws, data = layout["{ws}"], layout["{data}"]
    ctx = context(ws, (data,))
    for raw in ("g/hooks/pre-commit", ".GIT/config", "data_link/x", f"{data}/../data/x", "sub/.git/config"):
        assert protected_reason(view(raw, ctx), ctx) is not None, raw
    for raw in ("src/app.py", ".gitignore", "link_out/x"):
        assert protected_reason(view(raw, ctx), ctx) is None, raw


def test_protected_git_dir_found_through_a_gitdir_file(tmp_path: os.PathLike[str]) -> None:
    """A worktree's .git is a file naming the real git dir: writes there are refused too."""
    base = str(tmp_path)
    os.makedirs(f"{base}/real-git/hooks")
    os.makedirs(f"{base}/wt")
    with open(f"{base}/wt/.git", "w") as f:
        f.write(f"gitdir: {base}/real-git\n")
    os.symlink(f"{base}/real-git", f"{base}/wt/alias")
    ctx = context(f"{base}/wt", ())
    reason = protected_reason(view("alias/hooks/pre-commit", ctx), ctx)
    assert reason is not None and "real-git" in reason


def test_relative_paths_under_a_root_that_cannot_be_resolved(layout: dict[str, str]) -> None:
    """A relative path is never resolved against / when the root itself cannot be resolved."""
    ctx = context(f"{layout['{base}']}/no-such-root", ())
    v = view("etc/passwd", ctx)
    assert v.resolved is None and v.real == () and "root cannot be resolved" in (v.problem or "")
    ctx = context(f"{layout['{ws}']}/loop_a", ())
    assert view("x", ctx).resolved is None
