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


def test_a_plan_armed_everywhere_fires_as_events(actor_system):
    from ouroactors.core.faults import load_plan

    actor_system.start_tree(supervisor("root", [worker("a", ECHO), supervisor("s", [worker("b", ECHO)])]))
    armed = actor_system.arm_faults(None, FaultPlan((FaultRule("example.echo.message", FaultAction.DELAY,
                                                               delay_s=0.01),)))
    assert set(armed) == {"root", "root/a", "root/s", "root/s/b"}
    mark = actor_system.mark()
    assert actor_system.ask("root/s/b", "point") == "passed"
    fired = actor_system.wait_for("fault_fired", "root/s/b", after=mark)
    assert fired.fields["point"] == "example.echo.message" and fired.fields["action"] == "delay"
    del load_plan


def test_drop_and_duplicate_a_message(actor_system):
    from ouroactors import AskTimeout

    actor_system.start_tree(supervisor("root", [worker("c", "ouroactors.examples.workers:Counter")]))
    actor_system.arm_faults("root/c", FaultPlan((FaultRule("message.root/c", FaultAction.DUPLICATE, nth=1),
                                                 FaultRule("message.root/c", FaultAction.DROP, nth=3))))
    address = actor_system.resolve("root/c")
    with actor_system._thespian.private() as endpoint:  # its stray second answer dies with it
        assert endpoint.ask(address, "incr", 5) == 1
    assert actor_system.ask("root/c", "get") == 2  # the one message was handled twice
    with pytest.raises(AskTimeout):
        actor_system.ask("root/c", "incr", timeout=0.5)  # dropped: never handled, never answered
    assert actor_system.ask("root/c", "get") == 2


def test_kill_action_names_its_victim_by_path(actor_system):
    actor_system.start_tree(supervisor("root", [worker("trigger", ECHO), worker("victim", ECHO)]))
    victim = actor_system.child_info("root/victim").pid
    actor_system.arm_faults("root/trigger", FaultPlan((FaultRule("example.echo.message", FaultAction.KILL,
                                                                 target="root/victim"),)))
    mark = actor_system.mark()
    assert actor_system.ask("root/trigger", "point") == "passed"  # the trigger survives ...
    exited = actor_system.wait_for("exited", "root/victim", after=mark)  # ... the victim does not
    assert exited.reason == {"kind": "killed"}
    actor_system.wait_for("started", "root/victim", after=mark)
    assert actor_system.child_info("root/victim").pid != victim

    # The rule fires again, but its target is now another process: it is not killed.
    again = actor_system.mark()
    assert actor_system.ask("root/trigger", "point") == "passed"
    assert actor_system.ask("root/victim", "point") == "passed"  # answered: still alive
    assert not [e for e in actor_system.events.all()[again:] if e.kind == "exited"]


def test_storage_actions_reach_the_commit_contract(tmp_path):
    from ouroactors.authorities.storage.commit import Rejected, Unknown, write
    from ouroactors.authorities.storage.env import StorageConfig, close_env, open_env
    from ouroactors.core import faults

    config = StorageConfig.under(tmp_path)
    env = open_env(config)
    try:
        for action, expected in ((FaultAction.COMMIT_REJECTED, Rejected), (FaultAction.MAP_FULL, Rejected),
                                 (FaultAction.COMMIT_UNKNOWN, Unknown)):
            faults.arm(FaultPlan((FaultRule("storage.before_commit", action),)))
            assert isinstance(write(env, lambda txn: txn.put(b"k", b"v")), expected)
            faults.disarm()
    finally:
        faults.disarm()
        close_env(config)


def test_a_late_answer_is_not_taken_by_the_next_ask(actor_system):
    from ouroactors import AskTimeout

    actor_system.start_tree(supervisor("root", [worker("e", ECHO)]))
    ref = actor_system.ref("root/e")
    for asker in (lambda m, t: actor_system.ask("root/e", m, timeout=t), ref.ask):
        actor_system.arm_faults("root/e", FaultPlan((FaultRule("message.root/e", FaultAction.DELAY, delay_s=1.0,
                                                               nth=1),)))
        with pytest.raises(AskTimeout):
            asker("slow", 0.3)  # its answer comes ~0.7 s too late ...
        assert asker("next", 5) == "next"  # ... and is not taken for this one
        assert asker("again", 5) == "again"


def test_a_firing_in_a_child_that_inherited_its_supervisors_plan_is_found_by_the_childs_path(actor_system, tmp_path):
    # armed in the supervisor too, the plan is inherited by the restarted child, whose firing the supervisor's
    # process writes (path "root", field actor "root/e"): `events --path root/e` and wait_for("fault_fired",
    # "root/e") missed it
    from click.testing import CliRunner

    from ouroactors.cli import main

    actor_system.start_tree(supervisor("root", intensity=10, children=[worker("e", ECHO)]))
    actor_system.arm_faults(None, FaultPlan((FaultRule("example.echo.message", FaultAction.RAISE, nth=1),)))
    mark = actor_system.mark()
    with pytest.raises(ActorCrashed):
        actor_system.ask("root/e", "point")  # fires in the child's own plan
    actor_system.wait_for("started", "root/e", after=mark)
    restarted = actor_system.mark()
    with pytest.raises(ActorCrashed):
        actor_system.ask("root/e", "point")  # fires in the plan the restarted child inherited from root
    fired = actor_system.wait_for("fault_fired", "root/e", after=restarted)
    assert (fired.path, fired.subject) == ("root", "root/e")
    shown = CliRunner().invoke(main, ["events", "--data-dir", str(actor_system.data_dir), "--path", "root/e",
                                      "--kind", "fault_fired"])
    lines = shown.output.splitlines()
    assert len(lines) == 2, shown.output  # both firings, each named by the actor that reached the point
    assert all(" root/e  point=example.echo.message action=raise hit=1" in line for line in lines)
    assert lines[1].endswith("(a plan armed in root)") and not lines[0].endswith(")")
