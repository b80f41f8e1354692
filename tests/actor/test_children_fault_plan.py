"""A fault plan for the children a supervisor starts (``arm_faults(path, plan, children=True)``).

Chaos on a tree with a worker pool must reach the pool's dynamic children, which are started during the scenario
(after anything could be armed in them), and must not reach their restarts: a child the plan killed would be killed
again at every restart until its supervisor gave up, which says nothing about the system under test.
"""

from __future__ import annotations

import pytest

from ouroactors import supervisor, worker
from ouroactors.core.errors import BadRequest
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule

from .helpers import ECHO

pytestmark = pytest.mark.multiproc

KILL_AT_FIRST_MESSAGE = FaultPlan((FaultRule("message.*", FaultAction.KILL, nth=1, times=1),))


def _pool_tree():
    return supervisor("app", [supervisor("pool", [worker("w", ECHO)], strategy="simple_one_for_one",
                                         intensity=5)])


def _fired(system, mark):
    system.events.poll()
    return [(e.fields.get("actor") or e.path, e.fields["point"]) for e in system.events.all()[mark:]
            if e.kind == "fault_fired"]


def test_each_childs_first_start_is_armed_and_its_restart_runs_free(actor_system):
    actor_system.start_tree(_pool_tree())
    actor_system.start_child("app/pool", ())  # started before the arming: runs free
    assert actor_system.arm_faults("app/pool", KILL_AT_FIRST_MESSAGE, children=True) == ["app/pool"]
    actor_system.start_child("app/pool", ())  # armed at its start (the supervisor is not: its forks do not inherit)
    mark = actor_system.mark()
    assert actor_system.ask("app/pool/w#1", "hello") == "hello"
    with pytest.raises(Exception):  # noqa: B017 - the kill ends the ask (ActorStopped or a timeout's kin)
        actor_system.ask("app/pool/w#2", "hello", timeout=5)
    actor_system.wait_for("started", "app/pool/w#2", after=mark)
    assert actor_system.ask("app/pool/w#2", "hello") == "hello", "the restart inherited the plan"
    assert _fired(actor_system, mark) == [("app/pool/w#2", "message.app/pool/w#2")]
    actor_system.arm_faults("app/pool", None, children=True)  # forgotten: the next child runs free
    actor_system.start_child("app/pool", ())
    assert actor_system.ask("app/pool/w#3", "hello") == "hello"


def test_a_worker_refuses_a_plan_for_children_it_cannot_have(actor_system):
    actor_system.start_tree(supervisor("app", [worker("w", ECHO)]))
    with pytest.raises(BadRequest, match="a worker starts no children"):
        actor_system.arm_faults("app/w", KILL_AT_FIRST_MESSAGE, children=True)
    assert actor_system.ask("app/w", "hello") == "hello"  # and armed nothing in itself
    with pytest.raises(TypeError, match="children: must be True or False"):
        actor_system.arm_faults("app/w", KILL_AT_FIRST_MESSAGE, children="yes")  # type: ignore[arg-type]


def test_a_supervisor_refuses_an_arming_whose_children_flag_is_no_bool(actor_system):
    # sent raw, past the handle's own check (as another actor could): neither armed there nor kept for children
    from ouroactors.supervision.protocol import ArmFaults

    actor_system.start_tree(_pool_tree())
    address = actor_system.resolve("app/pool")
    with pytest.raises(BadRequest, match=r"ArmFaults\.children.*must be True or False"):
        actor_system._call(address, ArmFaults(KILL_AT_FIRST_MESSAGE, "yes"), 10.0, "app/pool")
    actor_system.start_child("app/pool", ())
    assert actor_system.ask("app/pool/w#1", "hello") == "hello"  # nothing was armed for it
