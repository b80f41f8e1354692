"""What a decision costs on a tool call's path, and what it must still do.

* The workspace root and the protected roots are resolved on disk only when the request has a path to judge (a
  requested path, or a file its command writes): a plain command is decided without them, and the same verdict
  comes out either way.
* A recorded decision's entry id is ``permission-`` and 32 hex digits, unique, in the order the decisions were made
  (each new entry goes to the end of the ledger's ``permission-`` keys).
"""

from __future__ import annotations

import itertools
import re

import pytest

from ouroactors.authorities.grants import rules as rules_module
from ouroactors.authorities.grants.inline import permission_entry, permission_id
from ouroactors.authorities.grants.rules import Decision, Effect, Request, Verdict, decide, parse_rule

RULES = [parse_rule(t, "user") for t in ("allow:Bash(true)", "allow:Bash(echo *)", "deny:Bash(rm *)",
                                         "allow:Write(/srv/**)")]


@pytest.fixture
def contexts(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str | None, tuple[str, ...]]]:
    """Every resolution of the roots on disk that a decision asks for."""
    calls: list[tuple[str | None, tuple[str, ...]]] = []
    real = rules_module.targets_context

    def counting(root: str | None, protected: tuple[str, ...]):  # type: ignore[no-untyped-def]
        calls.append((root, protected))
        return real(root, protected)

    monkeypatch.setattr(rules_module, "targets_context", counting)
    return calls


@pytest.mark.parametrize(("command", "decision"), [("true", Decision.ALLOW), ("echo hi", Decision.ALLOW),
                                                   ("rm -rf x", Decision.DENY), ("make", Decision.ASK)])
def test_a_command_without_paths_is_decided_without_resolving_the_roots(contexts, tmp_path, command, decision):
    verdict = decide(Request("s", "shell", Effect.EXECUTE, command=command), RULES, protected=(str(tmp_path),),
                     root=str(tmp_path))
    assert verdict.decision is decision
    assert contexts == []


def test_a_command_that_writes_a_file_still_resolves_them_and_is_judged_by_them(contexts, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    verdict = decide(Request("s", "shell", Effect.EXECUTE, command=f"echo x > {data}/f"), RULES,
                     protected=(str(data),), root=str(tmp_path))
    assert verdict.decision is Decision.DENY and "protected" in verdict.reason  # the data dir, found on disk
    assert contexts == [(str(tmp_path), (str(data),))]
    assert decide(Request("s", "write", Effect.WRITE, paths=("/srv/a",)), RULES).decision is Decision.ALLOW
    assert len(contexts) == 2


def test_permission_ids_are_unique_prefixed_and_in_decision_order():
    ids = [permission_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"permission-[0-9a-f]{32}", i) for i in ids)
    assert all(a[:27] <= b[:27] for a, b in itertools.pairwise(ids))  # 'permission-' and the time (ns) first
    entry = permission_entry(Request("s", "shell", Effect.EXECUTE, command="true"),
                             Verdict(Decision.ALLOW, "allowed", RULES[0]), 3)
    assert entry.effect_id.startswith("permission-") and entry.idempotency_key == entry.effect_id


def test_the_permission_entry_binds_the_http_method():
    """What the ledger records names the method that was judged: a GET and a POST of one host are not one decision."""
    from ouroactors.authorities.ledger.domain import fingerprint

    verdict = Verdict(Decision.ASK, "no rule", None)
    get, post = (permission_entry(Request("s", "http", Effect.NETWORK, domains=("h",), method=m), verdict, 1)
                 for m in ("GET", "POST"))
    assert get.fingerprint == fingerprint("permission", {"tool": "http", "effect": "network", "paths": [],
                                                         "command": None, "domains": ["h"], "method": "GET"})
    assert post.fingerprint == fingerprint("permission", {"tool": "http", "effect": "write", "paths": [],
                                                          "command": None, "domains": ["h"], "method": "POST"})
    # a request that names no method is recorded as before
    shell = permission_entry(Request("s", "shell", Effect.EXECUTE, command="true"), verdict, 1)
    assert shell.fingerprint == fingerprint("permission", {"tool": "shell", "effect": "execute", "paths": [],
                                                           "command": "true", "domains": []})
