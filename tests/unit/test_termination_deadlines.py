"""A stop always ends: every wait for a child's exit has a deadline (pure core, virtual time).

Whatever the children do — answer, ignore the polite request, or die with their exit notice lost —
a supervisor stopping N dynamic children exits within ``ceil(N / STOP_WINDOW)`` rounds of
(shutdown time + kill grace), reports each child terminated exactly once, and never has more than
``STOP_WINDOW`` children being stopped at once.
"""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from ouroactors.supervision import reasons
from ouroactors.supervision.signals import Kill, RequestStop
from ouroactors.supervision.termination import KILL_GRACE_S, STOP_WINDOW

from .sim import World, booted, wk


def _pool(n: int, shutdown: int | str) -> World:
    world = booted(wk("job", shutdown=shutdown), strategy="simple_one_for_one", intensity=10)
    for _ in range(n):
        world.admin("start_child")
    world.clear()
    return world


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 2 * STOP_WINDOW + 50),
    shutdown=st.sampled_from([1, 500, 5000, "brutal_kill"]),
    stubborn_every=st.integers(0, 7),
    drop_kills=st.booleans(),
)
def test_a_stop_of_many_children_ends_within_its_deadlines(n: int, shutdown: int | str, stubborn_every: int,
                                                           drop_kills: bool) -> None:
    world = _pool(n, shutdown)
    if stubborn_every:
        world.stubborn = {f"job#{i}" for i in range(1, n + 1) if i % stubborn_every == 0}
    world.drop_kills = drop_kills
    world.shutdown()
    per_round = (0 if shutdown == "brutal_kill" else int(shutdown) / 1000) + KILL_GRACE_S
    step = 0.25  # the test's clock moves in steps: each window can start up to one step after the last ended
    bound = math.ceil(n / STOP_WINDOW) * (per_round + step)
    elapsed = 0.0
    while world.exited is None and elapsed <= bound:
        world.advance(step)
        elapsed += step
    assert world.exited == reasons.shutdown(), f"still stopping after {elapsed}s (bound {bound}s)"
    terminated = [e.child or "" for e in world.events("terminated")]
    assert sorted(terminated) == sorted(f"job#{i}" for i in range(1, n + 1))
    asked = [c.key for c in world.log if isinstance(c, RequestStop | Kill)]
    assert len(set(asked)) == n  # every child asked (or killed at once if brutal)
    assert world.running == {}


def test_at_most_a_window_of_children_is_being_stopped_at_once() -> None:
    world = _pool(3 * STOP_WINDOW, 1000)
    world.hold_stops = True
    world.shutdown()
    assert len([c for c in world.log if isinstance(c, RequestStop)]) == STOP_WINDOW
    world.advance(0.999)
    assert world.killed() == []
    world.advance(0.001)  # this window's time is over: killed, their notices free the next window
    assert len(world.killed()) == STOP_WINDOW
    assert len([c for c in world.log if isinstance(c, RequestStop)]) == 2 * STOP_WINDOW
