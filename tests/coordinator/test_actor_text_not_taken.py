"""A message whose runtime does not take the turn's text: the answer says so, and the turn still runs.

The coordinator accepts a message (a durable resume event), opens a runtime and sends it the turn's text
(``SendText``). Only an ``Accepted`` answer is a started turn. Here the runtime dies, or raises, as the text reaches
it (the ``runtime.text_received`` fault point, before anything starts), so the coordinator's ask gets something else.
Before, the command answered ``turn started: <whatever came back>`` and left the turn to the next heartbeat; now it
recovers at once (a lost runtime is replaced and re-runs the turn) and its answer says what happened.
"""

from __future__ import annotations

import pytest

from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule

from .actor_support import suspended_after_a_turn, wait_for

pytestmark = pytest.mark.multiproc


@pytest.mark.parametrize("action", [FaultAction.KILL, FaultAction.RAISE], ids=["killed", "raised"])
def test_a_runtime_that_does_not_take_the_text_is_reported_and_the_turn_runs_on_a_replacement(actor_system, tmp_path,
                                                                                            action):
    sessions = suspended_after_a_turn(actor_system, tmp_path)
    first = sessions.show("s1").committed_cursor
    actor_system.arm_faults("agent/execution", FaultPlan((FaultRule("runtime.text_received", action),), forks=1))
    done = sessions.send("s1", "again")
    assert "started" not in done.detail.split(";")[0], done.detail  # no claim of a turn that did not start
    assert "did not take its text" in done.detail and "recovered" in done.detail, done.detail
    events = list(sessions.events("s1", first, follow=True, until="turn_settled", idle_timeout=30))
    assert events and (events[0].kind, events[0].turn) == ("turn_started", 2), events
    assert events[-1].data["status"] == "completed" and "two" in [e.data.get("text") for e in events]
    assert [e.cursor for e in events] == list(range(first + 1, first + 1 + len(events)))
    assert wait_for("suspended", lambda: sessions.show("s1").state == "suspended")
    fired = [e.fields["point"] for e in actor_system.events.all() if e.kind == "fault_fired"]
    assert fired == ["runtime.text_received"]


def test_a_runtime_that_takes_the_text_is_answered_with_its_turn(actor_system, tmp_path):
    sessions = suspended_after_a_turn(actor_system, tmp_path)
    done = sessions.send("s1", "again")
    assert done.detail == "turn 2 started", done.detail


@pytest.mark.slow  # ~15 s: the coordinator's ask for the text times out after 10 s
def test_a_runtime_that_answers_the_text_too_late_is_adopted_and_its_turn_runs_once(actor_system, tmp_path):
    """The runtime holds the text 11 s before taking it: the coordinator's ask times out (10 s) and recovery runs.
    Its status probe is answered once the runtime is free again, with the turn running: the runtime is adopted, the
    text is not sent again, and the turn runs once."""
    sessions = suspended_after_a_turn(actor_system, tmp_path)
    first = sessions.show("s1").committed_cursor
    generation = sessions.show("s1").generation
    actor_system.arm_faults("agent/execution", FaultPlan((FaultRule("runtime.text_received", FaultAction.DELAY,
                                                                    delay_s=11.0),), forks=1))
    done = sessions.send("s1", "again")
    assert done.detail.startswith("message accepted, but the runtime did not take its text (TimedOut"), done.detail
    events = list(sessions.events("s1", first, follow=True, until="turn_settled", idle_timeout=30))
    assert [e.kind for e in events].count("turn_started") == 1 and events[0].turn == 2, events
    assert events[-1].data["status"] == "completed"
    assert len({e.generation for e in events}) == 1 and events[0].generation != generation  # one runtime ran it
    assert wait_for("suspended", lambda: sessions.show("s1").state == "suspended")
