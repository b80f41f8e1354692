"""``ouroactors grants``: the rules a user adds from the shell decide the next tool call of a running system.

The agent tree's file said user, workspace and session rules are "stored (ouroactors grants ...)", but there was no
such command: a user who wanted `pytest` allowed without an approval for every call had to edit the node rules in
the tree file and restart the system, or speak the authority's stamped protocol from Python.
"""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import pytest

from ..actor.helpers import wait_until
from .cli_helpers import Served, agent_tree, cli

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]

SCRIPT = """
[[turns]]
events = [ { kind = "tool_call", id = "c1", name = "shell", arguments = { command = "echo from-the-shell" } } ]

[[turns]]
events = [ { kind = "text", text = "Done." } ]
"""


def _policy(cwd: Path) -> dict:
    listed = cli("grants", "list", "--json", cwd=cwd)
    assert listed.returncode == 0, listed.stderr
    return json.loads(listed.stdout)


def _generation(cwd: Path, above: int = 0) -> int:
    """The grants child's generation as its supervisor has it, once it is above ``above`` (polled: the supervisor
    hears of a change a moment after the authority answered the request that made it)."""
    from ouroactors import ActorSystem

    client = ActorSystem.connect(cwd / ".ouroactors")
    found: list[int] = []

    def moved() -> bool:
        found[:] = [c.generation for c in client.which_children("agent") if c.id == "grants"]
        return found[0] > above

    wait_until(moved, timeout=30, what=f"the grants generation above {above}")
    return found[0]


def _events(cwd: Path, session: str) -> list[dict]:
    followed = cli("session", "events", session, "--follow", "--until", "turn_settled", "--idle", "60", "--json",
                   cwd=cwd, timeout=120)
    assert followed.returncode == 0, followed.stderr
    return [json.loads(line) for line in followed.stdout.splitlines()]


def test_rules_added_and_revoked_from_the_cli_decide_the_next_call(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "script.toml").write_text(SCRIPT)
    served = Served(tmp_path, agent_tree(tmp_path, workspace))
    try:
        policy = _policy(tmp_path)
        assert policy["rules"]["node"] == ["deny:Bash(rm -rf *)", "deny:Bash(sudo *)"]  # the tree file's
        assert policy["rules"]["user"] == ["allow:Read(**)"]
        shown = cli("grants", "list", cwd=tmp_path)
        assert shown.returncode == 0 and "deny:Bash(rm -rf *)" in shown.stdout and "user:" in shown.stdout

        # bad input: a usage error naming what is wrong, and nothing stored
        for args, said in [
            (["add", "allow:Bash(echo x; rm y)"], "one simple command"),
            (["add", "permit:Bash(echo *)"], "permit"),
            (["add", "--scope", "session", "allow:Bash(echo *)"], "--session"),
            (["add", "--scope", "user", "--session", "s1", "allow:Bash(echo *)"], "--scope session"),
            (["add", "--scope", "node", "allow:Bash(echo *)"], "node"),
            (["revoke", "allow:Bash(never added)"], "holds no rule"),
            (["posture", "s1", "yolo"], "yolo"),
            (["add", "--session", "../x", "allow:Bash(echo *)"], "a session id"),  # was stored as session/../x
            (["posture", "s" * 300, "plan"], "1 to 128"),
            (["add", "allow:Bash(echo \x1b[2J)"], "control character"),  # was stored, and listed raw
        ]:
            refused = cli("grants", *args, cwd=tmp_path)
            assert refused.returncode == 2, (args, refused.stdout, refused.stderr)
            assert said in refused.stderr, (args, refused.stderr)
        assert _policy(tmp_path) == policy
        before = _generation(tmp_path)

        created = cli("session", "new", "s1", "--workspace", str(workspace), "--sandbox", "none",
                      "--script", str(tmp_path / "script.toml"), cwd=tmp_path)
        assert created.returncode == 0, created.stderr
        added = cli("grants", "add", "--session", "s1", "allow:Bash(echo *)", cwd=tmp_path)
        assert added.returncode == 0, added.stderr
        assert added.stdout.strip() == "session/s1: allow:Bash(echo *)"
        assert _policy(tmp_path)["rules"]["session/s1"] == ["allow:Bash(echo *)"]
        assert _generation(tmp_path) == before  # an added rule applies to the next decision: nothing restarts

        sent = cli("session", "send", "s1", "say hello", "--event-id", "m-1", cwd=tmp_path)
        assert sent.returncode == 0, sent.stderr
        events = _events(tmp_path, "s1")
        kinds = [e["kind"] for e in events]
        assert "approval_needed" not in kinds, kinds  # the session rule allowed the call: nobody was asked
        [result] = [e for e in events if e["kind"] == "tool_result"]
        assert result["data"]["status"] == "ok", result
        assert events[-1]["data"]["status"] == "completed", events[-1]

        posture = cli("grants", "posture", "s1", "plan", cwd=tmp_path)
        assert posture.returncode == 0 and posture.stdout.strip() == "s1: posture plan", posture.stderr
        assert _policy(tmp_path)["postures"] == {"s1": "plan"}
        only = json.loads(cli("grants", "list", "--session", "s2", "--json", cwd=tmp_path).stdout)
        assert "session/s1" not in only["rules"] and only["postures"] == {"s2": "default"}

        revoked = cli("grants", "revoke", "--session", "s1", "allow:Bash(echo *)", cwd=tmp_path)
        assert revoked.returncode == 0, revoked.stderr
        assert re.search(r"session/s1: revoked allow:Bash\(echo \*\)", revoked.stdout), revoked.stdout
        assert _policy(tmp_path)["rules"]["session/s1"] == []
        _generation(tmp_path, above=before)  # what was admitted under the rule cannot start any more

        served.proc.send_signal(signal.SIGTERM)
        assert served.finish()[0] == 0
    finally:
        served.kill()
