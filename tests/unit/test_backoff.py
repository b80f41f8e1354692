"""Restart backoff (beyond OTP): delays, jitter bounds, reset, and consumers held during the wait."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ouroactors.supervision.decisions import backoff_delay, backoff_reset_after
from ouroactors.supervision.signals import ScheduleSelf, TryAgain
from ouroactors.supervision.specs import Backoff, build_spec

from .sim import World

ECHO = "ouroactors.examples.workers:Echo"


def spec(strategy: str = "one_for_one", **backoff: float) -> object:
    b = {"min_s": 1.0, "max_s": 8.0, "jitter": 0.0, **backoff}
    return build_spec({"id": "root", "type": "supervisor", "strategy": strategy, "intensity": 100, "period": 5,
                       "children": [{"id": "auth", "actor": ECHO, "backoff": b},
                                    {"id": "consumer", "actor": ECHO}]})


def test_delay_doubles_from_min_and_caps_at_max():
    b = Backoff(min_s=0.5, max_s=3.0, jitter=0.0)
    assert [backoff_delay(b, n, 0.5) for n in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]


@given(st.integers(0, 100), st.floats(0, 0.999), st.floats(0, 1))
def test_jitter_stays_within_its_fraction(n, u, jitter):
    b = Backoff(min_s=0.1, max_s=5.0, jitter=jitter)
    base = min(5.0, 0.1 * 2 ** min(n, 62))
    assert base * (1 - jitter) - 1e-9 <= backoff_delay(b, n, u) <= base * (1 + jitter) + 1e-9


def test_reset_after_defaults_to_midpoint():
    assert backoff_reset_after(Backoff(min_s=1, max_s=9)) == 5.0
    assert backoff_reset_after(Backoff(min_s=1, max_s=9, reset_after_s=2)) == 2


def test_restart_waits_for_the_delay_and_event_says_when():
    world = World(spec()).start()
    world.clear()
    world.crash("auth")
    assert world.spawned() == []  # not restarted yet
    [scheduled] = world.events("restart_scheduled")
    assert scheduled.fields["due_in"] == 1.0
    assert next(c for c in world.log if isinstance(c, ScheduleSelf)).message == TryAgain("auth", 1, counted=False)
    assert world.core.children.info(world.core.children.get("auth"), world.now).retry_in == 1.0
    world.advance(0.5)
    assert world.spawned() == []
    world.advance(0.5)
    assert world.spawned() == ["auth"]


def test_consecutive_crashes_back_off_longer_and_a_long_run_resets():
    world = World(spec()).start()
    delays = []
    for _ in range(3):
        world.clear()
        world.crash("auth")
        delays.append(world.events("restart_scheduled")[0].fields["due_in"])
        world.advance(delays[-1])
    assert delays == [1.0, 2.0, 4.0]
    world.advance(4.5)  # ran longer than reset_after ((1 + 8) / 2)
    world.clear()
    world.crash("auth")
    assert world.events("restart_scheduled")[0].fields["due_in"] == 1.0


def test_rest_for_one_holds_consumers_down_during_the_backoff():
    world = World(spec("rest_for_one")).start()
    world.clear()
    world.crash("auth")
    assert world.stopped() == ["consumer"]  # terminated at once ...
    assert world.spawned() == []  # ... and not started until the authority is back
    world.advance(1.0)
    assert world.spawned() == ["auth", "consumer"]


def test_a_consumer_held_down_says_which_restart_it_waits_for():
    """Its status stays OTP's ``undefined``; its row names the sibling whose restart starts it again, so an ask of it
    is answered ``ChildRestarting`` (as README promises) rather than "not running"."""
    world = World(spec("rest_for_one")).start()
    children = world.core.children
    world.crash("auth")
    held = children.info(children.get("consumer"), world.now)
    assert (held.status, held.waits_for) == ("undefined", "auth")
    assert children.info(children.get("auth"), world.now).waits_for is None
    world.advance(1.0)
    assert children.info(children.get("consumer"), world.now).waits_for is None  # running again
    one = World(spec("one_for_one")).start()
    one.crash("auth")
    assert one.core.children.info(one.core.children.get("consumer"), one.now).waits_for is None  # never stopped


def test_backoff_counts_against_intensity_once_per_exit():
    world = World(spec()).start()
    world.crash("auth")
    world.advance(1.0)
    assert world.core.window.recent == 1
