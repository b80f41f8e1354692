"""The process clock: real by default, virtual in a simulation; fault rules read it too."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from ouroactors.core import clock, faults
from ouroactors.core.clock import VIRTUAL_WALL_ORIGIN_NS, VirtualClock
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule


@pytest.fixture
def virtual() -> Iterator[VirtualClock]:
    v = VirtualClock(tick_ns=1_000)
    previous = clock.install(v)
    try:
        yield v
    finally:
        clock.install(previous)
        faults.disarm()


def test_the_default_clock_is_real() -> None:
    assert not clock.simulated()
    before = time.time_ns()
    assert before <= clock.time_ns() <= time.time_ns()


def test_virtual_time_moves_only_when_advanced(virtual: VirtualClock) -> None:
    assert clock.simulated()
    assert clock.monotonic_ns() == 0 and clock.time_ns() == VIRTUAL_WALL_ORIGIN_NS
    virtual.tick()
    virtual.advance(0)
    virtual.advance(-5)  # never backwards
    assert clock.monotonic_ns() == 1_000
    virtual.advance_to(500)
    assert clock.monotonic_ns() == 1_000
    virtual.advance_to(3_000_000_000)
    assert clock.monotonic() == 3.0


def test_a_virtual_sleep_takes_no_real_time(virtual: VirtualClock) -> None:
    began = time.monotonic()
    clock.sleep(3600)
    assert time.monotonic() - began < 1.0
    assert clock.monotonic() == 3600.0


def test_at_real_maps_a_real_instant_to_the_virtual_time_current_then(virtual: VirtualClock) -> None:
    before = time.time_ns()
    virtual.advance(10)
    middle = time.time_ns()
    virtual.advance(20)
    assert virtual.at_real(before - 1) == VIRTUAL_WALL_ORIGIN_NS  # before any move
    assert virtual.at_real(middle) == VIRTUAL_WALL_ORIGIN_NS + 10
    assert virtual.at_real(time.time_ns()) == VIRTUAL_WALL_ORIGIN_NS + 30
    virtual.forget_before(time.time_ns())
    assert virtual.at_real(time.time_ns()) == VIRTUAL_WALL_ORIGIN_NS + 30  # the last move is kept


def test_install_refuses_what_is_not_a_clock() -> None:
    with pytest.raises(TypeError, match="expected a Clock"):
        clock.install(time)  # type: ignore[arg-type]


def test_bad_ticks_are_refused() -> None:
    with pytest.raises(ValueError, match="tick_ns"):
        VirtualClock(tick_ns=-1)


def test_a_delay_firing_passes_virtual_time_instead_of_sleeping(virtual: VirtualClock) -> None:
    faults.arm(FaultPlan((FaultRule("p", FaultAction.DELAY, delay_s=120.0),)))
    began = time.monotonic()
    faults.point("p")
    assert time.monotonic() - began < 1.0
    assert clock.monotonic() == 120.0
    assert faults.firings()[0].at_ns == VIRTUAL_WALL_ORIGIN_NS  # stamped when it fired, before the delay


def test_after_s_keeps_a_rule_dormant_and_dormant_hits_do_not_count(virtual: VirtualClock) -> None:
    faults.arm(FaultPlan((FaultRule("p", FaultAction.RAISE, after_s=5, nth=2),)))
    for _ in range(10):
        faults.point("p")  # dormant: neither fires nor counts
    virtual.advance(5 * 10**9)
    faults.point("p")  # hit 1 after the five seconds
    with pytest.raises(faults.FaultInjected):
        faults.point("p")  # hit 2
    assert [f.hit for f in faults.firings()] == [2]


@pytest.mark.parametrize("bad", [-1, "soon", True])
def test_after_s_must_be_a_non_negative_number(bad: object) -> None:
    with pytest.raises(ValueError, match="after_s"):
        FaultRule("p", FaultAction.RAISE, after_s=bad)  # type: ignore[arg-type]


def test_after_s_round_trips_through_a_plan_dict() -> None:
    plan = FaultPlan((FaultRule("p", FaultAction.DELAY, after_s=1.5, delay_s=0.1),))
    assert FaultPlan.from_dict(plan.to_dict()) == plan


def test_a_firing_names_the_actor_handling_a_message() -> None:
    faults.arm(FaultPlan((FaultRule("p", FaultAction.DELAY),)))
    try:
        faults.acting_as("agent/ledger")
        faults.point("p")
        faults.acting_as("agent/storage")
        faults.point("p")
    finally:
        faults.acting_as(None)
        faults.disarm()
    assert [f.actor for f in faults.firings()] == ["agent/ledger", "agent/storage"]
