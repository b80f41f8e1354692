"""A runtime's inline decision is the grants authority's decision: same function, same durable policy."""

from __future__ import annotations

import pytest

from ouroactors import supervisor, worker
from ouroactors.authorities.asking import ask_authority
from ouroactors.authorities.grants.inline import InlineGrants
from ouroactors.authorities.grants.messages import AddRules, Decide, SetPosture
from ouroactors.authorities.grants.rules import Effect, Request
from ouroactors.authorities.storage.env import StorageConfig, open_env

pytestmark = pytest.mark.multiproc

RULES = {"node": ["deny:Bash(rm -rf *)", "ask:Bash(git push *)"],
         "user": ["allow:Read(**)", "allow:Bash(git *)", "allow:WebFetch(domain:*.example.com)"],
         "workspace": ["allow:Write(/srv/project/**)"]}


def test_inline_decisions_equal_the_authoritys_for_every_request(actor_system, tmp_path):
    actor_system.start_tree(supervisor("agent", strategy="rest_for_one", children=[
        worker("storage", "ouroactors.authorities.storage.actor:Storage"),
        worker("ledger", "ouroactors.authorities.ledger.actor:Ledger"),
        worker("grants", "ouroactors.authorities.grants.actor:Grants", kwargs={"rules": RULES}),
    ]))
    ask_authority(actor_system, "agent/grants", AddRules("session", ("allow:Bash(make *)",), session_id="s1"))
    ask_authority(actor_system, "agent/grants", SetPosture("s2", "plan"))
    inline = InlineGrants(open_env(StorageConfig.under(actor_system.data_dir)))  # opened after the system started
    requests = [
        Request(s, tool, effect, paths, command, domains)
        for s in ("s1", "s2", "s3")
        for tool, effect, paths, command, domains in [
            ("shell", "execute", (), "git status", ()),
            ("shell", "execute", (), "git push origin main", ()),
            ("shell", "execute", (), "rm -rf /", ()),
            ("shell", "execute", (), "make test", ()),  # a session rule: s1 only
            ("shell", "execute", (), "git -c core.pager='sh -c x' log", ()),
            ("read", "read", ("/etc/hostname",), None, ()),
            ("write", "write", ("/srv/project/a.txt",), None, ()),  # plan mode (s2) refuses writes
            ("write", "write", (str(actor_system.data_dir / "x"),), None, ()),  # the data dir: always refused
            ("http", "network", (), None, ("api.example.com",)),
            ("http", "network", (), None, ("evil.test",)),
        ]
    ]
    requests += [Request(s, "http", "network", (), None, (host,), method)  # a POST is a write: WebFetch is not enough
                 for s in ("s1", "s2") for host in ("api.example.com", "evil.test")
                 for method in ("GET", "HEAD", "POST", "DELETE", "post", "GET\r\n")]
    for request in requests:
        judged = ask_authority(actor_system, "agent/grants", Decide(request))
        mine = inline.decide(request, None)
        assert (mine.decision, mine.reason, mine.rule) == (judged.decision, judged.reason, judged.rule), request
    decisions = {(r.principal, r.command): inline.decide(r, None).decision.value for r in requests if r.command}
    assert decisions[("s1", "make test")] == "allow" and decisions[("s3", "make test")] == "ask"
    assert decisions[("s1", "rm -rf /")] == "deny"
    web = {(r.principal, r.domains[0], r.method): inline.decide(r, None).decision.value for r in requests if r.method}
    assert web[("s1", "api.example.com", "GET")] == web[("s2", "api.example.com", "HEAD")] == "allow"
    assert web[("s1", "api.example.com", "POST")] == web[("s1", "api.example.com", "GET\r\n")] == "ask"
    assert web[("s2", "api.example.com", "POST")] == web[("s2", "api.example.com", "post")] == "deny"  # plan mode


def test_a_warmed_session_decides_from_the_rules_parsed_at_open_and_still_sees_new_ones(actor_system, monkeypatch,
                                                                                       tmp_path):
    from ouroactors.authorities.grants import inline as inline_module

    actor_system.start_tree(supervisor("agent", strategy="rest_for_one", children=[
        worker("storage", "ouroactors.authorities.storage.actor:Storage"),
        worker("ledger", "ouroactors.authorities.ledger.actor:Ledger"),
        worker("grants", "ouroactors.authorities.grants.actor:Grants", kwargs={"rules": RULES}),
    ]))
    inline = InlineGrants(open_env(StorageConfig.under(actor_system.data_dir)))
    parses: list[str] = []
    real = inline_module._parse
    monkeypatch.setattr(inline_module, "_parse", lambda *a: parses.append(a[2]) or real(*a))
    inline.warm("s1")
    inline.warm("s2")  # another session's: the cache holds one session's parse (a runtime serves one session)
    make = Request("s1", "shell", "execute", (), "make test", ())
    parses.clear()
    evaluated: list[str] = []
    real_evaluate = inline_module.evaluate
    monkeypatch.setattr(inline_module, "evaluate",
                        lambda r, *a, **k: evaluated.append(r.command) or real_evaluate(r, *a, **k))
    inline.warm("s1")
    assert evaluated == ["true"]  # one decision made and thrown away at open: the evaluator's first run is paid there
    assert inline.decide(make, None).decision.value == "ask" and parses == ["s1"]  # the warm parse was reused…
    parses.clear()
    ask_authority(actor_system, "agent/grants", AddRules("session", ("allow:Bash(make *)",), session_id="s1"))
    assert inline.decide(make, None).decision.value == "allow" and parses == ["s1"]  # …until the rules changed
    bare = InlineGrants(open_env(StorageConfig.under(tmp_path / "bare")))  # no policy published there
    bare.warm("s1")  # not an error at open: the first decision reports it (NoPolicy)
    with pytest.raises(inline_module.NoPolicy):
        bare.decide(make, None)


@pytest.mark.parametrize(("key", "value"), [
    (b"posture/s1", b"\xc1\xc1garbage"),  # not msgpack
    (b"posture/s1", b"\xa5bogus"),  # msgpack, but no posture
    (b"rules/user", b"\xc1\xc1garbage"),
    (b"rules/user", b"\x92\x01\x02"),  # msgpack, but not rule texts
])
def test_a_corrupt_posture_or_rule_record_makes_the_inline_decision_ask_naming_it(tmp_path, key, value):
    """As the authority answers (.records): a record that does not decode never allows, and it does not raise."""
    import lmdb

    from ouroactors.authorities.grants.inline import POLICY_KEY, Policy, policy_record
    from ouroactors.authorities.storage.env import db

    env = open_env(StorageConfig.under(tmp_path))
    grants_db = db(env, b"grants")
    with env.begin(write=True) as txn:
        txn.put(POLICY_KEY, policy_record(Policy(("allow:Bash(true)",), {}, ())), db=grants_db)
    inline = InlineGrants(env)
    true = Request("s1", "shell", Effect.EXECUTE, command="true")
    assert inline.decide(true, None).decision.value == "allow"  # the node rule, while the records are sound
    with env.begin(write=True) as txn:
        txn.put(key, value, db=grants_db)
    try:
        verdict = inline.decide(true, None)
    except (lmdb.Error, ValueError) as exc:  # pragma: no cover - the failure this test is about
        pytest.fail(f"a corrupt record raised instead of answering ask: {exc!r}")
    assert verdict.decision.value == "ask" and "engine error" in verdict.reason, verdict
    if key.startswith(b"posture/"):
        assert "grants/posture/s1" in verdict.reason
