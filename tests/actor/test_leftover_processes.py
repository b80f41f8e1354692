"""What a worker's incarnation started ends with it (``ouroactors.supervision.leftovers``).

A worker's subprocess outlived the worker's crash and its ``terminate_child``: the next incarnation met it (a server
it started could no longer bind its port) and it lived on until the whole system stopped.
"""

from __future__ import annotations

import pytest

from ouroactors import supervisor, worker
from ouroactors.core.procs import pid_alive

from .helpers import wait_until
from .leftover_workers import SPAWNER

pytestmark = pytest.mark.multiproc


def test_a_crashed_or_terminated_workers_subprocess_ends_with_it(actor_system):
    actor_system.start_tree(supervisor("p", [worker("sp", SPAWNER)], intensity=10))
    first = actor_system.ask("p/sp", "pid")
    mark = actor_system.mark()
    with pytest.raises(Exception, match="asked to crash"):
        actor_system.ask("p/sp", "crash")
    actor_system.wait_for("started", "p/sp", after=mark)
    assert not pid_alive(first), "the crashed incarnation's subprocess outlived it"
    second = actor_system.ask("p/sp", "pid")
    assert pid_alive(second)
    actor_system.terminate_child("p", "sp")
    assert not pid_alive(second), "the terminated incarnation's subprocess outlived it"


def test_a_subprocess_the_worker_stops_itself_in_on_stop_is_left_to_it(actor_system):
    actor_system.start_tree(supervisor("p", [worker("sp", SPAWNER, kwargs={"stop_own": True})]))
    pid = actor_system.ask("p/sp", "pid")
    actor_system.terminate_child("p", "sp")
    wait_until(lambda: not pid_alive(pid), what="the subprocess ended")
    exited = [e for e in actor_system.events.all() if e.kind == "terminated" and e.path == "p/sp"]
    assert exited and exited[-1].reason == {"kind": "shutdown"}


def test_a_brutally_killed_workers_subprocess_ends_with_it(actor_system):
    # shutdown = brutal_kill: SIGKILLed by its supervisor without being asked, so its own stop never runs; what it
    # started is killed with it (the process tree, read before the kill)
    actor_system.start_tree(supervisor("p", [worker("sp", SPAWNER, shutdown="brutal_kill")]))
    pid = actor_system.ask("p/sp", "pid")
    actor_system.terminate_child("p", "sp")
    assert not pid_alive(pid), "the killed worker's subprocess outlived it"
    actor_system.restart_child("p", "sp")
    assert pid_alive(actor_system.ask("p/sp", "pid"))
