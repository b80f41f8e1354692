"""A turn the coordinator resumes itself runs on a spare runtime, as one a caller's command starts does.

The directory offers its spare with a command that may start a runtime. A timer that comes due, an approval the
heartbeat's look (or a recovery) finds answered: no command brings one, so the coordinator asks its directory
(``SpareWanted``) and is offered the spare, which the directory then replaces. It started a runtime of its own
instead (a fork and the runtime's start on the resume's way, ~20-25 ms). Only the session's coordinator is offered
one: anybody else asking is refused at the directory's door."""

from __future__ import annotations

import pytest

from ouroactors.core.errors import BadRequest
from ouroactors.runtime.coordinator.messages import SpareWanted
from ouroactors.sessions import Sessions
from ouroactors.supervision.events import EventReader

from .actor_support import agent_tree, session_config, wait_for

pytestmark = [pytest.mark.multiproc]


def events_of(system, kind: str) -> list:
    return [e for e in EventReader(str(system.data_dir / "events.jsonl")).poll() if e.kind == kind]


def test_a_timer_resumes_its_turn_on_the_directorys_spare_and_the_spare_is_replaced(actor_system, tmp_path):
    script = tmp_path / "two.toml"
    script.write_text('[[turns]]\nevents = [{ kind = "text", text = "hello" }]\n\n'
                      '[[turns]]\nevents = [{ kind = "text", text = "woken" }]\n')
    actor_system.start_tree(agent_tree(str(tmp_path), spares=1))
    sessions = Sessions(actor_system)
    sessions.new("s1", session_config(None, model={"kind": "scripted", "script": str(script)}))
    sessions.send("s1", "hi")
    wait_for("the first turn settled", lambda: sessions.show("s1").state == "suspended")
    kept = wait_for("a spare kept after the message", lambda: events_of(actor_system, "spare_kept"))
    spare = kept[-1].fields["runtime"]
    sessions.wait("s1", "wake up", seconds=0.2)
    wait_for("the timer's turn settled", lambda: [e.kind for e in sessions.events("s1")].count("turn_settled") == 2,
             timeout=30)
    opened = [e.path for e in events_of(actor_system, "runtime_opened") if e.fields.get("session") == "s1"]
    assert len(opened) == 2 and opened[-1] == spare, (opened, spare)  # was a runtime the coordinator started
    wait_for("the spare replaced", lambda: len(events_of(actor_system, "spare_kept")) == len(kept) + 1)


def test_a_spare_is_offered_to_the_sessions_coordinator_alone(actor_system, tmp_path):
    actor_system.start_tree(agent_tree(str(tmp_path), spares=1))
    Sessions(actor_system).new("s1", session_config(None))
    with pytest.raises(BadRequest, match="session_id"):
        actor_system.ask("agent/sessions", SpareWanted("s1"), timeout=10)
    with pytest.raises(BadRequest, match="session_id"):
        actor_system.ask("agent/sessions", SpareWanted("no-such-session"), timeout=10)
