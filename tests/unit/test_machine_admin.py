"""SupervisorCore: the admin API and simple_one_for_one (otp.md 1.2, 1.10)."""

from __future__ import annotations

import time

from ouroactors.core.errors import (
    AlreadyPresent,
    AlreadyStarted,
    ChildNotFound,
    ChildRestarting,
    ChildRunning,
    MaxChildren,
    OuroactorsError,
    SimpleOneForOneOnly,
    SpecError,
    StartFailed,
)
from ouroactors.supervision import reasons
from ouroactors.supervision.children import ChildInfo
from ouroactors.supervision.signals import ChildDown, Kill, RequestStop, SetTimer, Spawn
from ouroactors.supervision.specs import ChildSpec

from .sim import ECHO, World, booted, tree, wk

# -- start_child -----------------------------------------------------------------------------------


def test_start_child_starts_and_appends_to_the_start_order() -> None:
    world = booted(wk("a"), wk("b"))
    info = world.admin("start_child", spec=wk("c", args=(7,)))
    assert isinstance(info, ChildInfo)
    assert (info.id, info.status, info.actor, info.type) == ("c", "running", ECHO, "worker")
    assert info.pid == 1000 + 3
    [spawn] = world.spawns()
    assert spawn.args == (7,)
    assert list(world.status()) == ["a", "b", "c"]
    assert [row.id for row in world.which()] == ["c", "b", "a"]


def test_start_child_already_started() -> None:
    world = booted(wk("a"))
    result = world.admin("start_child", spec=wk("a"))
    assert isinstance(result, AlreadyStarted)
    assert (result.child_id, result.detail) == ("a", 1001)
    assert world.spawned() == []


def test_start_child_already_present_for_a_stopped_spec() -> None:
    world = booted(wk("a", restart="transient"))
    world.admin("terminate_child", "a")
    assert isinstance(world.admin("start_child", spec=wk("a")), AlreadyPresent)
    world.admin("restart_child", "a")
    world.exit("a", reasons.normal())
    assert isinstance(world.admin("start_child", spec=wk("a")), AlreadyPresent)


def test_start_child_failure_does_not_keep_the_spec() -> None:
    world = booted(wk("a"))
    world.fail_starts = {"c": 1}
    result = world.admin("start_child", spec=wk("c"))
    assert isinstance(result, StartFailed)
    assert result.child_id == "c" and "boom" in str(result.detail)
    assert list(world.status()) == ["a"]
    assert world.admin("start_child", spec=wk("c")).status == "running"  # no already_present


def test_start_child_refuses_a_significant_child_when_auto_shutdown_is_never() -> None:
    world = booted(wk("a"))
    result = world.admin("start_child", spec=wk("s", restart="transient", significant=True))
    assert isinstance(result, SpecError)
    assert world.spawned() == []


def test_start_child_accepts_a_significant_child_with_auto_shutdown() -> None:
    world = booted(wk("a"), auto_shutdown="any_significant")
    assert world.admin("start_child", spec=wk("s", restart="transient", significant=True)).status == "running"


def test_start_child_without_a_spec() -> None:
    world = booted(wk("a"))
    result = world.admin("start_child")
    assert isinstance(result, OuroactorsError)


def test_an_unknown_request_is_refused() -> None:
    world = booted(wk("a"))
    result = world.admin("reboot_universe")
    assert isinstance(result, OuroactorsError) and "reboot_universe" in str(result)


def test_a_started_child_takes_part_in_rest_for_one_as_the_last_child() -> None:
    world = booted(wk("a"), wk("b"), strategy="rest_for_one")
    world.admin("start_child", spec=wk("c"))
    world.clear()
    world.crash("a")
    assert world.touched() == ["c", "b", "a", "b", "c"]


def test_start_child_of_a_temporary_child_then_it_exits() -> None:
    world = booted(wk("a"))
    world.admin("start_child", spec=wk("t", restart="temporary"))
    world.exit("t", reasons.normal())
    assert list(world.status()) == ["a"]


# -- terminate_child -------------------------------------------------------------------------------


def test_terminate_child_stops_it_and_keeps_the_spec() -> None:
    world = booted(wk("a"), wk("b"))
    assert world.admin("terminate_child", "a") == "ok"
    assert world.stopped() == ["a"]
    assert world.status() == {"a": "undefined", "b": "running"}
    assert world.spawned() == []  # not restarted, not counted
    assert world.core.window.recent == 0
    [terminated] = world.events("terminated")
    assert terminated.child == "a" and terminated.fields["shutdown_error"] is False


def test_terminate_child_is_idempotent() -> None:
    world = booted(wk("a"))
    world.admin("terminate_child", "a")
    world.clear()
    assert world.admin("terminate_child", "a") == "ok"
    assert world.touched() == []


def test_terminate_child_not_found() -> None:
    world = booted(wk("a"))
    result = world.admin("terminate_child", "zz")
    assert isinstance(result, ChildNotFound) and result.child_id == "zz"


def test_terminate_child_removes_a_temporary_spec() -> None:
    world = booted(wk("a"), wk("t", restart="temporary"))
    assert world.admin("terminate_child", "t") == "ok"
    assert list(world.status()) == ["a"]
    assert isinstance(world.admin("terminate_child", "t"), ChildNotFound)


def test_terminate_child_uses_the_shutdown_protocol() -> None:
    world = booted(wk("a", shutdown=300))
    world.stubborn = {"a"}
    assert world.admin("terminate_child", "a") == "pending"
    world.advance(0.3)
    assert world.killed() == ["a"]
    assert world.status() == {"a": "undefined"}


def test_terminate_child_brutal_kill() -> None:
    world = booted(wk("a", shutdown="brutal_kill"))
    world.admin("terminate_child", "a")
    assert [type(c) for c in world.log if isinstance(c, Kill | RequestStop)] == [Kill]


# -- restart_child ---------------------------------------------------------------------------------


def test_restart_child_after_terminate() -> None:
    world = booted(wk("a"), wk("b"))
    world.admin("terminate_child", "a")
    info = world.admin("restart_child", "a")
    assert info.status == "running" and info.id == "a"
    assert list(world.status()) == ["a", "b"]  # keeps its place


def test_restart_child_refused_while_running() -> None:
    world = booted(wk("a"))
    assert isinstance(world.admin("restart_child", "a"), ChildRunning)


def test_restart_child_not_found() -> None:
    world = booted(wk("a"))
    assert isinstance(world.admin("restart_child", "zz"), ChildNotFound)


def test_restart_child_refused_while_restarting() -> None:
    world = booted(wk("a"), intensity=5)
    world.hold_self = True
    world.fail_starts = {"a": 1}
    world.crash("a")
    assert isinstance(world.admin("restart_child", "a"), ChildRestarting)


def test_restart_child_failure_keeps_the_spec() -> None:
    world = booted(wk("a"))
    world.admin("terminate_child", "a")
    world.fail_starts = {"a": 1}
    result = world.admin("restart_child", "a")
    assert isinstance(result, StartFailed)
    assert world.status() == {"a": "undefined"}
    assert world.core.window.recent == 0  # no try-again loop for a manual restart
    assert world.admin("restart_child", "a").status == "running"


# -- delete_child ----------------------------------------------------------------------------------


def test_delete_child_after_terminate() -> None:
    world = booted(wk("a"), wk("b"))
    world.admin("terminate_child", "a")
    assert world.admin("delete_child", "a") == "ok"
    assert list(world.status()) == ["b"]
    assert isinstance(world.admin("delete_child", "a"), ChildNotFound)
    world.admin("start_child", spec=wk("a"))
    assert list(world.status()) == ["b", "a"]  # a new spec goes to the end


def test_delete_child_refused_while_running() -> None:
    world = booted(wk("a"))
    assert isinstance(world.admin("delete_child", "a"), ChildRunning)


def test_delete_child_refused_while_restarting() -> None:
    world = booted(wk("a"), intensity=5)
    world.hold_self = True
    world.fail_starts = {"a": 1}
    world.crash("a")
    assert isinstance(world.admin("delete_child", "a"), ChildRestarting)


def test_delete_child_not_found() -> None:
    world = booted(wk("a"))
    assert isinstance(world.admin("delete_child", "zz"), ChildNotFound)


# -- introspection ---------------------------------------------------------------------------------


def test_which_children_is_newest_first_with_details() -> None:
    sub = tree(wk("x")).model_copy(update={"id": "sub"})
    world = booted(wk("a"), sub, wk("c", restart="transient"), intensity=5)
    world.crash("a")
    world.exit("c", reasons.shutdown("done"))
    rows = world.which()
    assert [r.id for r in rows] == ["c", "sub", "a"]
    c, s, a = rows
    assert (c.status, c.pid, c.last_exit, c.restarts) == ("undefined", None, "shutdown(done)", 0)
    assert (s.type, s.actor, s.status) == ("supervisor", sub.actor_path, "running")
    assert (a.restarts, a.status, a.address) == (1, "running", "addr-a")
    assert a.last_exit is not None and a.last_exit.startswith("crash(")
    assert a.generation is not None and s.generation is not None and a.generation > s.generation


def test_count_children() -> None:
    sub = tree(wk("x")).model_copy(update={"id": "sub"})
    world = booted(wk("a"), sub, wk("c"), wk("d"))
    world.admin("terminate_child", "c")
    assert world.admin("count_children") == {"specs": 4, "active": 3, "supervisors": 1, "workers": 3}


def test_get_childspec() -> None:
    world = booted(wk("a", args=(1, 2), restart="transient"))
    spec = world.admin("get_childspec", "a")
    assert isinstance(spec, ChildSpec)
    assert spec == wk("a", args=(1, 2), restart="transient", shutdown=5000)  # the default it will use, made explicit
    assert spec.shutdown == 5000
    assert isinstance(world.admin("get_childspec", "zz"), ChildNotFound)


def test_get_childspec_of_a_supervisor_says_infinity() -> None:
    from ouroactors.supervision.specs import supervisor

    world = booted(supervisor("sub", [wk("x")]))
    assert world.admin("get_childspec", "sub").shutdown == "infinity"


def test_which_child() -> None:
    world = booted(wk("a"), wk("b"))
    assert world.admin("which_child", "b").id == "b"
    assert isinstance(world.admin("which_child", "zz"), ChildNotFound)


# -- simple_one_for_one ----------------------------------------------------------------------------


def simple(**fields: object) -> World:
    template = wk("job", args=(1,), **fields)  # type: ignore[arg-type]
    return booted(template, strategy="simple_one_for_one", intensity=10)


def test_simple_boot_starts_nothing() -> None:
    world = World(tree(wk("job"), strategy="simple_one_for_one")).start()
    assert world.boot is None
    assert world.spawned() == []
    assert world.status() == {}


def test_simple_start_child_appends_extra_args_and_names_children_by_key() -> None:
    world = simple()
    first = world.admin("start_child", extra_args=(2, 3))
    second = world.admin("start_child", extra_args=("x",))
    assert (first.id, second.id) == ("job#1", "job#2")
    spawns = world.spawns()
    assert [s.args for s in spawns] == [(1, 2, 3), (1, "x")]
    assert all(s.spec.id == "job" for s in spawns)
    assert spawns[0].snapshot == ()


def test_simple_restart_reuses_the_extra_args() -> None:
    world = simple()
    world.admin("start_child", extra_args=(2,))
    world.clear()
    world.crash("job#1")
    [spawn] = world.spawns()
    assert (spawn.key, spawn.args) == ("job#1", (1, 2))


def test_simple_transient_normal_exit_forgets_the_child() -> None:
    world = simple(restart="transient")
    world.admin("start_child")
    world.exit("job#1", reasons.normal())
    assert world.status() == {}


def test_simple_temporary_child_is_forgotten_after_any_exit() -> None:
    world = simple(restart="temporary")
    world.admin("start_child")
    world.crash("job#1")
    assert world.status() == {}
    assert len(world.spawns()) == 1


def test_simple_start_failure_stores_nothing() -> None:
    world = simple()
    world.fail_starts = {"job": 1}
    result = world.admin("start_child")
    assert isinstance(result, StartFailed) and result.child_id == "job#1"
    assert world.status() == {}


def test_simple_max_children() -> None:
    world = booted(wk("job"), strategy="simple_one_for_one", max_children=2, intensity=10)
    world.admin("start_child")
    world.admin("start_child")
    result = world.admin("start_child")
    assert isinstance(result, MaxChildren) and result.child_id == "job" and result.detail == 2
    world.admin("terminate_child", "job#1")
    assert world.admin("start_child").id == "job#3"


def test_simple_max_children_counts_restarting_children() -> None:
    world = booted(wk("job"), strategy="simple_one_for_one", max_children=1, intensity=10)
    world.admin("start_child")
    world.hold_self = True
    world.fail_starts = {"job": 1}
    world.crash("job#1")
    assert world.status() == {"job#1": "restarting"}
    assert isinstance(world.admin("start_child"), MaxChildren)


def test_simple_delete_and_restart_are_refused() -> None:
    world = simple()
    world.admin("start_child")
    for op in ("delete_child", "restart_child"):
        result = world.admin(op, "job#1")
        assert isinstance(result, SimpleOneForOneOnly)


def test_simple_terminate_child_by_dynamic_key() -> None:
    world = simple()
    world.admin("start_child")
    world.admin("start_child")
    assert world.admin("terminate_child", "job#1") == "ok"
    assert world.stopped() == ["job#1"]
    assert world.status() == {"job#2": "running"}
    assert isinstance(world.admin("terminate_child", "job#1"), ChildNotFound)
    assert isinstance(world.admin("terminate_child", "job#99"), ChildNotFound)


def test_simple_count_children_reports_one_spec() -> None:
    # OTP: [{specs,1},{active,Size-Restarting},{supervisors,0},{workers,Size}] for a worker template.
    world = simple()
    assert world.admin("count_children") == {"specs": 1, "active": 0, "supervisors": 0, "workers": 0}
    for _ in range(3):
        world.admin("start_child")
    world.hold_self = True
    world.fail_starts = {"job": 1}
    world.crash("job#2")
    assert world.admin("count_children") == {"specs": 1, "active": 2, "supervisors": 0, "workers": 3}


def test_simple_which_children_newest_first() -> None:
    world = simple()
    for _ in range(3):
        world.admin("start_child")
    assert [row.id for row in world.which()] == ["job#3", "job#2", "job#1"]


def test_simple_shutdown_stops_2000_children_in_a_window_each_under_its_own_shutdown_time() -> None:
    """Dynamic children stop together, at most STOP_WINDOW at a time, each timed from its request.

    Asking 2000 at once overflows thespian's send queue (it turns send-only near 950 queued and
    drops sends, exit notices included), so the core keeps a window of outstanding requests; a
    child asked late is not killed for the queue ahead of it (the stop that hung under load killed
    881 of 1000 well-behaved children that had never been asked).
    """
    from ouroactors.supervision.termination import STOP_WINDOW

    began = time.monotonic()
    world = simple(shutdown=1000)
    for _ in range(2000):
        world.admin("start_child")
    assert len(world.spawns()) == 2000
    world.clear()
    world.hold_stops = True
    world.shutdown()
    first = [c for c in world.log if isinstance(c, RequestStop)]
    assert len(first) == STOP_WINDOW  # a window, newest first
    assert first[0].key == "job#2000"
    timers = [c for c in world.log if isinstance(c, SetTimer)]
    assert len(timers) == 1 and timers[0].seconds == 1.0
    answered = 0
    while answered < 1500:  # answer 1500 stops; each answer lets the next request out
        stops = [c for c in world.log if isinstance(c, RequestStop)]
        stop = stops[answered]
        world.feed(ChildDown(stop.key, stop.incarnation, reasons.shutdown()))
        answered += 1
    stops = [c for c in world.log if isinstance(c, RequestStop)]
    assert len(stops) == 1500 + STOP_WINDOW and stops[-1].key == f"job#{500 - STOP_WINDOW + 1}"
    assert len([c for c in world.log if isinstance(c, SetTimer)]) == 1  # answers re-arm nothing
    assert world.exited is None
    world.advance(1.0)  # the window's shutdown time is over: those are killed, the next window asked
    assert len(world.killed()) == STOP_WINDOW
    stops = [c for c in world.log if isinstance(c, RequestStop)]
    assert len(stops) == 1500 + 2 * STOP_WINDOW and world.exited is None
    rounds = 1
    while world.exited is None and rounds < 2000 // STOP_WINDOW:
        world.advance(1.0)
        rounds += 1
    assert rounds == 500 // STOP_WINDOW  # each window had its own full shutdown time
    assert len(world.killed()) == 500  # every one asked politely first, killed only after its own time
    stops = [c for c in world.log if isinstance(c, RequestStop)]
    assert len(stops) == 2000 and stops[-1].key == "job#1"
    assert world.exited == reasons.shutdown()
    assert len(world.events("terminated")) == 2000
    assert len(world.events("shutdown_timeout")) == 500
    assert not [c for c in world.log if isinstance(c, Spawn)]
    assert time.monotonic() - began < 10


def test_a_stubborn_child_and_a_dropped_kill_notice_still_end_the_stop_by_deadlines() -> None:
    """No wait without a deadline: shutdown time, kill, grace, then taken as killed; the rest go on."""
    from ouroactors.supervision.termination import KILL_GRACE_S

    world = simple(shutdown=500)
    for _ in range(3):
        world.admin("start_child")
    world.clear()
    world.stubborn = {"job#2"}
    world.drop_kills = True
    world.shutdown()
    assert world.stopped() == ["job#3", "job#2", "job#1"] and world.exited is None
    world.advance(0.5)
    assert world.killed() == ["job#2"] and world.exited is None
    world.advance(KILL_GRACE_S)
    assert world.exited == reasons.shutdown()
    reasons_by_child = {e.child: e.fields["reason"] for e in world.events("terminated")}
    assert reasons_by_child["job#2"] == {"kind": "killed", "info": "no exit notice after kill"}
    assert reasons_by_child["job#1"] == reasons_by_child["job#3"] == {"kind": "shutdown"}


def test_kill_whose_exit_notice_never_comes_is_taken_as_killed_after_a_grace() -> None:
    from ouroactors.supervision.termination import KILL_GRACE_S

    world = booted(wk("a", shutdown=100))
    world.stubborn = {"a"}
    world.clear()
    world.drop_kills = True  # thespian dropped the exit notice
    world.shutdown()
    world.advance(0.1)
    assert world.killed() == ["a"] and world.exited is None
    world.advance(KILL_GRACE_S)
    assert world.exited == reasons.shutdown()
    [terminated] = world.events("terminated")
    assert terminated.fields["reason"] == {"kind": "killed", "info": "no exit notice after kill"}


def test_simple_escalation_terminates_all_children_at_once() -> None:
    world = booted(wk("job"), strategy="simple_one_for_one", intensity=0)
    for _ in range(3):
        world.admin("start_child")
    world.hold_stops = True
    world.crash("job#2")
    stops = [c.key for c in world.log if isinstance(c, RequestStop)]
    assert stops == ["job#3", "job#1"]
