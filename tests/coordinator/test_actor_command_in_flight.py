"""A command that reached a coordinator which died before it began is run by the next one, not lost.

The directory forwards a command, and the coordinator's process takes the message off the wire; if that process
dies before the command's job begins (a SIGKILL, ``os._exit``, an OOM kill; with commands queued behind a long one
the window is as long as that one), no dead letter comes back: the message was delivered. Its caller waited out its
whole ask (60 s) for an answer nobody would give. Now the coordinator tells the directory it took each command the
moment its job begins (``Taken``), and the directory forwards again, to the coordinator's next incarnation, a
command nobody took whose coordinator is gone.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule
from ouroactors.sessions import Sessions

from .actor_support import three_word_session, wait_for

pytestmark = [pytest.mark.multiproc]

ASK_S = 15.0  # unfixed, the sends below are never answered: fail after this, not after the default 60 s


def log_events(system) -> list[dict]:
    path = Path(system.data_dir) / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _kill_at_command_begins(action: FaultAction = FaultAction.KILL) -> FaultPlan:
    return FaultPlan((FaultRule("coordinator.command_begins", action, nth=1),), forks=1)


@pytest.mark.parametrize("action", [FaultAction.KILL, FaultAction.EXIT])
def test_a_message_whose_coordinator_died_before_taking_it_is_run_by_the_next(actor_system, tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch,
                                                                              action: FaultAction):
    monkeypatch.setattr(Sessions._ask, "__defaults__", (ASK_S,))
    sessions = three_word_session(actor_system, tmp_path, arm_first=("agent/coordinator",
                                                                     _kill_at_command_begins(action)))
    first = actor_system.which_children("agent/coordinator")[0].generation
    sent = time.monotonic()
    sessions.send("s1", "go", event_id="m-1")  # the coordinator dies as the command's job begins
    took = time.monotonic() - sent
    assert took < ASK_S / 2, f"the send was answered after {took:.1f}s"
    now = [c for c in actor_system.which_children("agent/coordinator") if c.status == "running"]
    assert now and now[0].generation != first  # answered by the coordinator's next incarnation
    wait_for("the turn settled", lambda: "turn_settled" in [e.kind for e in sessions.events("s1")], timeout=30)
    kinds = [e.kind for e in sessions.events("s1")]
    assert kinds.count("turn_settled") == 1 and kinds.count("turn_started") == 1, kinds  # run once
    again = [e for e in log_events(actor_system) if e["kind"] == "command_forwarded_again"]
    assert [(e["session"], e["command"], e["why"]) for e in again] == [("s1", "SendMessage", "not_taken")]



def test_a_malformed_taken_is_refused_at_the_directory_door(actor_system, tmp_path: Path):
    """``Taken`` is checked as every request is (a ticket is a positive number), and refused from a stranger; whom it
    is believed from is :class:`~ouroactors.runtime.coordinator.in_flight.InFlight`'s rule (``test_in_flight``)."""
    from ouroactors.core.errors import BadRequest
    from ouroactors.runtime.coordinator.messages import Taken

    three_word_session(actor_system, tmp_path)
    with pytest.raises(BadRequest, match="ticket"):
        actor_system.ask("agent/sessions", Taken("s1", 0), timeout=10)
    with pytest.raises(BadRequest, match="ticket"):
        actor_system.ask("agent/sessions", Taken("s1", -3), timeout=10)
    # well-formed, from a stranger: no command went to it (a coordinator's late word is taken silently)
    with pytest.raises(BadRequest, match="is no command this directory forwarded to the sender"):
        actor_system.ask("agent/sessions", Taken("s1", 12345, answered=True), timeout=10)


def test_a_message_whose_coordinator_dies_while_running_it_is_answered_at_once(actor_system, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch):
    """Killed after it committed the message (its turn is owed): the caller hears within moments — the outcome is
    unknown, or (the coordinator's word that it began never left its process) its retry is a duplicate — never
    after its whole ask; and the turn runs once, by the recovery."""
    from ouroactors.core.errors import ActorCrashed
    from ouroactors.sessions import SessionRejected

    monkeypatch.setattr(Sessions._ask, "__defaults__", (ASK_S,))
    sessions = three_word_session(actor_system, tmp_path, arm_first=("agent/coordinator", FaultPlan((FaultRule(
        "coordinator.resume_committed", FaultAction.KILL, nth=1),), forks=1)))
    sent = time.monotonic()
    with pytest.raises((ActorCrashed, SessionRejected)) as heard:
        sessions.send("s1", "go", event_id="m-1")
    took = time.monotonic() - sent
    assert took < ASK_S / 2, f"the send was answered after {took:.1f}s"
    told = [(e["kind"], e["command"]) for e in log_events(actor_system)
            if e["kind"] in ("command_outcome_unknown", "command_forwarded_again")]
    if isinstance(heard.value, ActorCrashed):
        assert "unknown" in str(heard.value) and "event id is recognised" in str(heard.value)
        assert told == [("command_outcome_unknown", "SendMessage")]
    else:  # its Taken had not left the process: forwarded again, and recognised there
        assert "duplicate" in str(heard.value)
        assert told == [("command_forwarded_again", "SendMessage")]
    wait_for("the turn settled", lambda: "turn_settled" in [e.kind for e in sessions.events("s1")], timeout=30)
    kinds = [e.kind for e in sessions.events("s1")]
    assert kinds.count("turn_started") == 1, kinds
