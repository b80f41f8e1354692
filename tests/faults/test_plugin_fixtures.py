"""The plugin's fixtures for a user's own tree: a tree file running, a plan armed, the checkers."""

from __future__ import annotations

from pathlib import Path

import pytest

from ouroactors.core.errors import ActorCrashed, SpecError
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule
from ouroactors.faults.checks import Observation, Violation
from ouroactors.faults.runner import workload_tree
from ouroactors.faults.workload import WorkloadConfig

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "supervision_trees" / "example.toml"


def test_tree_system_runs_a_tree_file_on_its_base(tree_system):
    system = tree_system(EXAMPLE, base="simple")
    assert system.base == "simple"
    assert {path for path, info in system.walk() if info.status == "running"} >= {"example/authority",
                                                                                 "example/pair/left"}


def test_tree_system_refuses_a_bad_file_naming_it(tree_system, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[tree]\nid = 'r'\n[[tree.children]]\nid = 'a'\nactor = 'no.such:Thing'\n")
    with pytest.raises(SpecError, match=r"no\.such:Thing"):
        tree_system(bad)


def test_armed_plan_arms_from_a_file_and_the_actor_fails_there(tree_system, armed_plan, tmp_path):
    system = tree_system(EXAMPLE, base="simple")
    plan = tmp_path / "plan.toml"
    plan.write_text('[[rules]]\npoint = "message.example/pair/left"\naction = "raise"\nnth = 1\n')
    assert armed_plan(system, plan, at="example/pair/left") == ["example/pair/left"]
    with pytest.raises(ActorCrashed):
        system.ask("example/pair/left", "hello")


def test_invariants_pass_a_clean_run_and_fail_a_broken_one(fault_bench, invariants):
    bench = fault_bench(workload_tree(), WorkloadConfig(sessions=1, effects=2), base="simple")
    result = bench.run("fixture", FaultPlan((FaultRule("storage.before_commit", FaultAction.COMMIT_REJECTED, nth=2),)))
    invariants.assert_holds(result)
    assert "effect-without-start" in invariants.names

    broken = Observation(run_id="r", entries=[], first_seq=1,
                         world_log=[{"key": "r/k", "event": "delivered", "t_ns": 1}])
    assert invariants.check(broken, ["effect-without-start"]) == [
        Violation("effect-without-start", "r/k", "the world saw 1 delivery(ies) but the ledger has no committed "
                                                 "start for this idempotency key")]
    with pytest.raises(pytest.fail.Exception, match=r"1 invariant violation\(s\) in run r"):
        invariants.assert_holds(broken, ["effect-without-start"])
