"""Simulated process death on a simulated system: a kill ends one actor as SIGKILL ends its process.

The supervisor sees ``killed`` (no report), the actor's memory is gone (a new instance), messages to
the dead one go nowhere, LMDB keeps exactly what was committed (a transaction open at the death is
aborted, and the shared environment stays usable), and the test process itself never dies.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ouroactors import ActorSystem, supervisor, worker
from ouroactors.core import faults
from ouroactors.core.errors import NoSuchActor
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule
from ouroactors.supervision.protocol import ArmFaults

COUNTER = "tests.simulation.actors:Counter"
WRITER = "tests.simulation.actors:Writer"
TALKER = "tests.simulation.actors:Talker"


@pytest.fixture
def simulated(tmp_path: Path):
    system = ActorSystem.start("simple", tmp_path / "sim", simulated=True)
    try:
        yield system
    finally:
        system.shutdown()
    assert faults._KILLER is None  # the process's kills are real SIGKILLs again


def exits(system: ActorSystem, after: int, path: str) -> list[str]:
    return [(e.reason or {}).get("kind", "?") for e in system.events.all()[after:]
            if e.kind == "exited" and e.path == path]


def test_a_killed_actor_loses_its_memory_and_its_supervisor_sees_killed(simulated: ActorSystem) -> None:
    simulated.start_tree(supervisor("t", [worker("counter", COUNTER), worker("other", COUNTER)]))
    assert [simulated.ask("t/counter", "incr") for _ in range(3)] == [1, 2, 3]
    assert simulated.ask("t/other", "incr") == 1
    assert simulated.simulation is not None
    mark = simulated.mark()
    simulated.simulation.kill("t/counter")
    simulated.wait_for("started", "t/counter", after=mark)
    assert exits(simulated, mark, "t/counter") == ["killed"]  # exactly what a SIGKILL gives on multiproc
    assert simulated.ask("t/counter", "count") == 0  # a new instance: the old count died with the old one
    assert simulated.ask("t/other", "count") == 1  # nobody else was touched
    assert [path for path, _ in simulated.simulation.deaths] == ["t/counter"]
    simulated.run_for(5)  # the dead instance's timer comes due: it fires into nothing
    assert simulated.child_info("t/counter").restarts == 1


def test_a_kill_rule_ends_the_actor_at_its_point_and_the_message_dies_with_it(simulated: ActorSystem) -> None:
    simulated.start_tree(supervisor("t", [worker("counter", COUNTER)]))
    simulated.ask("t/counter", "incr")
    simulated.arm_faults("t/counter", FaultPlan((FaultRule("message.t/counter", FaultAction.KILL, nth=1),)))
    mark = simulated.mark()
    simulated.tell("t/counter", "incr")  # hit 1: killed before handling it
    simulated.wait_for("started", "t/counter", after=mark)
    kinds = [e.kind for e in simulated.events.all()[mark:] if e.path == "t/counter"]
    assert kinds[:2] == ["fault_fired", "exited"] and exits(simulated, mark, "t/counter") == ["killed"]
    assert simulated.ask("t/counter", "count") == 0  # the message was never handled, the count is gone
    simulated.arm_faults(None, None)


def test_a_kill_aimed_at_another_actor_ends_that_one_and_spares_the_one_running(simulated: ActorSystem) -> None:
    simulated.start_tree(supervisor("t", [worker("counter", COUNTER), worker("other", COUNTER)]))
    simulated.ask("t/counter", "incr")
    simulated.ask("t/other", "incr")
    incarnation = simulated.simulation.incarnation_of("t/other")  # type: ignore[union-attr]
    rule = FaultRule("message.t/counter", FaultAction.KILL, nth=1, target="t/other", target_pid=incarnation)
    simulated.arm_faults("t/counter", FaultPlan((rule,)))
    mark = simulated.mark()
    assert simulated.ask("t/counter", "incr") == 2  # the one running goes on
    simulated.wait_for("started", "t/other", after=mark)
    assert exits(simulated, mark, "t/other") == ["killed"] and exits(simulated, mark, "t/counter") == []
    assert simulated.ask("t/other", "count") == 0
    simulated.arm_faults(None, None)


def test_a_kill_pinned_to_an_incarnation_spares_its_successor(simulated: ActorSystem) -> None:
    simulated.start_tree(supervisor("t", [worker("counter", COUNTER), worker("other", COUNTER)]))
    sim = simulated.simulation
    assert sim is not None
    old = sim.incarnation_of("t/other")
    mark = simulated.mark()
    sim.kill("t/other")
    simulated.wait_for("started", "t/other", after=mark)
    assert sim.incarnation_of("t/other") != old
    rule = FaultRule("message.t/counter", FaultAction.KILL, target="t/other", target_pid=old)
    # Straight to the actor, as the chaos bench arms: the handle's arm_faults would aim by pid.
    simulated.ask("t/counter", ArmFaults(FaultPlan((rule,))))
    simulated.ask("t/counter", "incr")
    assert exits(simulated, mark, "t/other") == ["killed"]  # only the first death
    with pytest.raises(NoSuchActor):
        sim.kill("t/nobody")
    simulated.arm_faults(None, None)


def test_a_death_mid_transaction_aborts_it_and_the_shared_environment_stays_usable(simulated: ActorSystem) -> None:
    """The kill lands between a put and its commit: the put is not durable, nothing is wedged."""
    simulated.start_tree(supervisor("t", [worker("writer", WRITER), worker("reader", WRITER)]))
    assert simulated.ask("t/writer", "put a=1") == "Committed"
    simulated.arm_faults("t/writer", FaultPlan((FaultRule("test.sim.in_txn", FaultAction.KILL, nth=1),)))
    mark = simulated.mark()
    simulated.tell("t/writer", "put b=2")
    simulated.wait_for("started", "t/writer", after=mark)
    simulated.arm_faults(None, None)
    assert exits(simulated, mark, "t/writer") == ["killed"]
    assert simulated.ask("t/reader", "get b") == "<absent>"  # the dead actor's transaction was aborted
    assert simulated.ask("t/reader", "get a") == "1"  # what was committed stays
    assert simulated.ask("t/reader", "put c=3") == "Committed"  # the writer lock was released
    assert simulated.ask("t/writer", "put b=2") == "Committed"  # and the restarted writer writes
    assert simulated.ask("t/reader", "get b") == "2"


def test_a_dying_actor_sends_nothing_more_but_what_it_sent_before_stays_sent(simulated: ActorSystem) -> None:
    from tests.simulation import actors

    simulated.start_tree(supervisor("t", [worker("talker", TALKER)]))
    assert simulated.ask("t/talker", "one") == "done"
    simulated.arm_faults("t/talker", FaultPlan((FaultRule("test.sim.talking", FaultAction.KILL, nth=1),)))
    mark = simulated.mark()
    simulated.tell("t/talker", "two")
    simulated.wait_for("started", "t/talker", after=mark)
    simulated.arm_faults(None, None)
    assert exits(simulated, mark, "t/talker") == ["killed"]
    assert actors.HEARD[-3:] == ["before one", "after one", "before two"]  # no "after two"


def test_the_handles_kill_is_a_simulated_death_on_a_simulated_system(simulated: ActorSystem) -> None:
    simulated.start_tree(supervisor("app", [worker("counter", COUNTER)], intensity=5))
    first = simulated.wait_for("started", "app/counter")
    simulated.kill("app/counter")  # the same call as on multiproc; no real signal is sent
    again = simulated.wait_for("started", "app/counter")  # waits after the kill: the restart
    assert again.generation != first.generation
    assert exits(simulated, 0, "app/counter") == ["killed"]
