"""A simulated system (simple base on virtual time): timers, clocks and a whole chaos campaign are
deterministic — two runs of the same seeds leave the same event log, byte for byte, simulated
kills included."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ouroactors import ActorSystem, supervisor, worker
from ouroactors.core import clock
from ouroactors.core.clock import VIRTUAL_WALL_ORIGIN_NS
from ouroactors.core.errors import ActorSystemError
from ouroactors.faults.chaos import Campaign
from ouroactors.faults.runner import workload_tree
from ouroactors.faults.workload import WorkloadConfig

TICKER = "tests.simulation.actors:Ticker"
# Generous timeouts: on virtual time they never expire by accident, whatever the machine's load.
CONFIG = WorkloadConfig(sessions=2, effects=2, refuse_every=3, ask_timeout=5.0, lease_wait=5.0, op_deadline=30.0)


@pytest.fixture
def simulated(tmp_path: Path):
    system = ActorSystem.start("simple", tmp_path / "sim", simulated=True)
    try:
        yield system
    finally:
        system.shutdown()
    assert not clock.simulated()  # the process has its real clock back


def test_an_hour_long_timer_fires_at_once_in_virtual_time(simulated: ActorSystem) -> None:
    simulated.start_tree(supervisor("t", [worker("ticker", TICKER)]))
    armed_at = simulated.ask("t/ticker", "after 3600")
    began = time.monotonic()
    simulated.run_for(1800)
    assert simulated.ask("t/ticker", "fired") == []  # not due yet
    simulated.run_for(1800)
    fired = simulated.ask("t/ticker", "fired")
    assert time.monotonic() - began < 5.0  # two virtual half-hours, no real ones
    assert len(fired) == 1 and fired[0] - armed_at == pytest.approx(3600, abs=0.01)


def test_event_times_and_generations_come_from_the_virtual_clock(simulated: ActorSystem) -> None:
    simulated.start_tree(supervisor("t", [worker("ticker", TICKER)]))
    started = simulated.wait_for("started", "t/ticker")
    assert VIRTUAL_WALL_ORIGIN_NS <= started.time_ns < VIRTUAL_WALL_ORIGIN_NS + 10**9
    assert started.generation is not None and started.generation & ((1 << 48) - 1) < 10**6
    assert started.node == "sim" and "pid" not in started.fields


def test_simulation_needs_the_simple_base(tmp_path: Path) -> None:
    with pytest.raises(ActorSystemError, match="simulated=True needs the simple base"):
        ActorSystem.start("multiproc", tmp_path / "m", simulated=True)
    assert not clock.simulated()


def test_one_simulation_per_process(simulated: ActorSystem, tmp_path: Path) -> None:
    with pytest.raises(ActorSystemError, match="already runs in this process"):
        ActorSystem.start("simple", tmp_path / "second", simulated=True)
    assert clock.simulated()  # the first one still owns time


def test_run_for_refuses_a_negative_time(simulated: ActorSystem) -> None:
    with pytest.raises(ValueError, match="seconds"):
        simulated.run_for(-1)


def _campaign(data_dir: Path, seeds: range) -> tuple[bytes, list[list[str]]]:
    with Campaign(workload_tree(), CONFIG, base="simple", data_dir=data_dir) as campaign:
        results = list(campaign.run(seeds))
    assert [r.error for r in results if r.error] == []
    assert [(r.seed, str(v)) for r in results for v in r.violations] == []
    return (data_dir / "system" / "events.jsonl").read_bytes(), [r.fired() for r in results]


@pytest.mark.slow
def test_a_simple_base_campaign_is_deterministic_byte_for_byte(tmp_path: Path) -> None:
    seeds = range(24)
    first_log, first_fired = _campaign(tmp_path / "a", seeds)
    second_log, second_fired = _campaign(tmp_path / "b", seeds)
    assert first_fired == second_fired
    assert first_log == second_log
    events = [json.loads(line) for line in first_log.splitlines()]
    kinds = {e["kind"] for e in events}
    assert {"fault_fired", "exited", "restarting"} <= kinds  # faults fired and actors crashed and came back
    killed = {e["path"] for e in events if e["kind"] == "exited" and (e.get("reason") or {}).get("kind") == "killed"}
    assert {"agent/ledger", "agent/storage"} & killed  # simulated deaths are in the replayed history too
    assert any(e["kind"] == "fault_fired" and e.get("action") == "kill" for e in events)
    # Firings name the actor that was handling the message, not the last one armed.
    actors = {e.get("actor", e["path"]) for e in events if e["kind"] == "fault_fired"}
    assert {"agent/ledger", "agent/workspace"} <= actors

    other_log, _ = _campaign(tmp_path / "c", range(1, 25))  # other seeds, another history
    assert other_log != first_log


def test_the_simulated_system_fixture_runs_on_virtual_time(simulated_system: ActorSystem) -> None:
    simulated_system.start_tree(supervisor("t", [worker("ticker", TICKER)]))
    simulated_system.ask("t/ticker", "after 60")
    simulated_system.run_for(61)
    assert len(simulated_system.ask("t/ticker", "fired")) == 1
    assert simulated_system.simulation is not None and clock.simulated()


def test_a_point_reached_in_on_start_is_the_starting_actors(simulated: ActorSystem) -> None:
    from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule

    simulated.start_tree(supervisor("t", [worker("counter", "tests.simulation.actors:Counter"),
                                          worker("starter", "tests.simulation.actors:StartsAtAPoint")]))
    simulated.arm_faults("t", FaultPlan((FaultRule("test.sim.at_start", FaultAction.DELAY),)))
    assert simulated.ask("t/counter", "incr") == 1  # the last actor to handle a message before the start below
    simulated.terminate_child("t", "starter")
    simulated.restart_child("t", "starter")
    simulated.events.poll()
    fired = [e for e in simulated.events.all() if e.kind == "fault_fired" and e.fields["point"] == "test.sim.at_start"]
    assert [e.fields.get("actor", e.path) for e in fired] == ["t/starter"]
