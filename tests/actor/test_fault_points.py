"""Fault plans armed in real actor processes: raise → crash, exit → killed, delay."""

from __future__ import annotations

import pytest

from ouroactors import ActorCrashed, supervisor, worker
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule

from .helpers import ECHO

pytestmark = pytest.mark.multiproc


def test_raise_at_a_point_crashes_the_worker(actor_system):
    actor_system.start_tree(supervisor("root", [worker("e", ECHO)]))
    assert actor_system.ask("root/e", "point") == "passed"
    actor_system.arm_faults("root/e", FaultPlan((FaultRule("example.echo.*", FaultAction.RAISE),)))
    mark = actor_system.mark()
    with pytest.raises(ActorCrashed):
        actor_system.ask("root/e", "point")
    exited = actor_system.wait_for("exited", "root/e", after=mark)
    assert exited.reason["exc_type"] == "ouroactors.core.faults.FaultInjected"
    actor_system.wait_for("started", "root/e", after=mark)
    assert actor_system.ask("root/e", "point") == "passed"  # the new process has no plan armed


def test_exit_at_a_point_is_a_death_without_report(actor_system):
    actor_system.start_tree(supervisor("root", [worker("e", ECHO)]))
    actor_system.arm_faults("root/e", FaultPlan((FaultRule("example.echo.message", FaultAction.EXIT),)))
    mark = actor_system.mark()
    actor_system.tell("root/e", "point")
    exited = actor_system.wait_for("exited", "root/e", after=mark)
    assert exited.reason == {"kind": "killed"}  # os._exit: no on_stop, no report
    actor_system.wait_for("started", "root/e", after=mark)


def test_disarm(actor_system):
    actor_system.start_tree(supervisor("root", [worker("e", ECHO)]))
    actor_system.arm_faults("root/e", FaultPlan((FaultRule("example.echo.message", FaultAction.RAISE),)))
    actor_system.arm_faults("root/e", None)
    assert actor_system.ask("root/e", "point") == "passed"
