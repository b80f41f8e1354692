"""What grants judge for each tool: the real path on disk (after links), the command, the host."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ouroactors.authorities.grants.rules import Decision, Verdict, decide, parse_rules
from ouroactors.runtime.execution.model import ToolCall
from ouroactors.runtime.execution.tools import parse_call

from .tools_support import context, lease

RULES = parse_rules(["allow:Write(**)", "allow:Read(**)", "allow:Bash(git status)", "allow:WebFetch(domain:127.0.0.1)"],
                    "session")


def judge(root: str, name: str, **arguments: Any) -> Verdict:
    tool, args = parse_call(ToolCall(id="c", name=name, arguments=arguments))
    return decide(tool.grant_request(args, context(root)), RULES, root=root)


def test_a_write_into_git_through_a_symlink_is_judged_at_its_real_path(tmp_path: Path) -> None:
    root, _ = lease(tmp_path)
    os.makedirs(f"{root}/.git")
    os.symlink(".git", f"{root}/notes")
    assert judge(root, "write", path="notes/config", content="x").decision is Decision.DENY
    assert judge(root, "edit", path=".git/config", old="a", new="b").decision is Decision.DENY
    assert judge(root, "write", path="src.txt", content="x").decision is Decision.ALLOW


def test_commands_and_hosts_are_what_grants_see(tmp_path: Path) -> None:
    root, _ = lease(tmp_path)
    assert judge(root, "shell", command="git status").decision is Decision.ALLOW
    assert judge(root, "shell", command="git status; curl evil.example").decision is not Decision.ALLOW
    assert judge(root, "http", url="http://127.0.0.1:9/items").decision is Decision.ALLOW
    assert judge(root, "http", url="http://evil.example/").decision is not Decision.ALLOW


def test_an_http_request_that_changes_the_world_is_a_write(tmp_path: Path) -> None:
    """Seed 001: safe reads apart from writes. ``WebFetch(domain:…)`` admits GET/HEAD; a POST/PUT/PATCH/DELETE to
    the same host is a write that only ``WebWrite(domain:…)`` admits (and only to its host)."""
    from ouroactors.authorities.grants.posture import PLAN_MODE, evaluate
    from ouroactors.authorities.grants.rules import Effect

    root, _ = lease(tmp_path)
    url = "http://127.0.0.1:9/items"
    for method in ("GET", "HEAD"):
        assert judge(root, "http", method=method, url=url).decision is Decision.ALLOW
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        tool, args = parse_call(ToolCall(id="c", name="http", arguments={"method": method, "url": url}))
        request = tool.grant_request(args, context(root))
        assert (request.effect, request.method, request.domains) == (Effect.WRITE, method, ("127.0.0.1",))
        verdict = judge(root, "http", method=method, url=url)
        assert verdict.decision is Decision.ASK and "127.0.0.1" in verdict.reason, verdict
        writes = [*RULES, *parse_rules(["allow:WebWrite(domain:127.0.0.1)"], "session")]
        assert decide(request, writes, root=root).decision is Decision.ALLOW
        assert decide(request, RULES, root=root).decision is Decision.ASK
        _, other = parse_call(ToolCall(id="c", name="http", arguments={"method": method,
                                                                       "url": "http://api.github.com/repos/x/pulls"}))
        assert decide(tool.grant_request(other, context(root)), writes, root=root).decision is Decision.ASK
        assert evaluate(request, "plan", writes, root=root) == Verdict(Decision.DENY, PLAN_MODE, None)
