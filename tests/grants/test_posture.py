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


@pytest.mark.parametrize(("tool", "effect"), list(itertools.product(TOOLS, (Effect.WRITE, Effect.EXECUTE))))
def test_plan_refuses_write_and_execute_through_every_tool(tool: str, effect: Effect) -> None:
    verdict = evaluate(_request(tool, effect), Posture.PLAN, ALLOW_ALL)
    assert verdict == Verdict(Decision.DENY, PLAN_MODE, None)


@pytest.mark.parametrize(("tool", "effect"), list(itertools.product(TOOLS, (Effect.READ, Effect.NETWORK))))
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


# -- the http method: plan mode keeps reads of the world and refuses writes to it (seed 000, seed 001) ------------

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
STATE_CHANGING = ("POST", "PUT", "PATCH", "DELETE")
GITHUB = [parse_rule("allow:WebFetch(domain:api.github.com)", "user")]


def _http(method: str) -> Request:
    return Request("s1", "http", Effect.NETWORK, domains=("api.github.com",), method=method)


@pytest.mark.parametrize("method", STATE_CHANGING)
def test_plan_refuses_state_changing_http_even_where_rules_allow_everything(method: str) -> None:
    assert evaluate(_http(method), Posture.PLAN, GITHUB) == Verdict(Decision.DENY, PLAN_MODE, None)
    every = [*ALLOW_ALL, parse_rule("allow:WebWrite(domain:*)", "node")]
    assert evaluate(_http(method), Posture.PLAN, every) == Verdict(Decision.DENY, PLAN_MODE, None)
    assert evaluate(_http(method), Posture.READ_ONLY, every).decision is Decision.DENY
    assert evaluate(_http(method), Posture.DEFAULT, every).decision is Decision.ALLOW


@pytest.mark.parametrize("method", SAFE_METHODS)
def test_plan_lets_safe_http_through_to_the_rules(method: str) -> None:
    assert evaluate(_http(method), Posture.PLAN, GITHUB).decision is Decision.ALLOW
    assert evaluate(_http(method), Posture.PLAN, []).decision is Decision.ASK
    assert evaluate(_http(method), Posture.READ_ONLY, GITHUB).decision is Decision.DENY  # read_only: no network


@pytest.mark.parametrize("method", ["post", "get", "Get", "FOO", "GET\r\n", "GET ", "", "TRACE", "CONNECT"])
def test_plan_refuses_a_method_that_is_not_exactly_safe(method: str) -> None:
    assert evaluate(_http(method), Posture.PLAN, ALLOW_ALL) == Verdict(Decision.DENY, PLAN_MODE, None)
    assert evaluate(_http(method), Posture.DEFAULT, GITHUB).decision is Decision.ASK  # a write: WebFetch is not enough


def test_http_methods_across_postures_property() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    every = [*ALLOW_ALL, parse_rule("allow:WebWrite(domain:*)", "node")]
    near = st.sampled_from(SAFE_METHODS).flatmap(lambda m: st.sampled_from((m.lower(), m + "\n", " " + m, m[:-1])))
    methods = st.one_of(st.sampled_from((*SAFE_METHODS, *STATE_CHANGING)), st.text(max_size=12), near)

    @settings(max_examples=300, deadline=None)
    @given(methods, st.sampled_from(list(Posture)), st.booleans())
    def check(method: str, posture: Posture, write_grant: bool) -> None:
        rules = every if write_grant else GITHUB
        verdict = evaluate(_http(method), posture, rules)
        safe = method in SAFE_METHODS
        if posture is Posture.READ_ONLY:
            assert verdict.decision is Decision.DENY
        elif posture is Posture.PLAN and not safe:
            assert verdict == Verdict(Decision.DENY, PLAN_MODE, None)
        elif safe or write_grant:
            assert verdict.decision is Decision.ALLOW
        else:  # default posture, a write, only WebFetch: never allowed
            assert verdict.decision is Decision.ASK

    check()
