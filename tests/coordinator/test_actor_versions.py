"""Seed 001, "workflow version guards": a session pins the workflow version it was created under, and code that
does not provide that version refuses to continue it — visibly, changing nothing — instead of running another
orchestration over its history."""

from __future__ import annotations

import re

import pytest

from ouroactors.runtime.execution import versions
from ouroactors.sessions import SessionRejected, Sessions

from .actor_support import agent_tree, session_config

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]


def test_a_session_pins_this_codes_workflow_and_an_unknown_pin_is_refused_at_creation(actor_system, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    actor_system.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(actor_system)
    view = sessions.new("s1", session_config(ws))
    assert view.pinned["workflow"] == versions.WORKFLOW  # "default" is resolved now, never later
    allowed = ", ".join(repr(v) for v in ("default", *versions.PROVIDED))
    with pytest.raises(Exception, match=re.escape(f"pins.workflow: got 'turn-loop/0'; allowed: {allowed}")):
        sessions.new("s2", {**session_config(ws), "pins": {"workflow": "turn-loop/0"}})
    assert [v.session_id for v in sessions.list()] == ["s1"]


def test_code_that_does_not_provide_a_sessions_workflow_refuses_its_next_message(actor_system_factory, tmp_path,
                                                                                monkeypatch):
    ws = tmp_path / "ws"
    ws.mkdir()
    data_dir = tmp_path / "data"
    before = actor_system_factory(data_dir=data_dir)
    before.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(before)
    created_under = sessions.new("s1", session_config(ws)).pinned["workflow"]
    sessions.send("s1", "hello")
    events = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=30))
    assert events[-1].data["status"] == "completed"
    before.shutdown()

    # An upgrade whose loop decides differently: a new version, the old one no longer provided.
    monkeypatch.setattr(versions, "WORKFLOW", "turn-loop/99")
    monkeypatch.setattr(versions, "PROVIDED", ("turn-loop/99",))
    after = actor_system_factory(data_dir=data_dir)  # forked from here: its actors run the "upgraded" code
    after.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(after)
    version = sessions.show("s1").state_version
    with pytest.raises(SessionRejected, match=re.escape(f"pinned to workflow {created_under!r}; this runtime provides "
                                                        "'turn-loop/99'")):
        sessions.send("s1", "again")
    view = sessions.show("s1")
    assert (view.state, view.state_version) == ("suspended", version)  # nothing changed
    assert [e.kind for e in sessions.events("s1", after=events[-1].cursor)] == []


def test_a_session_pins_its_tools_and_code_whose_tools_changed_refuses_its_next_message(actor_system_factory,
                                                                                       tmp_path, monkeypatch):
    """The tool set is pinned like the workflow: its digest covers each enabled tool's schema, description, effect
    class and ledger rules, so an upgrade that changes how a tool is judged cannot continue a recorded session."""
    from ouroactors.runtime.execution import tool_set
    from ouroactors.runtime.execution.tools import TOOLS

    ws = tmp_path / "ws"
    ws.mkdir()
    data_dir = tmp_path / "data"
    before = actor_system_factory(data_dir=data_dir)
    before.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(before)
    pinned = sessions.new("s1", session_config(ws)).pinned["tools"]
    assert pinned.startswith(tool_set.PREFIX) and pinned != "default"  # resolved at creation, never later
    with pytest.raises(Exception, match=re.escape("pins.tool_set: got 'my-tools'; allowed: 'default', ")):
        sessions.new("s2", {**session_config(ws), "pins": {"tool_set": "my-tools"}})
    sessions.send("s1", "hello")
    events = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=30))
    assert events[-1].data["status"] == "completed"
    before.shutdown()

    # An upgrade in which the shell tool is described (so judged, by the model) differently.
    monkeypatch.setattr(type(TOOLS["shell"]), "description", "runs anything, anywhere")
    tool_set._digest.cache_clear()
    after = actor_system_factory(data_dir=data_dir)  # forked from here: its actors run the "upgraded" code
    after.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(after)
    version = sessions.show("s1").state_version
    with pytest.raises(SessionRejected, match=re.escape(f"pinned to tool set {pinned!r}")):
        sessions.send("s1", "again")
    view = sessions.show("s1")
    assert (view.state, view.state_version) == ("suspended", version)  # nothing changed
    assert [e.kind for e in sessions.events("s1", after=events[-1].cursor)] == []
    tool_set._digest.cache_clear()
