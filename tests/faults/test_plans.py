"""Seeded plans (same seed → same plan), plans as TOML, and bad input refused before anything is armed."""

from __future__ import annotations

import warnings

import pytest

from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule, load_plan
from ouroactors.faults.chaos import (
    Campaign,
    PlanWarning,
    check_plan,
    declared_points,
    parse_seed,
    plan_for_seed,
    plan_to_toml,
)
from ouroactors.faults.runner import workload_tree
from ouroactors.faults.workload import WorkloadConfig

POINTS = ["message.agent/ledger", "message.agent/workspace", "storage.after_commit", "storage.before_commit",
          "workspace.lease_recorded"]
TARGETS = ["agent/ledger", "agent/storage", "agent/workspace"]


def test_same_seed_same_plan():
    for seed in range(50):
        plan = plan_for_seed(seed, POINTS, kill_targets=TARGETS)
        assert plan == plan_for_seed(seed, list(reversed(POINTS)), kill_targets=list(reversed(TARGETS)))
        assert plan == plan_for_seed(seed, {p: "doc" for p in POINTS}, kill_targets=TARGETS)  # a known_points() dict
        assert 1 <= len(plan.rules) <= 3
    plans = {plan_for_seed(seed, POINTS, kill_targets=TARGETS) for seed in range(50)}
    assert len(plans) > 40  # seeds differ
    actions = {r.action for p in plans for r in p.rules}
    assert {FaultAction.KILL, FaultAction.DELAY, FaultAction.COMMIT_UNKNOWN} <= actions


def test_plans_only_use_given_points_and_targets():
    for seed in range(200):
        for rule in plan_for_seed(seed, POINTS, kill_targets=TARGETS).rules:
            assert rule.point in POINTS
            assert rule.target is None or rule.target in TARGETS
            if rule.action is FaultAction.COMMIT_REJECTED or rule.action is FaultAction.MAP_FULL:
                assert rule.point == "storage.before_commit"  # after the commit, only "unknown" is honest


def test_no_kills_when_kills_are_off():
    for seed in range(100):
        assert all(r.action is not FaultAction.KILL for r in plan_for_seed(seed, POINTS, kills=False).rules)


HITS = {"message.agent/ledger": 8, "storage.after_commit": 16, "storage.before_commit": 16}  # a recording's

# What seeds 0-199 drew (over these points and targets, with hits and without) before ``raises`` existed: a seed an
# earlier campaign printed must replay as it ran, so a new kind of rule may not change the draws of plans without it.
GOLDEN_POINTS = ["coordinator.a", "effect.started", "journal.put", "ledger.x", "message.agent/ledger",
                 "runtime.turn_started", "storage.after_commit", "storage.before_commit", "workspace.acquired"]
GOLDEN = "a674ecc001c28d564cf936b5e3667a1088469910dfecc7bfdd73f901a07744fc"


def test_every_seed_keeps_the_plan_it_always_had():
    import hashlib
    import json

    digest = hashlib.sha256()
    for seed in range(200):
        for hits in (None, {p: (i % 4) + 1 for i, p in enumerate(GOLDEN_POINTS)}):
            plan = plan_for_seed(seed, GOLDEN_POINTS, kill_targets=["agent/ledger", "agent/grants"], hits=hits,
                                 deaths=1 if hits else 0)
            digest.update(json.dumps(plan.to_dict(), sort_keys=True, default=str).encode())
    assert digest.hexdigest() == GOLDEN


def test_raises_draw_raise_rules_aimed_as_kills_are_and_with_no_target():
    plans = [plan_for_seed(seed, POINTS, kill_targets=TARGETS, hits=HITS, raises=True) for seed in range(200)]
    raised = [r for p in plans for r in p.rules if r.action is FaultAction.RAISE]
    assert len(raised) > 30
    for rule in raised:  # raised in whatever code reaches the point: a target would mean nothing
        assert rule.target is None and rule.times == 1
        assert rule.point in HITS and 1 <= (rule.nth or 0) <= HITS[rule.point]
    assert plans == [plan_for_seed(seed, POINTS, kill_targets=TARGETS, hits=HITS, raises=True) for seed in range(200)]
    blind = [r for seed in range(100) for r in plan_for_seed(seed, POINTS, raises=True).rules
             if r.action is FaultAction.RAISE]
    assert blind and all(r.point in POINTS and 1 <= (r.nth or 0) <= 8 for r in blind)
    assert not [r for seed in range(200) for r in plan_for_seed(seed, POINTS, hits=HITS).rules
                if r.action is FaultAction.RAISE]


def test_a_raises_campaign_replays_with_raises():
    from ouroactors.cli.chaos import _replay_command

    assert _replay_command("t.toml", "runtime", 2, 2, "multiproc", "multiproc", 0.4, True).endswith(
        "--seed {seed} --raises")
    assert "--raises" not in _replay_command("t.toml", "runtime", 2, 2, "multiproc", "multiproc", 0.4)


def test_recorded_hits_aim_every_kill_at_a_hit_that_happens():
    for seed in range(200):
        for rule in plan_for_seed(seed, POINTS, kill_targets=TARGETS, hits=HITS).rules:
            if rule.action is FaultAction.KILL:
                assert rule.point in HITS and 1 <= (rule.nth or 0) <= HITS[rule.point], rule


def test_a_simulated_seed_adds_deaths_from_a_stream_of_their_own():
    for seed in range(200):
        plain = plan_for_seed(seed, POINTS, kill_targets=TARGETS, hits=HITS)
        dying = plan_for_seed(seed, POINTS, kill_targets=TARGETS, hits=HITS, deaths=1)
        assert dying == plan_for_seed(seed, POINTS, kill_targets=TARGETS, hits=HITS, deaths=1)  # deterministic
        assert dying.rules[:-1] == plain.rules  # the seed's other draws are untouched
        death = dying.rules[-1]
        assert death.action is FaultAction.KILL and death.target is None and death.times == 1
        assert death.point in HITS and 1 <= (death.nth or 0) <= HITS[death.point]
    sites = {(p.rules[-1].point, p.rules[-1].nth)
             for p in (plan_for_seed(s, POINTS, hits=HITS, deaths=1) for s in range(400))}
    assert len(sites) > 30  # spread over the recording's hits, not stuck on a few
    with pytest.raises(ValueError, match="deaths: need the hits"):
        plan_for_seed(1, POINTS, deaths=1)


def test_plans_round_trip_through_toml(tmp_path):
    for seed in range(30):
        plan = plan_for_seed(seed, POINTS, kill_targets=TARGETS)
        path = tmp_path / f"seed{seed}.toml"
        path.write_text(plan_to_toml(plan, [f"chaos seed {seed}"]))
        assert load_plan(path) == plan
        assert path.read_text().startswith(f"# chaos seed {seed}\n[[rules]]")


@pytest.mark.parametrize("bad", ["abc", "1.5", "", None, True, 2.0, "0x10"])
def test_a_seed_that_is_not_an_integer_is_a_clear_error(bad):
    with pytest.raises(ValueError) as caught:
        parse_seed(bad)
    assert str(caught.value) == f"seed: must be an integer, got {bad!r}"
    with pytest.raises(ValueError, match="seed: must be an integer"):
        plan_for_seed(bad, POINTS)


def test_seeds_as_text_and_negative_seeds():
    assert parse_seed(" 42 ") == 42 and parse_seed(-3) == -3
    assert plan_for_seed("7", POINTS) == plan_for_seed(7, POINTS)


def test_no_points_or_bad_max_rules_is_an_error():
    with pytest.raises(ValueError, match="no fault point"):
        plan_for_seed(1, [])
    with pytest.raises(ValueError, match="max_rules: must be an int >= 1"):
        plan_for_seed(1, POINTS, max_rules=0)


def test_unknown_points_warn_with_the_list_of_known_ones():
    plan = FaultPlan((FaultRule("storage.before_comit", FaultAction.COMMIT_REJECTED),
                      FaultRule("storage.*", FaultAction.DELAY)))
    warned = check_plan(plan, POINTS)
    assert warned == [f"rules[0]: point 'storage.before_comit' is not a known point; known points: "
                      f"{', '.join(sorted(POINTS))}"]


@pytest.mark.parametrize(("rule", "message"), [
    ('action = "explode"', "rules[0]: action: invalid value 'explode'; allowed: 'raise'"),
    ('action = "delay"\nprobability = 1.5', "rules[0]: probability: must be a number in [0, 1], got 1.5"),
    ('action = "delay"\nprobability = "often"', "rules[0]: probability: must be a number in [0, 1]"),
    ('action = "kill"\nnth = 0', "rules[0]: nth: must be an int >= 1, got 0"),
])
def test_invalid_actions_and_probabilities_are_errors(tmp_path, rule, message):
    path = tmp_path / "plan.toml"
    path.write_text(f'[[rules]]\npoint = "storage.before_commit"\n{rule}\n')
    with pytest.raises(ValueError) as caught:
        load_plan(path)
    assert message in str(caught.value) and str(path) in str(caught.value)


def test_a_campaign_warns_about_unknown_points_before_arming_and_refuses_bad_plans(monkeypatch):
    campaign = Campaign(workload_tree(), WorkloadConfig(), base="simple")
    armed: list[object] = []

    def run(*args: object, **kwargs: object) -> None:  # stands in for arming and running
        armed.append(args)
        raise RuntimeError("stop here")

    monkeypatch.setattr(campaign.bench, "run", run)
    typo = FaultPlan((FaultRule("storage.befor_commit", FaultAction.DELAY),))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = campaign.run_seed(3, typo)
    warning = next(str(w.message) for w in caught if w.category is PlanWarning)
    # the known points listed depend on which modules registered theirs (import order of the suite)
    assert warning.startswith("rules[0]: point 'storage.befor_commit' is not a known point; known points: ")
    assert "message.agent/ledger" in warning
    assert result.error == "RuntimeError: stop here"  # the warning came first, then the run
    with pytest.raises(ValueError, match="exit rules end the whole process"):
        campaign.run_seed(3, FaultPlan((FaultRule("storage.before_commit", FaultAction.EXIT),)))
    killing = campaign.run_seed(3, FaultPlan((FaultRule("storage.before_commit", FaultAction.KILL),)))
    assert killing.error == "RuntimeError: stop here"  # a kill runs on the simple base: simulated
    with pytest.raises(TypeError, match="expected a FaultPlan"):
        campaign.run_seed(3, {"rules": []})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="seed: must be an integer"):
        campaign.run_seed("x")  # type: ignore[arg-type]
    assert len(armed) == 2  # only the valid plans got as far as a run


def test_declared_points_name_every_worker():
    points = declared_points(workload_tree())
    assert {"message.agent/storage", "message.agent/ledger", "message.agent/workspace",
            "storage.before_commit", "storage.after_commit", "workspace.lease_recorded"} <= set(points)


def test_a_seeded_plan_may_fail_only_a_journals_puts():
    """``journal.put`` is a storage point: some seeds make a journal's puts fail inside a transaction that still
    commits (the gap path under fault injection), with a storage action, never a kill only."""
    from ouroactors.faults.chaos_plans import STORAGE_POINTS, plan_for_seed

    assert "journal.put" in STORAGE_POINTS
    points = ["journal.put", "runtime.turn_started", "storage.before_commit"]
    drawn = [rule for seed in range(200) for rule in plan_for_seed(seed, points).rules if rule.point == "journal.put"]
    actions = {rule.action.value for rule in drawn}
    assert {"commit_rejected", "map_full", "commit_unknown"} <= actions


def test_faults_points_lists_the_agent_runtimes_points_too():
    """``ouroactors faults points`` names every point a plan for the agent tree may aim at: the authorities', and the
    session runtime's and coordinator's (the effect path, the journal's puts, the publication steps). In a process of
    its own, as a user runs it: this one has imported more than the command does."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "ouroactors.cli", "faults", "points"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    listed = {line.split()[0] for line in done.stdout.splitlines() if line.strip()}
    assert {"storage.before_commit", "ledger.settle_received", "effect.started", "journal.put", "runtime.turn_started",
            "coordinator.checkpoint_committed"} <= listed, sorted(listed)
