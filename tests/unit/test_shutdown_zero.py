"""``shutdown = 0`` is OTP's timed shutdown with a 0 ms timeout, not ``brutal_kill``.

OTP's ``shutdown/1`` for an integer T sends ``exit(Child, shutdown)`` and waits ``receive … after T``
for the child's exit before killing it; with T = 0 the child is still asked first, and killed (a
``shutdown_error`` with reason ``killed``, as for any timeout) only if it has not already exited.
``brutal_kill`` alone kills without asking.
"""

from __future__ import annotations

from ouroactors.supervision import reasons
from ouroactors.supervision.signals import Kill, RequestStop, SetTimer
from ouroactors.supervision.specs import worker

from .sim import ECHO, booted, wk


def test_zero_asks_first_then_kills_as_a_timeout() -> None:
    world = booted(wk("a", shutdown=0))
    world.stubborn = {"a"}  # cannot stop at once
    assert world.admin("terminate_child", "a") == "pending"
    sent = [c for c in world.log if isinstance(c, RequestStop | Kill | SetTimer)]
    assert [type(c) for c in sent] == [RequestStop, SetTimer]  # asked, with a 0 s deadline
    assert sent[1].seconds == 0.0  # type: ignore[union-attr]
    world.advance(0.0)
    assert world.killed() == ["a"]
    assert [e.kind for e in world.events()][-2:] == ["shutdown_timeout", "terminated"]
    terminated = world.events("terminated")[-1]
    assert terminated.fields["reason"]["kind"] == "killed"
    assert terminated.fields["shutdown_error"] is True  # OTP's report for a kill after the timeout
    assert world.status() == {"a": "undefined"}


def test_zero_a_child_that_exits_at_once_is_not_killed() -> None:
    world = booted(wk("a", shutdown=0))
    world.admin("terminate_child", "a")  # the world's child honours the request at once
    assert world.killed() == []
    terminated = world.events("terminated")[-1]
    assert terminated.fields["reason"]["kind"] == "shutdown"
    assert terminated.fields["shutdown_error"] is False
    assert world.events("shutdown_timeout") == []


def test_zero_on_tree_shutdown_asks_every_child() -> None:
    world = booted(wk("a", shutdown=0), wk("b", shutdown=0))
    world.stubborn = {"a", "b"}
    world.shutdown()
    for _ in range(2):
        world.advance(0.0)
    assert [k for k in world.stopped()] == ["b", "b", "a", "a"]  # each asked, then killed: newest first
    assert world.exited == reasons.shutdown()


def test_brutal_kill_still_kills_without_asking() -> None:
    world = booted(wk("a", shutdown="brutal_kill"))
    world.stubborn = {"a"}
    world.admin("terminate_child", "a")
    assert [type(c) for c in world.log if isinstance(c, RequestStop | Kill)] == [Kill]
    assert world.events("terminated")[-1].fields["shutdown_error"] is False


def test_get_childspec_reports_zero_not_brutal_kill() -> None:
    world = booted(wk("a", shutdown=0), wk("b", shutdown="brutal_kill"), wk("c"))
    assert world.admin("get_childspec", "a").shutdown == 0
    assert world.admin("get_childspec", "b").shutdown == "brutal_kill"
    assert world.admin("get_childspec", "c").shutdown == 5000


def test_spec_tells_zero_from_brutal_kill() -> None:
    zero, brutal = worker("a", ECHO, shutdown=0), worker("a", ECHO, shutdown="brutal_kill")
    assert zero.shutdown_ms == brutal.shutdown_ms == 0
    assert not zero.brutal_kill and brutal.brutal_kill
