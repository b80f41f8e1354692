"""SupervisorCore: strategies, restart types, intensity and the try-again loop (otp.md 1.2, 1.6-1.8)."""

from __future__ import annotations

import pytest

from ouroactors.core.errors import AlreadyPresent, ChildRestarting, StartFailed
from ouroactors.supervision import reasons
from ouroactors.supervision.reasons import ExitKind, ExitReason
from ouroactors.supervision.signals import ExitSelf, RequestStop, SendSelf, TryAgain

from .sim import booted, wk

CRASH = reasons.crash_of("RuntimeError", "bang")

# -- one_for_one -----------------------------------------------------------------------------------


def test_one_for_one_restarts_only_the_failed_child() -> None:
    world = booted(wk("a"), wk("b"), wk("c"))
    world.crash("b")
    assert world.touched() == ["b"]
    assert world.kinds() == ["exited", "restarting", "started"]
    assert world.status() == {"a": "running", "b": "running", "c": "running"}


def test_a_restart_is_a_new_incarnation_with_a_larger_generation() -> None:
    world = booted(wk("a"), wk("b"))
    before = world.core.children.get("b")
    assert before is not None
    old_inc, old_gen = before.incarnation, before.generation
    world.crash("b")
    [spawn] = world.spawns()
    assert spawn.incarnation > old_inc
    assert old_gen is not None and spawn.generation > old_gen
    assert world.core.children.get("b").restarts == 1  # type: ignore[union-attr]


def test_restart_keeps_the_start_order() -> None:
    world = booted(wk("a"), wk("b"), wk("c"), intensity=5)
    world.crash("a")
    world.crash("b")
    assert [row.id for row in world.which()] == ["c", "b", "a"]


# -- one_for_all -----------------------------------------------------------------------------------


def test_one_for_all_terminates_the_others_newest_first_then_starts_all_in_order() -> None:
    world = booted(wk("a"), wk("b"), wk("c"), wk("d"), strategy="one_for_all")
    world.crash("b")
    assert world.touched() == ["d", "c", "a", "a", "b", "c", "d"]
    stops = [c for c in world.log if isinstance(c, RequestStop)]
    assert [s.key for s in stops] == ["d", "c", "a"] and all(s.reason == reasons.SHUTDOWN for s in stops)
    assert world.status() == dict.fromkeys("abcd", "running")
    assert [e.child for e in world.events("terminated")] == ["d", "c", "a"]
    assert world.core.window.recent == 1


def test_one_for_all_drops_temporary_siblings_and_never_restarts_them() -> None:
    world = booted(wk("a"), wk("t", restart="temporary"), wk("c"), strategy="one_for_all", intensity=5)
    world.crash("a")
    assert world.touched() == ["c", "t", "a", "c"]
    assert "t" not in world.status()
    world.crash("c")
    assert "t" not in world.spawned()


def test_one_for_all_starts_children_stopped_with_terminate_child_again() -> None:
    world = booted(wk("a"), wk("b"), wk("c"), strategy="one_for_all", intensity=5)
    assert world.admin("terminate_child", "c") == "ok"
    world.clear()
    world.crash("a")
    assert world.touched() == ["b", "a", "b", "c"]  # c was not running: nothing to stop
    assert world.status()["c"] == "running"


def test_one_for_all_starts_a_transient_child_that_had_exited_normally() -> None:
    world = booted(wk("a"), wk("t", restart="transient"), strategy="one_for_all", intensity=5)
    world.exit("t", reasons.normal())
    assert world.status()["t"] == "undefined"
    world.clear()
    world.crash("a")
    assert world.spawned() == ["a", "t"]


def test_one_for_all_a_temporary_crash_restarts_nothing() -> None:
    world = booted(wk("a"), wk("t", restart="temporary"), wk("c"), strategy="one_for_all")
    world.crash("t")
    assert world.touched() == []
    assert list(world.status()) == ["a", "c"]


# -- rest_for_one ----------------------------------------------------------------------------------


def test_rest_for_one_restarts_the_failed_child_and_those_after_it() -> None:
    world = booted(wk("a"), wk("b"), wk("c"), wk("d"), strategy="rest_for_one")
    world.crash("b")
    assert world.touched() == ["d", "c", "b", "c", "d"]
    assert "a" not in world.touched()


def test_rest_for_one_last_child_restarts_alone() -> None:
    world = booted(wk("a"), wk("b"), wk("c"), strategy="rest_for_one")
    world.crash("c")
    assert world.touched() == ["c"]


def test_rest_for_one_drops_temporary_later_siblings() -> None:
    world = booted(wk("a"), wk("b"), wk("t", restart="temporary"), wk("d"), strategy="rest_for_one")
    world.crash("b")
    assert world.touched() == ["d", "t", "b", "d"]
    assert list(world.status()) == ["a", "b", "d"]


def test_rest_for_one_restarts_a_later_sibling_stopped_by_terminate_child_but_not_an_earlier_one() -> None:
    world = booted(wk("a"), wk("b"), wk("c"), strategy="rest_for_one", intensity=5)
    world.admin("terminate_child", "a")
    world.admin("terminate_child", "c")
    world.clear()
    world.crash("b")
    assert world.spawned() == ["b", "c"]
    assert world.status() == {"a": "undefined", "b": "running", "c": "running"}


# -- restart types ---------------------------------------------------------------------------------


@pytest.mark.parametrize("reason", [reasons.normal(), reasons.shutdown(), reasons.shutdown("x"), CRASH,
                                    reasons.killed()])
def test_permanent_is_restarted_whatever_the_reason(reason: ExitReason) -> None:
    world = booted(wk("a"))
    world.exit("a", reason)
    assert world.spawned() == ["a"]
    assert world.events("exited")[0].fields["reason"] == reason.to_json()


@pytest.mark.parametrize("reason", [reasons.normal(), reasons.shutdown(), reasons.shutdown("done")])
def test_transient_normal_exit_keeps_the_spec_not_running(reason: ExitReason) -> None:
    world = booted(wk("a"), wk("t", restart="transient"))
    world.exit("t", reason)
    assert world.touched() == []
    [row_t, row_a] = world.which()
    assert (row_t.id, row_t.status, row_t.pid) == ("t", "undefined", None)
    assert row_t.last_exit == str(reason)
    assert row_a.status == "running"
    assert world.kinds() == ["exited"]
    assert world.core.window.recent == 0  # no restart, nothing counted


@pytest.mark.parametrize("reason", [CRASH, reasons.killed()])
def test_transient_abnormal_exit_is_restarted(reason: ExitReason) -> None:
    world = booted(wk("t", restart="transient"))
    world.exit("t", reason)
    assert world.spawned() == ["t"]


@pytest.mark.parametrize("reason", [reasons.normal(), reasons.shutdown(), reasons.shutdown("x"), CRASH,
                                    reasons.killed()])
def test_temporary_spec_is_deleted_whatever_the_reason(reason: ExitReason) -> None:
    world = booted(wk("a"), wk("t", restart="temporary"))
    world.exit("t", reason)
    assert world.touched() == []
    assert [row.id for row in world.which()] == ["a"]
    assert world.admin("count_children")["specs"] == 1


# -- intensity -------------------------------------------------------------------------------------


def test_escalation_after_intensity_plus_one_restarts_in_the_window() -> None:
    world = booted(wk("a"), wk("b"), wk("c"), wk("d"), intensity=2, period=5)
    world.crash("b")
    world.crash("b")
    assert world.exited is None
    world.clear()
    world.crash("b")
    assert world.spawned() == []
    assert world.stopped() == ["d", "c", "a"]  # the remaining children, reverse start order
    [exit_self] = [c for c in world.log if isinstance(c, ExitSelf)]
    assert exit_self.reason.kind is ExitKind.SHUTDOWN
    assert exit_self.reason.info == "reached_max_restart_intensity"
    [escalated] = world.events("escalated")
    assert escalated.child == "b"
    assert escalated.fields["intensity"] == 2 and escalated.fields["period"] == 5
    assert escalated.fields["reason"] == "reached_max_restart_intensity"
    assert world.kinds() == ["exited", "escalated", "terminated", "terminated", "terminated", "supervisor_exit"]
    assert world.status() == dict.fromkeys("abcd", "undefined")


def test_intensity_zero_escalates_on_the_first_restart() -> None:
    world = booted(wk("a"), wk("b"), intensity=0)
    world.crash("a")
    assert world.spawned() == []
    assert world.stopped() == ["b"]
    assert world.exited is not None and world.exited.kind is ExitKind.SHUTDOWN


def test_intensity_zero_a_transient_normal_exit_does_not_escalate() -> None:
    world = booted(wk("a", restart="transient"), wk("b", restart="temporary"), intensity=0)
    world.exit("a", reasons.normal())
    world.crash("b")
    assert world.exited is None


@pytest.mark.parametrize("strategy", ["one_for_all", "rest_for_one"])
def test_a_group_restart_counts_once(strategy: str) -> None:
    world = booted(wk("a"), wk("b"), wk("c"), wk("d"), strategy=strategy, intensity=1)
    world.crash("a")  # restarts 4 children; one restart against intensity
    assert world.exited is None
    assert world.core.window.recent == 1
    world.clear()
    world.crash("c")
    assert world.exited is not None
    assert world.stopped() == ["d", "b", "a"]


def test_restarts_spread_out_beyond_the_period_never_escalate() -> None:
    world = booted(wk("a"), wk("b"), intensity=1, period=5)
    for _ in range(30):
        world.crash("a")
        world.advance(5.01)
        world.crash("b")
        world.advance(5.01)
    assert world.exited is None
    assert world.spawned().count("a") == 30
    assert world.core.window.recent == 1


def test_a_restart_exactly_period_seconds_later_still_counts() -> None:
    world = booted(wk("a"), intensity=1, period=5)
    world.crash("a")
    world.advance(5)
    world.crash("a")
    assert world.exited is not None


def test_restarts_inside_the_period_escalate_after_time_passes_within_it() -> None:
    world = booted(wk("a"), intensity=2, period=10)
    world.crash("a")
    world.advance(4)
    world.crash("a")
    world.advance(4)
    world.crash("a")
    assert world.exited is not None


def test_manual_restart_child_does_not_count_against_intensity() -> None:
    world = booted(wk("a"), intensity=0)
    for _ in range(5):
        assert world.admin("terminate_child", "a") == "ok"
        world.admin("restart_child", "a")
    assert world.exited is None
    assert world.core.window.recent == 0


def test_escalation_under_one_for_all_terminates_every_running_child() -> None:
    world = booted(wk("a"), wk("b"), wk("c"), strategy="one_for_all", intensity=0)
    world.crash("b")
    assert world.stopped() == ["c", "a"]
    assert world.spawned() == []
    assert world.exited is not None


# -- failed restarts: the try-again loop -----------------------------------------------------------


def test_failed_restart_marks_restarting_and_sends_itself_try_again() -> None:
    world = booted(wk("a"), wk("b"), intensity=10)
    world.hold_self = True
    world.fail_starts = {"a": 1}
    world.crash("a")
    assert world.status()["a"] == "restarting"
    sends = [c for c in world.log if isinstance(c, SendSelf)]
    assert len(sends) == 1 and isinstance(sends[0].message, TryAgain) and sends[0].message.key == "a"
    assert world.kinds() == ["exited", "restarting", "start_failed", "restart_failed"]
    assert world.events("restart_failed")[0].fields["reason"]["message"] == "boom"
    rows = {row.id: row.status for row in world.which()}
    assert rows == {"a": "restarting", "b": "running"}
    assert world.admin("count_children")["active"] == 1
    world.release()
    assert world.status()["a"] == "running"
    assert world.core.window.recent == 2  # the retry counted too


def test_a_child_that_never_starts_eventually_escalates() -> None:
    world = booted(wk("a"), wk("b"), intensity=3)
    world.fail_starts = {"a": 10**6}
    world.crash("a")
    assert world.spawned() == ["a", "a", "a"]  # 3 restarts allowed, the 4th is refused
    assert len(world.events("restart_failed")) == 3
    assert len(world.events("escalated")) == 1
    assert world.stopped() == ["b"]
    assert world.exited is not None and world.exited.info == "reached_max_restart_intensity"
    assert world.status()["a"] == "undefined"


def test_one_for_all_a_failing_retry_terminates_all_again() -> None:
    world = booted(wk("a"), wk("b"), wk("c"), strategy="one_for_all", intensity=10)
    world.fail_starts = {"b": 1}
    world.crash("a")
    # first pass: stop c, b; start a, b (fails; c stays unstarted)
    # retry of b: stop a (just restarted), start a, b, c
    assert world.touched() == ["c", "b", "a", "b", "a", "a", "b", "c"]
    assert world.status() == dict.fromkeys("abc", "running")
    assert world.core.window.recent == 2


def test_one_for_all_children_after_the_failed_one_stay_unstarted_until_the_retry() -> None:
    world = booted(wk("a"), wk("b"), wk("c"), strategy="one_for_all", intensity=10)
    world.hold_self = True
    world.fail_starts = {"b": 1}
    world.crash("a")
    assert world.status() == {"a": "running", "b": "restarting", "c": "undefined"}


def test_rest_for_one_a_failing_retry_leaves_earlier_siblings_untouched() -> None:
    world = booted(wk("a"), wk("b"), wk("c"), wk("d"), strategy="rest_for_one", intensity=10)
    world.fail_starts = {"c": 1}
    world.crash("b")
    assert world.touched() == ["d", "c", "b", "c", "c", "d"]
    assert "a" not in world.touched()
    assert world.status() == dict.fromkeys("abcd", "running")


def test_terminate_child_on_a_restarting_child_ends_the_retry_loop() -> None:
    world = booted(wk("a"), wk("b"), intensity=10)
    world.hold_self = True
    world.fail_starts = {"a": 1}
    world.crash("a")
    assert world.admin("terminate_child", "a") == "ok"
    assert world.status()["a"] == "undefined"
    world.clear()
    world.release()  # the TryAgain that was already queued
    assert world.spawned() == []
    assert world.status()["a"] == "undefined"


def test_restart_and_delete_of_a_restarting_child_are_refused_and_start_child_is_already_present() -> None:
    world = booted(wk("a"), intensity=10)
    world.hold_self = True
    world.fail_starts = {"a": 1}
    world.crash("a")
    assert isinstance(world.admin("restart_child", "a"), ChildRestarting)
    assert isinstance(world.admin("delete_child", "a"), ChildRestarting)
    assert isinstance(world.admin("start_child", spec=wk("a")), AlreadyPresent)
    assert world.status()["a"] == "restarting"


def test_a_stale_try_again_of_an_earlier_loop_is_ignored() -> None:
    world = booted(wk("a"), intensity=10)
    world.hold_self = True
    world.fail_starts = {"a": 2}
    world.crash("a")  # loop 1: TryAgain(tag 1) held
    world.admin("terminate_child", "a")
    # the first manual restart fails too (fail_starts); the spec stays; the second one works
    assert isinstance(world.admin("restart_child", "a"), StartFailed)
    assert world.admin("restart_child", "a").status == "running"
    assert world.status()["a"] == "running"
    world.fail_starts = {"a": 1}
    world.crash("a")  # loop 2: TryAgain(tag 2) held
    old, new = world.held
    assert isinstance(old, TryAgain) and isinstance(new, TryAgain) and old.tag < new.tag
    world.held = [old]
    world.clear()
    world.release()
    assert world.spawned() == []  # the stale tag does nothing
    assert world.status()["a"] == "restarting"
    world.held = [new]
    world.release()
    assert world.spawned() == ["a"]
    assert world.status()["a"] == "running"


def test_a_retry_with_other_inputs_queued_first_serves_them_in_between() -> None:
    # OTP-9549: the retry is a message, so an admin request queued before it is served first.
    world = booted(wk("a"), wk("b"), intensity=10)
    world.hold_self = True
    world.fail_starts = {"a": 1}
    world.crash("a")
    counts = world.admin("count_children")
    assert counts["active"] == 1
    world.release()
    assert world.admin("count_children")["active"] == 2


def test_one_for_all_a_sibling_that_never_starts_escalates_after_the_retries() -> None:
    world = booted(wk("a"), wk("b"), wk("c"), strategy="one_for_all", intensity=2)
    world.fail_starts = {"b": 10**6}
    world.crash("a")
    # restart 1: stop c, b; start a, b (fails). retry 2: stop a; start a, b (fails).
    # retry 3 is refused: stop what runs (a), newest first, and exit.
    assert world.touched() == ["c", "b", "a", "b", "a", "a", "b", "a"]
    assert world.exited is not None and world.exited.info == "reached_max_restart_intensity"
    assert world.status() == dict.fromkeys("abc", "undefined")
    assert [e.child for e in world.events("escalated")] == ["b"]


def test_rest_for_one_a_later_sibling_that_never_starts_escalates_without_touching_earlier_ones() -> None:
    world = booted(wk("a"), wk("b"), wk("c"), strategy="rest_for_one", intensity=2)
    world.fail_starts = {"c": 10**6}
    world.crash("b")
    assert world.touched() == ["c", "b", "c", "c", "b", "a"]  # retries touch only c; escalation stops all
    assert world.exited is not None


def test_every_child_a_group_restart_starts_again_counts_a_restart() -> None:
    world = booted(wk("a"), wk("b"), wk("c"), strategy="rest_for_one")
    world.crash("b")
    counts = {key: world.core.children.get(key).restarts for key in "abc"}  # type: ignore[union-attr]
    assert counts == {"a": 0, "b": 1, "c": 1}
