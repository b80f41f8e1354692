"""The bypass corpus (tests/data/grants_bypass.toml): every case through posture.evaluate, over a
workspace built on disk (tests/grants/conftest.py) so the path cases are judged on real paths."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from ouroactors.authorities.grants.posture import evaluate
from ouroactors.authorities.grants.rules import Decision, Request, parse_rule

CORPUS = Path(__file__).resolve().parent.parent / "data" / "grants_bypass.toml"
CASES: list[dict[str, Any]] = tomllib.loads(CORPUS.read_text())["case"]
KNOWN = {"command", "rules", "expect", "why", "tool", "effect", "paths", "domains", "posture", "protected", "root",
         "pad_to", "reason", "scope"}


def _fill(value: Any, layout: dict[str, str]) -> Any:
    """Replace the layout placeholders ({ws}, {out}, {data}, {base}, {WS}) in strings and lists."""
    if isinstance(value, list):
        return [_fill(v, layout) for v in value]
    if isinstance(value, str):
        for key, real in layout.items():
            value = value.replace(key, real)
    return value


def _command(case: dict[str, Any]) -> str | None:
    command = case.get("command")
    if command is not None and "pad_to" in case:
        command += " " + "a" * (case["pad_to"] - len(command) - 1)
        assert len(command) == case["pad_to"]
    return command


def _id(case: dict[str, Any]) -> str:
    what = case.get("command") or f"{case.get('tool')} {case.get('paths') or case.get('domains')}"
    return f"{case.get('posture', 'default')}:{what[:50]}"


def test_corpus_is_well_formed() -> None:
    assert len(CASES) >= 100
    for case in CASES:
        assert set(case) <= KNOWN, case
        assert {"rules", "expect", "why"} <= set(case), case
        assert case["expect"] in ("allow", "ask", "deny"), case


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_bypass_case(case: dict[str, Any], layout: dict[str, str]) -> None:
    case = {key: _fill(value, layout) for key, value in case.items()}
    rules = [parse_rule(text, case.get("scope", "session")) for text in case["rules"]]
    request = Request(
        principal="session-1",
        tool=case.get("tool", "Bash"),
        effect=case.get("effect", "execute"),
        paths=tuple(case.get("paths", ())),
        command=_command(case),
        domains=tuple(case.get("domains", ())),
    )
    verdict = evaluate(request, case.get("posture", "default"), rules, tuple(case.get("protected", ())),
                       root=case.get("root"))
    assert verdict.decision is Decision(case["expect"]), f"{case['why']}: got {verdict}"
    if "reason" in case:
        assert case["reason"] in verdict.reason, verdict
