"""A 200-seed chaos campaign on real processes: random kills, storage faults and delays; every
invariant checked after every seed; schedules per minute measured."""

from __future__ import annotations

import time

import pytest

from ouroactors.faults.chaos import Campaign
from ouroactors.faults.runner import workload_tree
from ouroactors.faults.workload import WorkloadConfig

pytestmark = pytest.mark.multiproc

SEEDS = 200
CONFIG = WorkloadConfig(sessions=2, effects=2, refuse_every=3, ask_timeout=0.4, lease_wait=3.0, op_deadline=10.0)


@pytest.mark.slow
# 200 seeds take ~85 s alone on a 2-core box; beside the other xdist worker's tests its 0.4 s asks time out more
# often and each retry costs more: a CI run went past the default 300 s hang guard. It asserts no timing.
@pytest.mark.timeout(900)
def test_a_200_seed_campaign_finds_no_violation(tmp_path, record_property):
    began = time.monotonic()
    with Campaign(workload_tree(), CONFIG, data_dir=tmp_path) as campaign:
        results = list(campaign.run(range(SEEDS)))
    elapsed = time.monotonic() - began
    stats = campaign.stats
    print(f"\nchaos campaign: {stats.seeds} schedules in {elapsed:.1f}s wall "
          f"({60 * stats.seeds / elapsed:.0f} schedules/minute; {stats.per_minute:.0f}/min excluding start-up); "
          f"{stats.firings} firings, {stats.kills} kills, {stats.escalations} escalations; "
          f"statuses {stats.statuses}; outcomes {stats.outcomes}")
    record_property("schedules_per_minute", round(60 * stats.seeds / elapsed, 1))
    for note in stats.anomalies:  # a supervision failure the bench had to repair (reported, not hidden)
        print(f"  harness intervention: {note}")

    failing = [(r.seed, str(v)) for r in results for v in r.violations]
    assert failing == [], failing
    assert [r.error for r in results if r.error] == []
    assert [r.seed for r in results] == list(range(SEEDS))
    assert stats.kills >= SEEDS // 10 and stats.firings >= SEEDS  # real faults, real SIGKILLs
    killed = {path for r in results if r.run for path in r.run.killed}
    assert {"agent/ledger", "agent/workspace"} <= killed
    assert stats.statuses.get("ok", 0) > SEEDS * 2  # most effects still complete


def test_a_campaign_on_the_simple_base_kills_simulated_and_finds_no_violation(tmp_path):
    """One process on virtual time: kills are simulated deaths of one actor (never of the test)."""
    with Campaign(workload_tree(), CONFIG, base="simple", data_dir=tmp_path) as campaign:
        results = list(campaign.run(range(30)))
    assert [(r.seed, str(v)) for r in results for v in r.violations] == []
    assert [r.error for r in results if r.error] == []
    assert all(rule.action.value != "exit" for r in results for rule in r.plan.rules)
    assert campaign.stats.firings > 0 and campaign.stats.kills >= 5
    killed = {path for r in results if r.run for path in r.run.killed}
    assert {"agent/ledger", "agent/storage"} & killed  # the authorities die too, and recover


@pytest.mark.slow
def test_a_long_simulated_campaign_goes_on_with_a_fresh_system_on_the_same_world(tmp_path):
    with Campaign(workload_tree(), CONFIG, base="simple", data_dir=tmp_path) as campaign:
        campaign.fresh_every = 3
        world = campaign.bench.world
        results = list(campaign.run(range(7)))
        assert campaign.bench.world is world and world.running
    assert [r.error for r in results if r.error] == [] and len(results) == 7
    assert [(r.seed, str(v)) for r in results for v in r.violations] == []
    assert (tmp_path / "fresh1" / "system" / "events.jsonl").exists() and (tmp_path / "fresh2").is_dir()
    assert not world.running  # stopped with the campaign
