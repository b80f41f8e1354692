"""Session worktrees against real git repositories in temp dirs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ouroactors.authorities.workspace import worktrees as wt
from ouroactors.authorities.workspace.worktrees import (
    UnsafeSessionId,
    Worktree,
    WorktreeError,
    cleanup,
    create,
    list_worktrees,
)

pytestmark = pytest.mark.skipif(not wt.git_available(), reason="git is not installed")


def run(repo: Path, *args: str) -> str:
    return wt.git(str(repo), *args).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = Path(os.path.realpath(tmp_path)) / "repo"
    path.mkdir()
    run(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("hello\n")
    (path / ".gitignore").write_text("*.log\n")
    run(path, "add", "README.md", ".gitignore")
    run(path, "commit", "-q", "-m", "initial")
    return path


def test_create_and_list(repo: Path, tmp_path: Path):
    root = tmp_path / "trees"
    one = create(str(repo), "s1", root_dir=str(root))
    two = create(str(repo), "s-2.x", root_dir=str(root))
    assert one == Worktree(path=os.path.realpath(root / "s1"), branch="ouroactors/s1", session_id="s1")
    assert (Path(one.path) / "README.md").read_text() == "hello\n"
    listed = list_worktrees(str(repo))
    assert [w.main for w in listed] == [True, False, False]
    assert listed[0].path == str(repo) and listed[0].branch == "main" and listed[0].session_id is None
    by_session = {w.session_id: w for w in listed[1:]}
    assert by_session["s1"].path == one.path and by_session["s1"].branch == "ouroactors/s1"
    assert by_session["s-2.x"].path == two.path
    assert by_session["s1"].head == run(repo, "rev-parse", "HEAD").strip()


def test_default_root_dir_is_next_to_the_repo(repo: Path):
    tree = create(str(repo), "s1")
    assert tree.path == str(repo.parent / "repo.worktrees" / "s1")
    assert run(repo, "status", "--porcelain") == ""  # nothing new inside the repository


def test_cleanup_clean_removes_it_and_keeps_the_branch(repo: Path, tmp_path: Path):
    tree = create(str(repo), "s1", root_dir=str(tmp_path / "trees"))
    (Path(tree.path) / "work.txt").write_text("done\n")
    run(Path(tree.path), "add", "work.txt")
    run(Path(tree.path), "commit", "-q", "-m", "session work")
    (Path(tree.path) / "build.log").write_text("ignored output\n")  # ignored files do not make it dirty
    result = cleanup(str(repo), tree)
    assert result.removed and not result.kept_dirty and result.changes == []
    assert not os.path.exists(tree.path)
    assert [w.session_id for w in list_worktrees(str(repo))] == [None]
    assert "session work" in run(repo, "log", "--oneline", "ouroactors/s1")  # committed work stays
    again = create(str(repo), "s1", root_dir=str(tmp_path / "trees"))  # the session's branch is reused
    assert not again.new_branch and (Path(again.path) / "work.txt").exists()


def test_cleanup_dirty_keeps_it_and_reports(repo: Path, tmp_path: Path):
    tree = create(str(repo), "s1", root_dir=str(tmp_path / "trees"))
    path = Path(tree.path)
    (path / "README.md").write_text("changed\n")
    (path / "new dir").mkdir()
    (path / "new dir" / "untracked.txt").write_text("x")
    result = cleanup(str(repo), tree.path)
    assert not result.removed and result.kept_dirty
    assert sorted(result.changes) == [" M README.md", "?? new dir/untracked.txt"]
    assert path.exists() and (path / "README.md").read_text() == "changed\n"
    assert len(list_worktrees(str(repo))) == 2


def test_cleanup_untracked_only_and_staged_only_are_dirty(repo: Path, tmp_path: Path):
    a = create(str(repo), "a", root_dir=str(tmp_path / "trees"))
    (Path(a.path) / "note.txt").write_text("x")
    assert cleanup(str(repo), a).changes == ["?? note.txt"]
    b = create(str(repo), "b", root_dir=str(tmp_path / "trees"))
    (Path(b.path) / "staged.txt").write_text("x")
    run(Path(b.path), "add", "staged.txt")
    assert cleanup(str(repo), b).changes == ["A  staged.txt"]
    run(Path(b.path), "mv", "README.md", "RENAMED.md")
    assert "R  README.md -> RENAMED.md" in cleanup(str(repo), b).changes


def test_cleanup_refuses_main_and_foreign_paths(repo: Path, tmp_path: Path):
    with pytest.raises(WorktreeError, match="main worktree"):
        cleanup(str(repo), str(repo))
    with pytest.raises(WorktreeError, match="not a worktree"):
        cleanup(str(repo), str(tmp_path))
    tree = create(str(repo), "s1", root_dir=str(tmp_path / "trees"))
    run(Path(tree.path), "checkout", "-q", "--detach")
    with pytest.raises(WorktreeError, match="not on a session branch"):
        cleanup(str(repo), tree)
    assert os.path.isdir(tree.path)


def test_cleanup_after_the_directory_vanished_prunes(repo: Path, tmp_path: Path):
    tree = create(str(repo), "s1", root_dir=str(tmp_path / "trees"))
    subprocess.run(["rm", "-rf", tree.path], check=True)
    assert cleanup(str(repo), tree).removed
    assert len(list_worktrees(str(repo))) == 1


@pytest.mark.parametrize("bad", ["", "../x", "a/b", "-rf", "x..y", "s.lock", "dot.", ".hidden", "a b", "é",
                                 "x" * 129, None])
def test_unsafe_session_ids(repo: Path, tmp_path: Path, bad):
    with pytest.raises(UnsafeSessionId) as info:
        create(str(repo), bad, root_dir=str(tmp_path / "trees"))
    assert str(repo) in str(info.value)
    assert not (tmp_path / "trees").exists()


def test_errors_name_the_repo_and_git_stderr(repo: Path, tmp_path: Path):
    with pytest.raises(WorktreeError) as info:
        create(str(repo), "s1", base="no-such-rev", root_dir=str(tmp_path / "trees"))
    assert str(repo) in str(info.value) and "no-such-rev" in str(info.value)
    assert info.value.stderr
    not_a_repo = tmp_path / "plain"
    not_a_repo.mkdir()
    with pytest.raises(WorktreeError, match="not a git repository"):
        list_worktrees(str(not_a_repo))
    with pytest.raises(WorktreeError, match="not a directory"):
        create(str(tmp_path / "missing"), "s1")
    create(str(repo), "s2", root_dir=str(tmp_path / "trees"))
    with pytest.raises(WorktreeError, match="already exists"):
        create(str(repo), "s2", root_dir=str(tmp_path / "trees"))


def test_hooks_do_not_run(repo: Path, tmp_path: Path):
    hook = repo / ".git" / "hooks" / "post-checkout"
    marker = tmp_path / "hook-ran"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    create(str(repo), "s1", root_dir=str(tmp_path / "trees"))
    assert not marker.exists()
