"""Git in the workspace authority runs with a neutral configuration, and only inside the roots.

Issue 12 §4: ``core.fsmonitor`` in a repository's config ran a program inside the workspace
authority when it created a worktree, and a worktree was created next to a repository outside the
allowed roots. Each test plants programs in a real repository's config (fsmonitor, filter drivers,
a diff textconv, hooks, a pager) that would touch a marker file, runs the authority's git
operations, and proves no marker appears — then proves the plant itself works with a plain git.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ouroactors import supervisor, worker
from ouroactors.authorities.asking import ask_authority
from ouroactors.authorities.workspace import worktrees as wt
from ouroactors.authorities.workspace.actor import CleanupWorktree, CreateWorktree
from ouroactors.authorities.workspace.worktrees import WorktreeError, changes, cleanup, create, list_worktrees

pytestmark = pytest.mark.skipif(not wt.git_available(), reason="git is not installed")

PLANTS = ("fsmonitor", "smudge", "clean", "textconv", "hook", "pager", "process")


def plain_git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """git as a user would run it: the repository's own config in force."""
    env = {"PATH": os.environ["PATH"], "HOME": str(repo), "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(repo), *args], env=env, capture_output=True, text=True, check=False)


def planted_repo(base: Path) -> tuple[Path, Path]:
    """A repository whose config runs a marker-writing program at every opportunity."""
    markers = base / "markers"
    markers.mkdir()
    repo = base / "root" / "repo"
    repo.mkdir(parents=True)
    assert plain_git(repo, "init", "-q", "-b", "main").returncode == 0
    (repo / "a.txt").write_text("hello\n")
    (repo / ".gitattributes").write_text("* filter=evil diff=evil\n")
    assert plain_git(repo, "add", ".").returncode == 0
    assert plain_git(repo, "commit", "-qm", "initial").returncode == 0

    def program(name: str, body: str = "") -> str:
        path = base / f"{name}.sh"
        path.write_text(f"#!/bin/sh\ntouch {markers / name}\n{body}")
        path.chmod(0o755)
        return str(path)

    hooks = repo / ".git" / "hooks"
    for hook in ("post-checkout", "pre-commit", "reference-transaction"):
        (hooks / hook).write_text(f"#!/bin/sh\ntouch {markers / 'hook'}\n")
        (hooks / hook).chmod(0o755)
    for key, value in (("core.fsmonitor", program("fsmonitor")),
                       ("filter.evil.smudge", program("smudge", "cat\n")),
                       ("filter.evil.clean", program("clean", "cat\n")),
                       ("filter.evil.required", "true"),
                       ("diff.evil.textconv", program("textconv", "cat \"$1\"\n")),
                       ("core.pager", program("pager", "cat\n"))):
        assert plain_git(repo, "config", key, value).returncode == 0
    return repo, markers


def fired(markers: Path) -> set[str]:
    return {path.name for path in markers.iterdir()}


def test_planted_programs_never_run_in_create_status_and_cleanup(tmp_path):
    repo, markers = planted_repo(tmp_path)
    roots = (str(tmp_path / "root"),)
    tree = create(str(repo), "s1", allowed_roots=roots)
    assert (Path(tree.path) / "a.txt").read_text() == "hello\n"
    assert changes(tree.path) == []
    (Path(tree.path) / "a.txt").write_text("changed\n")
    assert changes(tree.path) == [" M a.txt"]
    assert cleanup(str(repo), tree.path).kept_dirty
    (Path(tree.path) / "a.txt").write_text("hello\n")
    assert cleanup(str(repo), tree.path).removed
    assert [w.main for w in list_worktrees(str(repo))] == [True]
    assert fired(markers) == set()  # not one planted program ran

    plain_git(repo, "status")  # the plants are real: a plain git runs them
    assert "fsmonitor" in fired(markers)


def test_caller_git_environment_is_not_inherited(tmp_path, monkeypatch):
    repo, markers = planted_repo(tmp_path)
    evil = tmp_path / "evil.sh"
    evil.write_text(f"#!/bin/sh\ntouch {markers / 'env'}\n")
    evil.chmod(0o755)
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'core.fsmonitor={evil}'")
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", str(evil))
    monkeypatch.setenv("GIT_DIR", str(tmp_path))  # would point -C somewhere else
    tree = create(str(repo), "s1", allowed_roots=(str(tmp_path / "root"),))
    assert changes(tree.path) == []
    assert fired(markers) == set()


def test_a_worktree_outside_the_allowed_roots_is_refused(tmp_path):
    repo, _ = planted_repo(tmp_path)
    with pytest.raises(WorktreeError, match="outside the allowed roots"):  # <parent>/repo.worktrees is outside
        create(str(repo), "s1", allowed_roots=(str(repo),))
    with pytest.raises(WorktreeError, match="outside the allowed roots"):
        create(str(repo), "s1", root_dir=str(tmp_path / "elsewhere"), allowed_roots=(str(tmp_path / "root"),))
    inner = repo / "sub"
    inner.mkdir()
    with pytest.raises(WorktreeError, match="top level"):  # a root inside a repository: not its worktrees
        create(str(inner), "s1", root_dir=str(inner / "trees"), allowed_roots=(str(inner),))
    assert not (tmp_path / "root" / "repo.worktrees").exists() and not (tmp_path / "elsewhere").exists()
    assert [w.main for w in list_worktrees(str(repo))] == [True]


@pytest.mark.multiproc
def test_the_workspace_authority_creates_worktrees_only_inside_its_roots(actor_system, tmp_path):
    repo, markers = planted_repo(tmp_path)
    only_repo = supervisor("agent", strategy="rest_for_one", children=[
        worker("storage", "ouroactors.authorities.storage.actor:Storage"),
        worker("workspace", "ouroactors.authorities.workspace.actor:Workspace",
               kwargs={"allowed_roots": [str(repo)]}),
    ])
    actor_system.start_tree(only_repo)
    with pytest.raises(WorktreeError, match="outside the allowed roots"):
        ask_authority(actor_system, "agent/workspace", CreateWorktree(str(repo), "s1"))
    assert not (tmp_path / "root" / "repo.worktrees").exists()
    with pytest.raises(WorktreeError, match="outside the allowed roots"):
        ask_authority(actor_system, "agent/workspace", CleanupWorktree(str(repo), str(tmp_path / "x")))
    actor_system.stop_tree("agent")

    inside = supervisor("agent", strategy="rest_for_one", children=[
        worker("storage", "ouroactors.authorities.storage.actor:Storage"),
        worker("workspace", "ouroactors.authorities.workspace.actor:Workspace",
               kwargs={"allowed_roots": [str(tmp_path / "root")]}),
    ])
    actor_system.start_tree(inside)
    tree = ask_authority(actor_system, "agent/workspace", CreateWorktree(str(repo), "s1"), timeout=30)
    assert tree.path == str(tmp_path / "root" / "repo.worktrees" / "s1")
    assert ask_authority(actor_system, "agent/workspace", CleanupWorktree(str(repo), tree.path, session_id="s1"),
                         timeout=30).removed
    assert fired(markers) == set()
