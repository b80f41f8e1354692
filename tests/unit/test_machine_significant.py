"""SupervisorCore: significant children and auto_shutdown (otp.md 1.9, EEP-56)."""

from __future__ import annotations

import pytest

from ouroactors.supervision import reasons
from ouroactors.supervision.decisions import AfterExit, after_exit
from ouroactors.supervision.reasons import ExitKind, ExitReason
from ouroactors.supervision.specs import ChildSpec, RestartType

from .sim import booted, wk

CRASH = reasons.crash_of("RuntimeError", "bang")


def sig(id: str, restart: str = "transient") -> ChildSpec:
    return wk(id, restart=restart, significant=True)


@pytest.mark.parametrize("reason", [reasons.normal(), reasons.shutdown(), reasons.shutdown("done")])
@pytest.mark.parametrize("restart", ["transient", "temporary"])
def test_any_significant_shuts_down_when_a_significant_child_ends_by_itself(
    reason: ExitReason, restart: str
) -> None:
    world = booted(wk("a"), sig("s", restart), wk("c"), auto_shutdown="any_significant")
    world.exit("s", reason)
    assert world.stopped() == ["c", "a"]
    assert world.spawned() == []
    assert world.exited == reasons.shutdown("auto_shutdown")
    assert world.exited is not None and world.exited.kind is ExitKind.SHUTDOWN
    [auto] = world.events("auto_shutdown")
    assert auto.child == "s" and auto.fields["policy"] == "any_significant"
    assert world.kinds() == ["exited", "auto_shutdown", "terminated", "terminated", "supervisor_exit"]


def test_any_significant_temporary_crash_shuts_down_too() -> None:
    world = booted(wk("a"), sig("s", "temporary"), auto_shutdown="any_significant")
    world.crash("s")
    assert world.exited == reasons.shutdown("auto_shutdown")


@pytest.mark.parametrize("policy", ["any_significant", "all_significant"])
def test_a_significant_transient_child_that_crashes_is_restarted_not_auto_shutdown(policy: str) -> None:
    world = booted(wk("a"), sig("s"), auto_shutdown=policy)
    world.crash("s")
    assert world.spawned() == ["s"]
    assert world.exited is None
    assert world.events("auto_shutdown") == []


@pytest.mark.parametrize("policy", ["any_significant", "all_significant"])
def test_a_non_significant_exit_never_auto_shuts_down(policy: str) -> None:
    world = booted(wk("t", restart="temporary"), wk("u", restart="transient"), sig("s"), auto_shutdown=policy)
    world.exit("t", reasons.normal())
    world.exit("u", reasons.normal())
    assert world.exited is None


def test_all_significant_waits_for_the_last_significant_child() -> None:
    world = booted(sig("s1"), wk("a"), sig("s2", "temporary"), sig("s3"), auto_shutdown="all_significant")
    world.exit("s1", reasons.normal())
    world.exit("s3", reasons.shutdown())
    assert world.exited is None
    world.exit("s2", reasons.normal())
    assert world.exited == reasons.shutdown("auto_shutdown")
    assert world.stopped() == ["a"]
    assert world.events("auto_shutdown")[0].fields["policy"] == "all_significant"


@pytest.mark.parametrize("policy", ["any_significant", "all_significant"])
def test_terminate_child_of_a_significant_child_does_not_auto_shut_down(policy: str) -> None:
    world = booted(wk("a"), sig("s"), auto_shutdown=policy)
    assert world.admin("terminate_child", "s") == "ok"
    assert world.exited is None
    assert world.events("auto_shutdown") == []


def test_all_significant_after_terminate_child_the_next_significant_exit_shuts_down() -> None:
    world = booted(sig("s1"), sig("s2"), wk("a"), auto_shutdown="all_significant")
    world.admin("terminate_child", "s1")
    world.exit("s2", reasons.normal())
    assert world.exited == reasons.shutdown("auto_shutdown")


@pytest.mark.parametrize("strategy", ["one_for_all", "rest_for_one"])
@pytest.mark.parametrize("policy", ["any_significant", "all_significant"])
def test_a_significant_bystander_of_a_group_restart_does_not_auto_shut_down(strategy: str, policy: str) -> None:
    world = booted(wk("a"), sig("s", "temporary"), sig("s2"), strategy=strategy, auto_shutdown=policy, intensity=5)
    world.crash("a")
    assert world.exited is None
    assert world.events("auto_shutdown") == []
    assert list(world.status()) == ["a", "s2"]  # the temporary one was dropped
    assert world.status()["s2"] == "running"


def test_all_significant_a_restarting_significant_child_still_counts() -> None:
    # OTP's children_any only skips children whose pid is undefined: {restarting, _} is present.
    world = booted(sig("s1"), sig("s2"), auto_shutdown="all_significant", intensity=10)
    world.hold_self = True
    world.fail_starts = {"s1": 1}
    world.crash("s1")
    assert world.status()["s1"] == "restarting"
    world.exit("s2", reasons.normal())
    assert world.exited is None
    world.release()
    assert world.status() == {"s1": "running", "s2": "undefined"}


def test_auto_shutdown_exit_is_a_normal_exit_so_it_cascades_to_a_transient_parent_entry() -> None:
    world = booted(sig("s", "temporary"), auto_shutdown="any_significant")
    world.exit("s", reasons.normal())
    assert world.exited is not None
    assert after_exit(RestartType.TRANSIENT, world.exited) is AfterExit.KEEP
    assert after_exit(RestartType.PERMANENT, world.exited) is AfterExit.RESTART


def test_auto_shutdown_never_ignores_everything() -> None:
    world = booted(wk("t", restart="temporary"), wk("u", restart="transient"))
    world.exit("t", reasons.normal())
    world.exit("u", reasons.normal())
    assert world.exited is None
