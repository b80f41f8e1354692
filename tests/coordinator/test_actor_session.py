"""The coordinator on real processes: a scripted turn end to end, published only after its checkpoint."""

from __future__ import annotations

import pytest

from ouroactors.sessions import SessionRejected, Sessions

from .actor_support import agent_tree, journal_kinds, session_config, wait_for

pytestmark = pytest.mark.multiproc


@pytest.fixture
def agent(actor_system, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "NOTES.md").write_text("# notes\n- [ ] try the demo\n- [ ] read the docs\n")
    actor_system.start_tree(agent_tree(str(tmp_path)))
    return actor_system, Sessions(actor_system), ws


def test_a_scripted_turn_is_published_in_order_with_no_gap(agent):
    system, sessions, ws = agent
    view = sessions.new("s1", session_config(ws))
    assert (view.state, view.state_version, view.committed_cursor) == ("suspended", 0, 0)
    sessions.send("s1", "please")
    events = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=30))
    kinds = [e.kind for e in events]
    assert kinds[0] == "turn_started" and kinds[-1] == "turn_settled", kinds
    assert [e.cursor for e in events] == list(range(1, len(events) + 1))
    assert [e.data["status"] for e in events if e.kind == "tool_result"] == ["ok", "ok", "ok"]
    assert "- [x] try the demo" in (ws / "NOTES.md").read_text()
    shown = wait_for("the session suspended", lambda: (v := sessions.show("s1")).state == "suspended" and v)
    assert shown.committed_cursor == events[-1].cursor and shown.runtime_id is None
    # Reading again from any cursor gives the same events: no gap, no duplicate.
    assert [e.cursor for e in sessions.events("s1", after=3)] == [e.cursor for e in events[3:]]
    assert journal_kinds(system.data_dir, "s1").count("turn_settled") == 1


def test_a_stale_message_does_not_resume_and_is_recorded(agent):
    _system, sessions, _ws = agent
    sessions.new("s2", session_config(None))
    with pytest.raises(SessionRejected) as refused:
        sessions.send("s2", "hello", expected_version=7)
    assert refused.value.code == "stale"
    view = sessions.show("s2")
    assert (view.state, view.state_version, view.rejections) == ("suspended", 0, 1)


def test_a_last_message_completes_the_session_when_its_turn_settles(agent):
    system, sessions, ws = agent
    sessions.new("s3", session_config(ws))
    sessions.send("s3", "finish up", last=True)
    events = list(sessions.events("s3", follow=True, idle_timeout=30))  # ends by itself: the session is terminal
    assert events[-1].kind == "turn_settled"
    view = sessions.show("s3")
    assert view.state == "completed" and view.runtime_id is None
    wait_for("the coordinator ended", lambda: not [c for c in system.which_children("agent/coordinator")
                                                   if c.status == "running"])
    assert sessions.list() == []


def test_a_workspace_a_lease_would_refuse_is_refused_when_the_session_is_created(agent, tmp_path_factory):
    """Bad input at the door: a workspace outside the allowed roots (also through a link that leads out), or one
    that does not exist, is refused by ``new`` with the workspace authority's reason, and nothing is stored —
    instead of a session whose every message would fail to start its turn."""
    _system, sessions, ws = agent
    outside = tmp_path_factory.mktemp("elsewhere")
    link = ws.parent / "link-out"
    link.symlink_to(outside)
    for session_id, root, why in (("out", outside, "escapes the allowed roots"),
                                  ("via-link", link, "escapes the allowed roots"),
                                  ("missing", ws / "nope", "")):
        with pytest.raises(Exception, match=rf"session '{session_id}': workspace: .*{why}") as refused:
            sessions.new(session_id, session_config(root))
        assert str(root) in str(refused.value)
    assert sessions.list(all=True) == []
    assert sessions.new("fine", session_config(ws)).state == "suspended"  # the check passes a root inside
