"""Posture: plan mode refuses write and execute through every tool; it only ever narrows."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from ouroactors.authorities.grants import posture as posture_mod
from ouroactors.authorities.grants.posture import PLAN_MODE, Posture, apply_posture, evaluate
from ouroactors.authorities.grants.rules import Decision, Effect, Request, Verdict, parse_rule

TOOLS = ("Bash", "shell", "exec_command", "Write", "Edit", "MultiEdit", "NotebookEdit", "apply_patch",
         "mcp__fs__write_file", "Read", "WebFetch", "http", "anything")
# rules that would allow everything, at the strongest scope
ALLOW_ALL = [parse_rule(t, "node") for t in ("allow:Bash(*)", "allow:Write(**)", "allow:Edit(**)", "allow:Read(**)",
                                             "allow:WebFetch(domain:*)", "allow:Tool(*)")]


def _request(tool: str, effect: Effect) -> Request:
    return Request("s1", tool, effect, paths=("src/a.py",), command="ls -l && echo hi > out", domains=("example.com",))


@pytest.fixture(autouse=True)
def _rooted(monkeypatch: pytest.MonkeyPatch, ws: str) -> None:
    """Every evaluate() here runs with the on-disk workspace as its root (paths are resolved)."""
    real = posture_mod.evaluate

    def rooted(*args: Any, root: str | None = ws, **kwargs: Any) -> Verdict:
        return real(*args, root=root, **kwargs)

    monkeypatch.setitem(globals(), "evaluate", rooted)


@pytest.mark.parametrize(("tool", "effect"), itertools.product(TOOLS, (Effect.WRITE, Effect.EXECUTE)))
def test_plan_refuses_write_and_execute_through_every_tool(tool: str, effect: Effect) -> None:
    verdict = evaluate(_request(tool, effect), Posture.PLAN, ALLOW_ALL)
    assert verdict == Verdict(Decision.DENY, PLAN_MODE, None)


@pytest.mark.parametrize(("tool", "effect"), itertools.product(TOOLS, (Effect.READ, Effect.NETWORK)))
def test_plan_lets_read_and_network_through(tool: str, effect: Effect) -> None:
    assert evaluate(_request(tool, effect), Posture.PLAN, ALLOW_ALL).decision is Decision.ALLOW
    # …to the rules, which still decide: nothing matched asks, a deny denies
    assert evaluate(_request(tool, effect), "plan", []).decision is Decision.ASK
    deny = [*ALLOW_ALL, parse_rule("deny:Bash(echo *)", "session")]
    assert evaluate(_request(tool, effect), "plan", deny).decision is Decision.DENY


@pytest.mark.parametrize("effect", list(Effect))
def test_default_posture_passes_everything_to_the_rules(effect: Effect) -> None:
    assert apply_posture(Posture.DEFAULT, effect) is None
    assert evaluate(_request("Bash", effect), Posture.DEFAULT, ALLOW_ALL).decision is Decision.ALLOW


def test_read_only_posture() -> None:
    assert apply_posture("read_only", "read") is None
    for effect in ("write", "execute", "network"):
        verdict = apply_posture(Posture.READ_ONLY, effect)
        assert verdict is not None and verdict.decision is Decision.DENY


def test_apply_posture_table() -> None:
    assert apply_posture("plan", "read") is None and apply_posture("plan", Effect.NETWORK) is None
    assert apply_posture("plan", "write") == Verdict(Decision.DENY, "plan mode", None)
    assert apply_posture(Posture.PLAN, Effect.EXECUTE) == Verdict(Decision.DENY, "plan mode", None)
    # an effect the posture does not list is refused, not passed through
    verdict = apply_posture("plan", "WRITE")
    assert verdict is not None and verdict.decision is Decision.DENY


def test_unknown_posture_fails_closed() -> None:
    verdict = evaluate(_request("Bash", Effect.EXECUTE), "yolo", ALLOW_ALL)
    assert verdict.decision is Decision.DENY and "unknown posture 'yolo'" in verdict.reason
    assert evaluate(_request("Read", Effect.READ), "yolo", ALLOW_ALL).decision is Decision.ALLOW


def test_evaluate_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("posture store exploded")

    monkeypatch.setattr(posture_mod, "apply_posture", boom)
    verdict = evaluate(_request("Bash", Effect.READ), Posture.DEFAULT, ALLOW_ALL)
    assert verdict.decision is Decision.ASK and verdict.reason.startswith("engine error")


def test_protected_and_root_reach_the_rules(ws: str, layout: dict[str, str]) -> None:
    req = Request("s1", "Write", Effect.WRITE, paths=("data/x",))
    assert evaluate(req, "default", ALLOW_ALL, ("/w/data",), root="/w").decision is Decision.DENY
    assert evaluate(req, "default", ALLOW_ALL, ("/w/data",)).decision is Decision.ALLOW
    link = Request("s1", "Write", Effect.WRITE, paths=("data_link/x",))
    assert evaluate(link, "default", ALLOW_ALL, (layout["{data}"],)).decision is Decision.DENY
    assert evaluate(req, "default", ALLOW_ALL, ("/w/data",), root=None).decision is Decision.ASK  # unresolvable
