"""An ask whose worker dies handling it ends as on multiproc: ``ActorStopped``, never sent again.

In-process an empty answer comes at once both from a dead letter and from a worker that died with the ask in hand (a
simulated death). The handle took both for a dead letter and asked the restarted worker again: the request was
handled twice and the ask answered "ok" — where the same kill on multiproc ends the ask with ``ActorStopped`` ("it may
or may not have been handled"). A scenario passed on the simulated base that fails on real processes.
"""

from __future__ import annotations

import pytest

from ouroactors import ActorStopped, supervisor, worker
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule

APPENDER = "tests.simulation.dying_workers:Appender"


def _handled(system):
    path = system.data_dir / "handled.txt"
    return path.read_text().splitlines() if path.exists() else []


def test_a_death_during_the_ask_is_actor_stopped_and_the_request_is_not_sent_again(simulated_system):
    simulated_system.start_tree(supervisor("app", [worker("w", APPENDER)]))
    assert simulated_system.ask("app/w", "first", timeout=5) == "ok"
    simulated_system.arm_faults("app", FaultPlan((FaultRule("dying.appended", FaultAction.KILL, nth=1),)))
    with pytest.raises(ActorStopped, match="may or may not have been handled"):
        simulated_system.ask("app/w", "second", timeout=5)
    assert _handled(simulated_system) == ["first", "second"]  # handled once, then the death
    simulated_system.arm_faults("app", None)
    assert simulated_system.ask("app/w", "third", timeout=5) == "ok"  # the restarted worker serves the path
    assert _handled(simulated_system) == ["first", "second", "third"]


def test_an_ask_after_a_death_still_reaches_the_restarted_worker(simulated_system):
    simulated_system.start_tree(supervisor("app", [worker("w", APPENDER)]))
    assert simulated_system.ask("app/w", "first", timeout=5) == "ok"  # the path's address is cached now
    mark = simulated_system.mark()
    simulated_system.kill("app/w")  # a simulated death between asks: the cached address is a dead letter
    simulated_system.wait_for("started", "app/w", after=mark)
    assert simulated_system.ask("app/w", "second", timeout=5) == "ok"
    assert _handled(simulated_system) == ["first", "second"]
