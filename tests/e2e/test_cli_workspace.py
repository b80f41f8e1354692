"""``ouroactors workspace``: who holds the root a turn runs in, the worktrees the authority made, an operator's cleanup.

Before, the leases and worktrees were readable only through the authority's protocol from Python: a user told that a
message could not start because "its workspace is held" had no command to see by whom, and a worktree's cleanup "by a
verified operator" had no command at all.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from ..actor.helpers import wait_until
from .cli_helpers import Served, agent_tree, cli

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]

SCRIPT = """
[[turns]]
events = [ { kind = "tool_call", id = "c1", name = "shell", arguments = { command = "sleep 3" } } ]

[[turns]]
events = [ { kind = "text", text = "Done." } ]
"""


def _json_lines(cwd: Path, *args: str) -> list[dict]:
    done = cli(*args, "--json", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def _repo(path: Path) -> str:
    from ouroactors.authorities.workspace import worktrees as wt

    path.mkdir()
    for args in (("init", "-q", "-b", "main"), ("commit", "-q", "--allow-empty", "-m", "initial")):
        wt.git(str(path), *args)
    return os.path.realpath(path)


def test_leases_worktrees_and_an_operators_cleanup_from_the_cli(tmp_path: Path) -> None:
    root = tmp_path / "roots"
    root.mkdir()
    workspace = root / "ws"
    workspace.mkdir()
    repo = _repo(root / "repo")
    (tmp_path / "script.toml").write_text(SCRIPT)
    served = Served(tmp_path, agent_tree(tmp_path, root))
    try:
        assert cli("workspace", "leases", cwd=tmp_path).stdout.strip() == "no live leases"
        assert cli("grants", "add", "allow:Bash(sleep *)", cwd=tmp_path).returncode == 0
        assert cli("session", "new", "s1", "--workspace", str(workspace), "--sandbox", "none", "--script",
                   str(tmp_path / "script.toml"), cwd=tmp_path).returncode == 0
        assert cli("session", "send", "s1", "wait a little", "--event-id", "m-1", cwd=tmp_path).returncode == 0

        held: list[dict] = []

        def leased() -> bool:  # while the turn's command sleeps, its runtime holds the root
            held[:] = _json_lines(tmp_path, "workspace", "leases")
            return bool(held)

        wait_until(leased, timeout=30, what="the turn's lease")
        [lease] = held
        assert (lease["root"], lease["session_id"], lease["mode"]) == (os.path.realpath(workspace), "s1", "exclusive")
        assert lease["status"] == "active" and lease["fencing_token"] >= 1
        assert not any("capab" in key for key in lease)  # only the owner's recovery presents it: never shown
        shown = cli("workspace", "leases", cwd=tmp_path)
        assert shown.returncode == 0 and "s1" in shown.stdout and "active" in shown.stdout, shown.stdout

        # a worktree the authority made for a session, cleaned up by the data dir's operator
        from ouroactors import ActorSystem
        from ouroactors.authorities.asking import ask_authority
        from ouroactors.authorities.workspace.messages import CreateWorktree

        made = ask_authority(ActorSystem.connect(tmp_path / ".ouroactors"), "agent/workspace",
                             CreateWorktree(repo, "s2"), timeout=30)
        [listed] = _json_lines(tmp_path, "workspace", "worktrees")
        assert (listed["path"], listed["repo"], listed["session_id"]) == (made.path, repo, "s2")
        nowhere = cli("workspace", "cleanup", str(root), cwd=tmp_path)
        assert nowhere.returncode == 2 and "no worktree" in nowhere.stderr, nowhere.stderr
        # judged where a path lands: `..` after a symlink into the worktree is its parent (no worktree), and
        # /proc/self/cwd is the command's own directory — neither names the worktree, nothing is removed
        Path(tmp_path, "into").symlink_to(made.path)
        for odd in (str(tmp_path / "into" / ".."), "/proc/self/cwd"):
            refused = cli("workspace", "cleanup", odd, cwd=tmp_path)
            assert refused.returncode == 2 and "no worktree" in refused.stderr, (odd, refused.stderr)
        assert os.path.isdir(made.path)
        Path(made.path, "notes.txt").write_text("not committed\n")
        kept = cli("workspace", "cleanup", made.path, cwd=tmp_path)
        assert kept.returncode == 0 and "kept" in kept.stdout, (kept.stdout, kept.stderr)  # a dirty one stays
        assert os.path.isdir(made.path)
        Path(made.path, "notes.txt").unlink()
        removed = cli("workspace", "cleanup", str(tmp_path / "into"), cwd=tmp_path)  # a symlink: its worktree
        assert removed.returncode == 0 and "removed" in removed.stdout, (removed.stdout, removed.stderr)
        assert not os.path.exists(made.path)
        assert cli("workspace", "worktrees", cwd=tmp_path).stdout.strip() == "no worktrees"

        followed = cli("session", "events", "s1", "--follow", "--until", "turn_settled", "--idle", "60",
                       cwd=tmp_path, timeout=120)
        assert followed.returncode == 0 and "completed" in followed.stdout, followed.stdout
        served.proc.send_signal(signal.SIGTERM)
        assert served.finish()[0] == 0
    finally:
        served.kill()
