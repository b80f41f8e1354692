"""The workload on real processes: a crash-free run has no violation and ends as expected; the
driver re-binds after a generation change; the grant comes from the grants authority when the tree
has one (asked again when its answer is lost or it asks for approval); bad configuration is refused."""

from __future__ import annotations

import pytest

from ouroactors.authorities.asking import ask_authority
from ouroactors.authorities.grants.actor import RevokeRules
from ouroactors.authorities.ledger.actor import ListEntries
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule
from ouroactors.faults.runner import BenchError, prepare_tree, tree_targets, workload_tree
from ouroactors.faults.workload import (
    DENIED_HOST,
    Driver,
    EffectSpec,
    Targets,
    WorkloadConfig,
    allow_all,
    deny_every,
    grant_rules,
)

pytestmark = pytest.mark.multiproc


def test_a_clean_run_settles_everything_as_expected(fault_bench):
    config = WorkloadConfig(sessions=3, effects=3, refuse_every=4, deny_every=5, slow_every=7, effect_timeout=0.3)
    bench = fault_bench(workload_tree(), config)
    result = bench.run("clean")
    assert result.violations == []
    record = result.record
    assert len(record.effects) == 9
    expected = {effect_id: effect.expected for effect_id, effect in record.effects.items()}
    assert sorted(expected.values()).count("failed") == 2 and list(expected.values()).count("denied") == 1
    entries = {e.effect_id: e for e in result.observation.run_entries()}
    for effect_id, effect in record.effects.items():
        assert entries[effect_id].status.value == effect.expected, (effect_id, effect)
        assert entries[f"{effect_id}/grant"].kind == "permission"  # the grant recorded in the ledger first
        assert entries[f"{effect_id}/grant"].evidence["by"] == "grants"  # ... decided by the grants authority
        assert effect.grant_answers == (["deny"] if effect.expected == "denied" else ["allow"])
        assert "grants" in entries[effect_id].authority  # the start names the grants generation it ran under
    [denied] = [e for e in record.effects.values() if e.expected == "denied"]
    assert f"deny:WebFetch(domain:{DENIED_HOST})" in entries[denied.effect_id].reason  # denied by the rule
    decisions = [e for e in result.observation.entries if e.effect_id.startswith("permission-")]  # the authority's
    assert len(decisions) == 9 and {e.session_id for e in decisions} == {f"clean/s{i}" for i in range(3)}
    slow = [e for e in record.effects.values() if e.outcome.startswith("left-started")]
    assert len(slow) == 1  # the late reply: left started by the driver, never settled failed ...
    reconciled = entries[slow[0].effect_id]
    assert reconciled.settled_by == "reconciler:http_request"  # ... and proven ok by asking the world
    assert result.recovery[0].startswith("ledger restarted")
    assert all(lease.released for lease in record.leases.values())
    assert result.observation.leases == [] or all(x.status == "released" for x in result.observation.leases)
    assert record.lease_snapshots and result.exits == [] and result.firings == []
    assert result.statuses == {"denied": 1, "failed": 2, "ok": 6}


def test_runs_on_one_bench_are_independent(fault_bench):
    bench = fault_bench(workload_tree(), WorkloadConfig(sessions=2, effects=2))
    first, second = bench.run("same"), bench.run("same")
    assert (first.run_id, second.run_id) == ("same", "same.2")
    assert first.violations == [] and second.violations == []
    assert second.observation.first_seq == first.observation.first_seq + len(first.observation.entries)
    assert {e.effect_id.split("/")[0] for e in second.observation.run_entries()} == {"same.2"}


def test_ledger_workload_without_leases(fault_bench):
    bench = fault_bench(workload_tree(workspace=False), WorkloadConfig(sessions=2, effects=2, leases=False))
    result = bench.run("noleases")
    assert result.violations == [] and result.record.leases == {}
    assert result.statuses == {"ok": 4}


def test_without_a_grants_authority_the_grant_callable_decides(fault_bench):
    bench = fault_bench(workload_tree(grants=False), WorkloadConfig(sessions=2, effects=2, deny_every=3))
    assert bench.targets.grants is None
    result = bench.run("callable")
    assert result.violations == [] and result.statuses == {"denied": 1, "ok": 3}
    entries = {e.effect_id: e for e in result.observation.run_entries()}
    assert {e.evidence["by"] for i, e in entries.items() if i.endswith("/grant")} == {"callable"}
    assert not any(e.effect_id.startswith("permission-") for e in result.observation.entries)


def test_a_lost_grant_answer_is_asked_again(fault_bench):
    """The grants authority is SIGKILLed after its decision is durable, before it answers: the
    driver asks again (a new decision, recorded too) and the effect runs once, under that grant."""
    bench = fault_bench(workload_tree(), WorkloadConfig(sessions=1, effects=2, ask_timeout=0.5))
    plan = FaultPlan((FaultRule("grants.decision_recorded", FaultAction.KILL, nth=1),))
    result = bench.run("lostgrant", plan, at=["agent/grants"])
    assert result.killed[:1] == ["agent/grants"] and result.violations == []
    assert result.statuses == {"ok": 2} and result.record.outcomes() == {"settled-ok": 2}
    decisions = [e for e in result.observation.entries if e.effect_id.startswith("permission-")]
    assert len(decisions) == 3  # the lost one, its retry, and the second effect's
    assert result.observation.deliveries().keys() == {"lostgrant/s0/k0", "lostgrant/s0/k1"}


def test_an_allow_the_authority_cannot_record_is_an_ask_and_asked_again(fault_bench):
    bench = fault_bench(workload_tree(), WorkloadConfig(sessions=1, effects=1))
    plan = FaultPlan((FaultRule("storage.before_commit", FaultAction.COMMIT_REJECTED, times=2),))
    result = bench.run("unrecordable", plan, at=["agent/grants"])
    [effect] = result.record.effects.values()
    assert effect.grant_answers == ["ask", "ask", "allow"]  # unrecordable twice, then recorded
    assert result.violations == [] and result.statuses == {"ok": 1}


def test_an_effect_that_stays_asked_for_approval_is_given_up_unrecorded_and_never_run(fault_bench):
    tree = workload_tree()
    children = [c.model_copy(update={"kwargs": {"rules": {"user": ["ask:WebFetch(domain:127.0.0.1)"]}}})
                if c.id == "grants" else c for c in tree.children or ()]
    config = WorkloadConfig(sessions=1, effects=1, op_deadline=0.5)
    bench = fault_bench(tree.model_copy(update={"children": tuple(children)}), config)
    result = bench.run("asked")
    [effect] = result.record.effects.values()
    assert effect.outcome.startswith("abandoned: not granted: asked for approval (ask by user rule")
    assert set(effect.grant_answers) == {"ask"} and not effect.start_committed and not effect.effect_called
    assert result.violations == [] and result.statuses == {} and result.observation.world_log == []


def test_the_driver_rebinds_to_a_new_grants_generation(fault_bench):
    bench = fault_bench(workload_tree(), WorkloadConfig(sessions=1, effects=2))
    system = bench.live
    old = system.child_info(bench.targets.grants).generation
    mark = system.mark()
    system.kill(bench.targets.grants)  # rest_for_one restarts the workspace after it too
    system.wait_for("started", bench.targets.workspace, after=mark)
    bench.ensure_ready()
    new = system.child_info(bench.targets.grants).generation
    assert new != old
    (bench.workspace_base / "regrant" / "pair0").mkdir(parents=True)
    driver = Driver(system, bench.targets, bench.client, bench.config,
                    workspace_root=str(bench.workspace_base / "regrant"))
    driver.generations[bench.targets.grants] = old  # bound before the restart
    record = driver.run("regrant")
    assert record.stale_answers >= 1 and all(e.outcome == "settled-ok" for e in record.effects.values())
    entries = [e for e in system.ask(bench.targets.ledger, ListEntries(limit=1000))
               if e.effect_id.startswith("regrant/")]
    assert entries and all(e.authority["grants"] == new for e in entries)


def test_a_grant_callable_and_a_grants_authority_are_one_or_the_other(fault_bench):
    with pytest.raises(BenchError, match=r"has a grants authority .* a grant callable would be ignored"):
        fault_bench(workload_tree(), WorkloadConfig(), grant=allow_all)
    targets = Targets(ledger="agent/ledger", grants="agent/grants")
    with pytest.raises(ValueError, match="a grant callable would be ignored"):
        Driver(None, targets, None, WorkloadConfig(), grant=allow_all)  # type: ignore[arg-type]


def test_the_grants_authority_is_configured_for_the_workload():
    tree = prepare_tree(workload_tree(), allowed_root="/tmp/w", world_host="127.0.0.1")
    [grants] = [c for c in tree.children or () if c.id == "grants"]
    assert grants.kwargs["rules"]["node"] == grant_rules("127.0.0.1") == [
        "allow:WebFetch(domain:127.0.0.1)", "allow:WebWrite(domain:127.0.0.1)", f"deny:WebFetch(domain:{DENIED_HOST})"]
    mine = workload_tree().model_copy()
    own = [c.model_copy(update={"kwargs": {"rules": {"node": ["deny:Bash(rm *)"], "user": ["allow:Read(**)"]}}})
           if c.id == "grants" else c for c in mine.children or ()]
    kept = prepare_tree(mine.model_copy(update={"children": tuple(own)}), allowed_root="/tmp/w")
    [grants] = [c for c in kept.children or () if c.id == "grants"]
    assert grants.kwargs["rules"] == {"node": ["deny:Bash(rm *)", *grant_rules("127.0.0.1")],
                                      "user": ["allow:Read(**)"]}


def test_the_drivers_grant_request_is_the_post_it_sends_judged_as_a_write():
    """The synthetic driver asks grants about the HTTP POST it sends the world: with its method, so a rule set that
    admits reads only (WebFetch) does not admit it, the workload's rules (WebWrite) do, and a denied host stays
    denied whatever the method."""
    from ouroactors.authorities.grants.rules import Decision, Effect, decide, parse_rules

    driver = Driver(None, Targets(ledger="agent/ledger", grants="agent/grants"), None,  # type: ignore[arg-type]
                    WorkloadConfig())
    allowed = driver.grant_request(EffectSpec("r", "r:s0", 0, 0))
    forbidden = driver.grant_request(EffectSpec("r", "r:s0", 1, 1, forbidden=True))
    assert (allowed.method, allowed.effect) == ("POST", Effect.WRITE)
    reads_only = parse_rules([f"allow:WebFetch(domain:{driver.world_host})"], "node")
    assert decide(allowed, reads_only).decision is not Decision.ALLOW
    workload = parse_rules(grant_rules(driver.world_host), "node")
    assert decide(allowed, workload).decision is Decision.ALLOW
    assert decide(forbidden, workload).decision is Decision.DENY


def test_the_driver_rebinds_after_a_generation_change(fault_bench):
    bench = fault_bench(workload_tree(), WorkloadConfig(sessions=1, effects=2))
    system = bench.live
    old = system.child_info(bench.targets.ledger).generation
    mark = system.mark()
    system.kill(bench.targets.ledger)
    system.wait_for("started", bench.targets.ledger, after=mark)
    bench.ensure_ready()
    new = system.child_info(bench.targets.ledger).generation
    assert new != old
    (bench.workspace_base / "stale" / "pair0").mkdir(parents=True)
    driver = Driver(system, bench.targets, bench.client, bench.config,
                    workspace_root=str(bench.workspace_base / "stale"))
    driver.generations[bench.targets.ledger] = old  # bound before the restart
    record = driver.run("stale")
    assert record.stale_answers >= 1  # refused as stale, then re-bound and asked again
    entries = [e for e in system.ask(bench.targets.ledger, ListEntries(limit=1000)) if e.effect_id.startswith("stale/")]
    assert entries and all(e.authority["ledger"] == new for e in entries)  # never acted on under the old one
    assert all(e.outcome == "settled-ok" for e in record.effects.values())


def test_targets_are_found_by_class():
    targets = tree_targets(workload_tree("root"), 2)
    assert (targets.ledger, targets.workspace, targets.storage) == ("root/ledger", "root/workspace", "root/storage")
    assert targets.grants == "root/grants"
    assert targets.owners == ("sessions/s0", "sessions/s1") and targets.owner_of(3) == "sessions/s1"
    assert tree_targets(workload_tree("root", grants=False), 2).grants is None
    assert [c.id for c in workload_tree().children or ()] == ["storage", "ledger", "grants", "workspace"]


@pytest.mark.parametrize(("fields", "message"), [
    ({"sessions": 0}, "sessions: must be an int in [1, 1000], got 0"),
    ({"effects": "2"}, "effects: must be an int in [1, 1000], got '2'"),
    ({"refuse_every": 0}, "refuse_every: must be an int >= 1 or None, got 0"),
    ({"ask_timeout": -1}, "ask_timeout: must be a number of seconds > 0, got -1"),
    ({"op_deadline": True}, "op_deadline: must be a number of seconds > 0, got True"),
])
def test_bad_configuration_is_refused(fields, message):
    with pytest.raises(ValueError) as caught:
        WorkloadConfig(**fields)
    assert str(caught.value) == message


def test_deny_every_and_effect_specs():
    config = WorkloadConfig(sessions=2, effects=3, refuse_every=2)
    specs = config.effect_specs("r", 1)
    assert [s.effect_id for s in specs] == ["r/s1/e0", "r/s1/e1", "r/s1/e2"]
    assert [s.ordinal for s in specs] == [3, 4, 5] and [s.refuse for s in specs] == [True, False, True]
    grant = deny_every(3)
    assert [grant(s).allow for s in specs] == [True, True, False]
    forbidden = WorkloadConfig(sessions=2, effects=3, deny_every=3).effect_specs("r", 1)
    assert [s.forbidden for s in forbidden] == [not grant(s).allow for s in forbidden]  # one choice, two paths
    assert EffectSpec("r", "r/s0", 0, 0).arguments() == EffectSpec("r", "r/s0", 0, 0, slow=True).arguments()
    with pytest.raises(ValueError, match="deny_every: must be an int >= 1"):
        deny_every(0)


def test_a_worker_whose_exit_its_supervisor_missed_is_replaced(fault_bench):
    """Two SIGKILLs a few ms apart can make thespian drop one exit notice: the supervisor then shows
    a dead worker as running. The bench must notice (pid gone for a while) and replace it, visibly.
    Tried up to 20 times, until the drop happens (it usually does within a few tries)."""
    import os
    import signal
    import time

    from ouroactors.core.procs import pid_alive

    bench = fault_bench(workload_tree(), WorkloadConfig(sessions=2, effects=1))
    system = bench.live
    for _attempt in range(20):
        before = {path: system.pid_of(path) for path in ("sessions/s0", "sessions/s1")}
        os.kill(before["sessions/s1"], signal.SIGKILL)
        time.sleep(0.002)  # not synchronisation: the two deaths must be this close to provoke the drop
        os.kill(before["sessions/s0"], signal.SIGKILL)
        # SIGKILL takes effect asynchronously: under load a process can still look alive for a few ms after
        # os.kill returns, and a bench that looked then would rightly find everything running
        gone_by = time.monotonic() + 10.0
        while any(pid_alive(pid) for pid in before.values()):
            assert time.monotonic() < gone_by, f"a SIGKILLed worker is still alive: {before}"
            time.sleep(0.001)  # polling the kernel's view of the pids, with a deadline
        bench.ensure_ready()
        after = {path: system.pid_of(path) for path in before}
        assert all(after[path] != before[path] for path in before)
        assert all(os.path.exists(f"/proc/{pid}") for pid in after.values())
        if bench.anomalies:
            break
    print(f"\ninterventions after {_attempt + 1} attempt(s): {bench.anomalies}")
    assert all("supervision lost the exit of sessions/s" in note for note in bench.anomalies)
    assert bench.run("after").violations == []


def test_a_grant_whose_generation_goes_away_before_the_start_is_decided_again(fault_bench, monkeypatch):
    """Grants changes generation between the driver's Decide and its start: the ledger refuses the
    start inside its transaction (nothing recorded, nothing run) and the driver decides again."""
    bench = fault_bench(workload_tree(), WorkloadConfig(sessions=1, effects=2))
    original = Driver._decide
    changed: list[tuple[int, int]] = []

    def decide_then_revoke(self, spec, record):
        decision = yield from original(self, spec, record)
        if not changed:  # once: the first effect's decision goes stale before its start is recorded
            system, grants = self.system, self.targets.grants
            old = system.child_info(grants).generation
            mark = system.mark()
            assert ask_authority(system, grants, RevokeRules("user", ())) == "revoked"
            system.wait_for("started", self.targets.workspace, after=mark)  # adopted and published
            changed.append((old, system.child_info(grants).generation))
        return decision

    monkeypatch.setattr(Driver, "_decide", decide_then_revoke)
    result = bench.run("regrant")
    assert changed and changed[0][0] != changed[0][1]
    assert result.violations == [] and result.statuses == {"ok": 2}
    first = result.record.effects["regrant/s0/e0"]
    assert first.start_answers[0] == "error:StaleGeneration(grants)" and first.grant_answers == ["allow", "allow"]
    assert first.outcome == "settled-ok"
    entries = {e.effect_id: e for e in result.observation.run_entries()}
    assert entries["regrant/s0/e0"].authority["grants"] == changed[0][1]  # ran under the new generation


def test_disarming_a_tree_that_ended_as_its_run_ended_is_no_harness_error(fault_bench):
    """A plan still armed as a run ends can escalate the tree while the bench disarms it (a seed of
    ``chaos --workload runtime --raises`` failed so: "no running tree named 'agent'"). The ended tree's processes took
    their plans with them: there is nothing to disarm there, and the bench starts the tree again for its checks."""
    bench = fault_bench(workload_tree(), WorkloadConfig(sessions=1, effects=1))
    bench.ready_timeout = 3.0
    plan = FaultPlan((FaultRule("ledger.start_committed", FaultAction.DELAY, probability=0.01, delay_s=0.001),))
    assert bench.arm(plan)
    workers = bench.arm(None, [f"{bench.tree.id}/ledger", f"{bench.tree.id}/storage"])  # disarmed, armed again
    assert workers and bench.arm(plan)
    bench.live.stop_tree(bench.tree.id)  # as an escalation would end it, between the bench's walk and its asks
    # (the walk found these workers): was NoSuchActor after the ready timeout, and the run a harness error
    assert bench.arm(None, workers) == []
    assert bench.arm(None) == []
    assert bench.ensure_ready()  # started again
    assert bench.run("after").violations == []
