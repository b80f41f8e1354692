"""Seeded chaos on a user's own scenario (:mod:`ouroactors.faults.scenario_chaos`): the same seed draws the same plan
and, on the simulated base, ends the same way; the torn-write store is caught by some seeds and the atomic one by
none."""

from __future__ import annotations

import pytest

from ouroactors import supervisor, worker
from ouroactors.faults.scenario_chaos import chaos_scenario

from .test_scenario_enumeration import Scenario


def _tree(actor):
    return supervisor("app", [worker("store", f"tests.faults.scenario_app:{actor}", kwargs={"path": "s.json"})],
                      intensity=20)


def test_the_simulated_base_finds_the_torn_write_and_replays_a_seed_exactly():
    scenario = Scenario()
    campaign = chaos_scenario(_tree("TornStore"), scenario.drive, scenario.check, seeds=30, base="simple")
    assert campaign.baseline.outcome == "ok" and len(campaign.rows) == 30
    failed = campaign.failed
    assert failed, campaign.summary()
    for row in failed:  # each caught by a kill at the torn write, and saying which acknowledged key it lost
        assert ("app/store", "scenario_app.half_written", "kill") in row.fired, row.fired
        assert any("was acknowledged and is gone" in v for v in row.violations), row.violations
    again = chaos_scenario(_tree("TornStore"), scenario.drive, scenario.check, seeds=[failed[0].seed], base="simple")
    [replayed] = again.rows
    assert (replayed.plan, replayed.fired, replayed.violations) == (failed[0].plan, failed[0].fired,
                                                                     failed[0].violations)


def test_the_atomic_store_survives_every_seed():
    scenario = Scenario()
    campaign = chaos_scenario(_tree("Store"), scenario.drive, scenario.check, seeds=30, base="simple")
    assert campaign.summary() == {"ok": 30}
    assert any(action == "kill" for row in campaign.rows for _, _, action in row.fired)  # kills did land


@pytest.mark.multiproc
def test_multiproc_seeds_kill_real_processes():
    scenario = Scenario()
    campaign = chaos_scenario(_tree("TornStore"), scenario.drive, scenario.check, seeds=range(8))
    killed = [row for row in campaign.rows if ("app/store", "killed") in row.run.exits]
    assert killed, [(row.seed, row.fired) for row in campaign.rows]
    assert all(row.outcome in ("ok", "VIOLATION") for row in campaign.rows), campaign.summary()


def test_a_scenario_reaching_no_point_and_bad_arguments_are_said():
    reached_none = chaos_scenario(supervisor("app", []), lambda system: None, seeds=3, base="simple")
    assert reached_none.rows == [] and "reached no fault point" in reached_none.baseline.violations[0]
    with pytest.raises(ValueError, match="base"):
        chaos_scenario(_tree("Store"), print, base="threads")
    with pytest.raises(ValueError):
        chaos_scenario(_tree("Store"), print, seeds=["x"])


def _pool():
    return supervisor("app", [supervisor("pool", [worker("w", "ouroactors.examples.workers:Echo")],
                                         strategy="simple_one_for_one", intensity=50)], intensity=20)


def _pool_drive(system):  # a pool's children are started by the scenario itself, after anything could be armed
    for i in range(3):
        info = system.start_child("app/pool", (i,))
        for _ in range(3):
            try:
                system.ask(f"app/pool/{info.id}", "hello", timeout=3)
            except Exception:
                pass  # a kill mid-request: judged by check, not here


@pytest.mark.multiproc
def test_chaos_reaches_the_children_a_scenario_starts():
    campaign = chaos_scenario(_pool(), _pool_drive, seeds=range(12))
    assert campaign.baseline.outcome == "ok", campaign.baseline.violations
    in_children = [(row.seed, actor, point) for row in campaign.rows for actor, point, _ in row.fired
                   if actor.startswith("app/pool/w#")]
    assert in_children, [(row.seed, row.fired) for row in campaign.rows]
    # a child killed by its plan comes back unarmed: the pool never gives up (intensity 50 is far away)
    assert all(row.outcome == "ok" for row in campaign.rows), [(row.seed, row.violations) for row in campaign.rows]
