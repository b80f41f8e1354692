"""SupervisorCore: boot, shutdown, deferred inputs and stale inputs (otp.md 1.5, 1.6)."""

from __future__ import annotations

import pytest

from ouroactors.core.errors import NoSuchActor
from ouroactors.supervision import reasons
from ouroactors.supervision.reasons import ExitKind
from ouroactors.supervision.signals import (
    AdminRequest,
    Boot,
    BootDone,
    ChildDown,
    ChildStartFailed,
    ChildUp,
    ExitSelf,
    GenerationAnnounced,
    Kill,
    Reply,
    RequestStop,
    SetTimer,
    Spawn,
    TimerFired,
    TryAgain,
)

from .sim import World, booted, tree, wk

# -- boot -------------------------------------------------------------------------------------------


def test_boot_starts_children_in_order_and_reports_done() -> None:
    world = World(tree(wk("a"), wk("b"), wk("c"))).start()
    assert world.spawned() == ["a", "b", "c"]
    assert world.boot is None
    assert world.status() == {"a": "running", "b": "running", "c": "running"}
    assert world.kinds() == ["started", "started", "started", "supervisor_started"]
    assert [e.child for e in world.events("started")] == ["a", "b", "c"]
    assert world.exited is None


def test_boot_is_synchronous_each_child_waits_for_the_previous_one() -> None:
    world = World(tree(wk("a"), wk("b"), wk("c")), hold_starts={"a", "b", "c"})
    world.start()
    assert world.spawned() == ["a"]
    world.answer_start("a")
    assert world.spawned() == ["a", "b"]
    world.answer_start("b")
    assert world.spawned() == ["a", "b", "c"]
    assert world.boot == "pending"
    world.answer_start("c")
    assert world.boot is None


def test_boot_of_an_empty_supervisor() -> None:
    world = World(tree()).start()
    assert world.boot is None
    assert world.spawned() == []


def test_boot_passes_args_and_kwargs_to_spawn() -> None:
    world = World(tree(wk("a", args=(1, "x"), kwargs={"k": 2}))).start()
    [spawn] = world.spawns()
    assert (spawn.args, spawn.kwargs) == ((1, "x"), {"k": 2})
    assert spawn.spec.id == "a"


def test_start_failure_stops_boot_and_terminates_started_children_in_reverse_order() -> None:
    world = World(tree(wk("a"), wk("b"), wk("c"), wk("d"), wk("e")), fail_starts={"d": 1}).start()
    assert world.spawned() == ["a", "b", "c", "d"]  # e is never spawned
    assert world.stopped() == ["c", "b", "a"]
    failure = world.boot
    assert failure is not None and failure.kind is ExitKind.SHUTDOWN
    assert failure.info is not None and failure.info.startswith("failed_to_start_child d")
    assert "boom" in failure.info  # the child's own reason is carried along
    assert world.exited is None  # BootDone carries the failure; the shell ends the process
    assert world.kinds()[-1] == "supervisor_start_failed"
    [start_failed] = world.events("start_failed")
    assert start_failed.child == "d"
    assert start_failed.fields["reason"]["message"] == "boom"
    assert [e.child for e in world.events("terminated")] == ["c", "b", "a"]


def test_start_failure_of_the_first_child_stops_nothing() -> None:
    world = World(tree(wk("a"), wk("b")), fail_starts={"a": 1}).start()
    assert world.spawned() == ["a"]
    assert world.stopped() == []
    assert world.boot is not None and "failed_to_start_child a" in (world.boot.info or "")


def test_a_supervisor_whose_boot_failed_refuses_admin_requests_and_ignores_exits() -> None:
    world = World(tree(wk("a"), wk("b")), fail_starts={"b": 1}).start()
    world.clear()
    result = world.admin("which_children")
    assert isinstance(result, NoSuchActor)
    assert world.feed(ChildDown("a", 1, reasons.crash_of("E", "late"))) == []
    assert world.spawned() == []


def test_boot_failure_waits_for_each_started_child_to_go_down() -> None:
    world = World(tree(wk("a"), wk("b"), wk("c")), fail_starts={"c": 1}, hold_stops=True).start()
    assert [c for c in world.log if isinstance(c, RequestStop)] == [RequestStop("b", 2, reasons.SHUTDOWN)]
    world.feed(ChildDown("b", 2, reasons.shutdown()))
    assert world.stopped() == ["b", "a"]
    assert world.boot == "pending"
    world.feed(ChildDown("a", 1, reasons.shutdown()))
    assert world.boot is not None


def test_a_crash_during_boot_is_handled_after_boot() -> None:
    world = World(tree(wk("a"), wk("b")), hold_starts={"b"}).start()
    world.crash("a")  # b is still starting: the exit waits in the mailbox
    assert world.spawned() == ["a", "b"]
    world.answer_start("b")
    assert world.boot is None
    assert world.spawned() == ["a", "b", "a"]
    kinds = world.kinds()
    assert kinds.index("supervisor_started") < kinds.index("exited")


# -- shutdown ---------------------------------------------------------------------------------------


def test_shutdown_terminates_in_reverse_start_order_one_at_a_time() -> None:
    world = booted(wk("a"), wk("b"), wk("c"))
    world.hold_stops = True
    world.shutdown()
    assert world.stopped() == ["c"]  # sequential: b is not asked before c is gone
    world.feed(ChildDown("c", 3, reasons.shutdown()))
    assert world.stopped() == ["c", "b"]
    world.feed(ChildDown("b", 2, reasons.shutdown()))
    assert world.stopped() == ["c", "b", "a"]
    assert world.exited is None
    world.feed(ChildDown("a", 1, reasons.shutdown()))
    assert world.exited == reasons.shutdown()
    assert world.kinds() == [
        "shutdown_requested", "terminated", "terminated", "terminated", "supervisor_exit"
    ]


def test_shutdown_asks_politely_with_reason_shutdown_and_exits_with_the_requested_reason() -> None:
    world = booted(wk("a"), wk("b"))
    world.shutdown(reasons.shutdown("operator"))
    stops = [c for c in world.log if isinstance(c, RequestStop)]
    assert [s.reason for s in stops] == [reasons.SHUTDOWN, reasons.SHUTDOWN]
    [exit_self] = [c for c in world.log if isinstance(c, ExitSelf)]
    assert exit_self.reason == reasons.shutdown("operator")
    assert world.events("supervisor_exit")[0].fields["reason"] == {"kind": "shutdown", "info": "operator"}
    assert world.events("shutdown_requested")[0].fields["reason"]["info"] == "operator"
    assert world.status() == {"a": "undefined", "b": "undefined"}


def test_shutdown_with_a_timeout_kills_a_stubborn_child_when_it_expires() -> None:
    world = booted(wk("a", shutdown=1000), wk("b", shutdown=2000))
    world.stubborn = {"b"}
    world.shutdown()
    assert world.stopped() == ["b"]
    [timer] = [c for c in world.log if isinstance(c, SetTimer)]
    assert timer.seconds == 2.0
    world.advance(1.999)
    assert world.killed() == []
    world.advance(0.001)
    assert world.killed() == ["b"]
    assert world.stopped() == ["b", "b", "a"]
    assert world.exited == reasons.shutdown()
    [timeout] = world.events("shutdown_timeout")
    assert timeout.child == "b"
    terminated = {e.child: e.fields for e in world.events("terminated")}
    assert terminated["b"]["reason"] == {"kind": "killed"}
    assert terminated["b"]["shutdown_error"] is True  # OTP: killed after the timeout is reported
    assert terminated["a"]["shutdown_error"] is False


def test_a_child_that_stops_in_time_is_not_killed_and_the_late_timer_is_ignored() -> None:
    world = booted(wk("a", shutdown=1000))
    world.shutdown()
    assert world.exited == reasons.shutdown()
    assert world.timers  # the timer is still armed in the shell
    world.clear()
    world.advance(5)
    assert world.log == []


def test_brutal_kill_kills_at_once_with_only_a_grace_timer_for_the_exit_notice() -> None:
    from ouroactors.supervision.termination import KILL_GRACE_S

    world = booted(wk("a", shutdown="brutal_kill"), wk("b", shutdown="brutal_kill"))
    world.shutdown()
    sent = [c for c in world.log if isinstance(c, RequestStop | Kill | SetTimer)]
    assert [type(c) for c in sent] == [Kill, SetTimer, Kill, SetTimer]  # no polite request, no wait
    assert all(c.seconds == KILL_GRACE_S for c in sent if isinstance(c, SetTimer))
    assert world.killed() == ["b", "a"]
    assert all(not e.fields["shutdown_error"] for e in world.events("terminated"))
    assert world.exited == reasons.shutdown()


@pytest.mark.parametrize("child", [wk("a", shutdown="infinity"), tree(wk("x")).model_copy(update={"id": "a"})])
def test_infinity_waits_forever_without_a_timer(child: object) -> None:
    world = booted(child)  # type: ignore[arg-type]
    world.stubborn = {"a"}
    world.shutdown()
    assert [c for c in world.log if isinstance(c, SetTimer)] == []
    world.advance(10**9)
    assert world.killed() == []
    assert world.exited is None
    world.feed(ChildDown("a", 1, reasons.shutdown()))
    assert world.exited == reasons.shutdown()


def test_a_supervisor_child_defaults_to_infinity() -> None:
    sub = tree(wk("x")).model_copy(update={"id": "sub"})
    assert sub.shutdown_ms is None
    world = booted(sub)
    world.shutdown()
    assert [c for c in world.log if isinstance(c, SetTimer)] == []


def test_shutdown_error_classification_is_otps() -> None:
    # permanent: only shutdown (timed) / killed (brutal) are expected; transient/temporary may also
    # end normal or shutdown(info). The brutal_kill children end on their own (deferred) with
    # `shutdown` just before the supervisor reaches them.
    world = booted(
        wk("b_shut", shutdown="brutal_kill"), wk("bt_shut", shutdown="brutal_kill", restart="transient"),
        wk("p_normal"), wk("p_info"), wk("t_normal", restart="transient"),
        wk("t_info", restart="temporary"), wk("p_crash"),
    )
    world.hold_stops = True
    answers = {
        "p_crash": reasons.crash_of("E", "m"), "t_info": reasons.shutdown("bye"), "t_normal": reasons.normal(),
        "p_info": reasons.shutdown("bye"), "p_normal": reasons.normal(),
    }

    def down(key: str, reason: reasons.ExitReason) -> None:
        world.feed(ChildDown(key, world.core.children.get(key).incarnation, reason))  # type: ignore[union-attr]

    world.shutdown()
    down("b_shut", reasons.shutdown())
    down("bt_shut", reasons.shutdown())
    for key, reason in answers.items():
        down(key, reason)
    assert world.exited is not None
    errors = {e.child: e.fields["shutdown_error"] for e in world.events("terminated")}
    assert errors == {
        "bt_shut": False, "b_shut": True, "p_crash": True, "t_info": False, "t_normal": False,
        "p_info": True, "p_normal": True,
    }
    assert world.stopped()[-2:] == ["bt_shut", "b_shut"]


def test_an_exit_that_happened_before_the_supervisor_asked_is_consumed_not_awaited() -> None:
    world = booted(wk("a"), wk("b"), wk("c"))
    world.hold_stops = True
    world.shutdown()  # asks c first
    world.crash("a")  # a dies on its own meanwhile: deferred
    world.feed(ChildDown("c", 3, reasons.shutdown()))
    world.feed(ChildDown("b", 2, reasons.shutdown()))
    assert world.exited == reasons.shutdown()  # no wait for a: its exit was already there
    assert world.spawned() == []  # and it is not restarted
    terminated = {e.child: e.fields for e in world.events("terminated")}
    assert terminated["a"]["reason"]["kind"] == "crash"
    assert terminated["a"]["shutdown_error"] is True
    assert world.events("exited") == []


def test_shutdown_ends_a_retry_loop() -> None:
    world = booted(wk("a"), wk("b"), intensity=10)
    world.hold_self = True
    world.fail_starts = {"a": 5}
    world.crash("a")
    assert world.status()["a"] == "restarting"
    world.shutdown()
    assert world.exited == reasons.shutdown()
    world.clear()
    world.release()  # the pending TryAgain
    assert world.spawned() == []


def test_after_exit_inputs_are_ignored_and_admin_requests_refused() -> None:
    world = booted(wk("a"))
    world.shutdown()
    world.clear()
    assert world.feed(ChildDown("a", 1, reasons.crash_of("E", "m"))) == []
    assert world.feed(TryAgain("a", 1)) == []
    assert world.feed(TimerFired(99)) == []
    assert world.feed(Boot()) == []
    assert isinstance(world.admin("count_children"), NoSuchActor)


def test_shutdown_requested_while_a_job_runs_waits_for_it() -> None:
    world = booted(wk("a"), wk("b"))
    world.hold_starts = {"a"}
    world.crash("a")  # restart of a is in progress
    world.shutdown()
    assert world.stopped() == []
    world.answer_start("a")
    assert world.stopped() == ["b", "a"]
    assert world.exited == reasons.shutdown()


# -- deferred inputs --------------------------------------------------------------------------------


def test_a_crash_while_another_child_is_starting_is_handled_after_the_start() -> None:
    world = booted(wk("a"), wk("b"))
    world.hold_starts = {"c"}
    assert world.admin("start_child", spec=wk("c")) == "pending"
    world.crash("a")
    assert world.spawned() == ["c"]  # a's restart waits for c's start to finish
    world.answer_start("c")
    assert world.spawned() == ["c", "a"]
    replies = [i for i, c in enumerate(world.log) if isinstance(c, Reply)]
    spawn_a = [i for i, c in enumerate(world.log) if isinstance(c, Spawn) and c.key == "a"]
    assert replies[0] < spawn_a[0]


def test_deferred_inputs_are_handled_in_arrival_order() -> None:
    world = booted(wk("a"), wk("b"), wk("c"), intensity=10)
    world.hold_starts = {"x"}
    world.admin("start_child", spec=wk("x"))
    world.crash("c")
    world.crash("a")
    token = 1000
    world.feed(AdminRequest(token, "which_children"))
    world.crash("b")
    world.answer_start("x")
    assert world.spawned() == ["x", "c", "a", "b"]
    which = world.reply(token)
    status = {row.id: row.status for row in which}
    assert status == {"x": "running", "c": "running", "a": "running", "b": "running"}
    # which_children was answered after a was restarted and before b's crash was handled:
    # it shows a's new incarnation (pid 1000 + incarnation) and b's first one.
    pids = {row.id: row.pid for row in which}
    assert pids["a"] == 1000 + 6  # x=4, c=5, a=6
    assert pids["b"] == 1000 + 2
    assert world.core.children.get("b").incarnation == 7  # type: ignore[union-attr]


def test_an_admin_request_during_boot_is_answered_after_boot() -> None:
    world = World(tree(wk("a")), hold_starts={"a"}).start()
    assert world.admin("count_children") == "pending"
    world.answer_start("a")
    replies = [c for c in world.log if isinstance(c, Reply)]
    assert replies[0].result["active"] == 1
    assert [type(c) for c in world.log if isinstance(c, Reply | BootDone)] == [BootDone, Reply]


# -- stale inputs ----------------------------------------------------------------------------------


def test_stale_inputs_are_ignored() -> None:
    world = booted(wk("a"), wk("b"))
    world.crash("a")  # a: incarnation 1 -> 3
    world.clear()
    assert world.feed(ChildDown("a", 1, reasons.crash_of("E", "late duplicate"))) == []
    assert world.feed(ChildDown("zzz", 1, reasons.crash_of("E", "unknown"))) == []
    assert world.feed(TimerFired(12345)) == []
    assert world.feed(ChildUp("a", 1, 7, "old")) == []
    assert world.feed(ChildUp("b", 99, 7, "never spawned")) == []
    assert world.feed(ChildStartFailed("a", 1, reasons.crash_of("E", "m"))) == []
    assert world.feed(TryAgain("a", 0)) == []
    assert world.feed(TryAgain("nobody", 1)) == []
    assert world.feed(GenerationAnnounced("a", 1, "old incarnation")) == []
    assert world.feed(GenerationAnnounced("nobody", 1)) == []
    assert world.status() == {"a": "running", "b": "running"}
    assert world.core.children.get("a").incarnation == 3  # type: ignore[union-attr]


def test_a_second_down_for_the_same_incarnation_is_ignored() -> None:
    world = booted(wk("a"), intensity=5)
    inc = world.running["a"]
    world.crash("a")
    assert world.spawned() == ["a"]
    world.clear()
    assert world.feed(ChildDown("a", inc, reasons.killed())) == []


def test_stale_inputs_arriving_during_a_job_are_ignored_afterwards() -> None:
    world = booted(wk("a"), wk("b"))
    world.hold_starts = {"a"}
    world.crash("a")
    world.feed(ChildUp("b", 42, 1, "x"))
    world.feed(TimerFired(77))
    world.feed(ChildDown("a", 1, reasons.killed()))
    world.answer_start("a")
    assert world.status() == {"a": "running", "b": "running"}
    assert world.spawned() == ["a"]
    assert world.stopped() == []


def test_core_is_busy_only_while_a_job_runs() -> None:
    world = booted(wk("a"))
    assert not world.core.busy
    world.hold_starts = {"a"}
    world.crash("a")
    assert world.core.busy
    world.answer_start("a")
    assert not world.core.busy


def test_kill_after_timeout_in_a_group_restart_is_awaited_then_the_group_restarts() -> None:
    world = booted(wk("a"), wk("b", shutdown=500), strategy="one_for_all", intensity=5)
    world.stubborn = {"b"}
    world.crash("a")
    assert world.stopped() == ["b"]
    assert world.spawned() == []
    world.advance(0.5)
    assert world.killed() == ["b"]
    assert world.spawned() == ["a", "b"]
    assert world.exited is None
