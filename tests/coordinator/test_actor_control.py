"""Suspend, resume, steer and cancel through ouroactors.sessions on real processes."""

from __future__ import annotations

import pytest

from ouroactors.core.errors import OuroactorsError
from ouroactors.sessions import SessionRejected, Sessions

from .actor_support import agent_tree, journal_kinds, session_config, slow_script, wait_for

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]


def _talk(system, tmp_path, last: bool = False):
    system.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(system)
    sessions.new("s1", session_config(None, model={"kind": "scripted", "script": str(slow_script(
        tmp_path / "slow.toml", words=30, pace_ms=60))}))
    sessions.send("s1", "talk", last=last)
    wait_for("output committed", lambda: sessions.show("s1").committed_cursor >= 3)
    return sessions


@pytest.fixture
def talking(actor_system, tmp_path):
    return actor_system, _talk(actor_system, tmp_path)


@pytest.mark.parametrize("last", [False, True], ids=["message", "last message"])
def test_suspend_stops_the_runtime_and_resume_runs_the_interrupted_turn_again(actor_system, tmp_path, last):
    system, sessions = actor_system, _talk(actor_system, tmp_path, last)
    done = sessions.suspend("s1")
    # even a turn that was to be the last: an interrupted turn did not do what it was asked, the session goes on
    assert done.view.state == "suspended" and done.view.runtime_id is None
    again = sessions.suspend("s1")  # a retry (its answer lost, or timed out): done already, nothing else changes
    assert (again.view.state, again.view.revision, again.detail) == (
        "suspended", done.view.revision, "suspended already: no turn was running")
    wait_for("the runtime gone", lambda: not [c for c in system.which_children("agent/execution")
                                               if c.status == "running"])  # a suspended session holds no process
    cut = sessions.show("s1").committed_cursor
    # the interrupted turn's end is published before its runtime goes: a subscriber sees the turn settle
    settled = [e for e in sessions.events("s1") if e.kind == "turn_settled"]
    assert [(e.turn, e.data["status"], e.cursor) for e in settled] == [(1, "interrupted", cut)]
    with pytest.raises(OuroactorsError, match="no turn to steer; send a message to start the next turn"):
        sessions.steer("s1", "hello?")
    resumed = sessions.resume("s1")
    assert resumed.view.state == "running"
    events = list(sessions.events("s1", after=cut, follow=True, until="turn_settled", idle_timeout=30))
    assert [e.cursor for e in events] == list(range(cut + 1, cut + len(events) + 1))
    assert (events[0].kind, events[0].turn) == ("turn_started", 2)  # the text again, as the next turn
    assert events[-1].data["status"] == "completed"
    ended = "completed" if last else "suspended"  # a last message's session completes with its turn that did
    assert wait_for(ended, lambda: sessions.show("s1").state == ended)
    with pytest.raises(OuroactorsError, match=r"nothing to resume|completed"):
        sessions.resume("s1")


def test_steer_reaches_the_running_turn_and_cancel_ends_the_session(talking):
    system, sessions = talking
    with pytest.raises(OuroactorsError, match="lone surrogate"):  # bad input: refused, nothing journaled
        sessions.steer("s1", "brief \ud800")
    assert sessions.steer("s1", "and be brief").detail == "steered"
    # answered once its acceptance is durable: the journal holds it, whether or not the loop delivered it yet
    assert journal_kinds(system.data_dir, "s1").count("steer_received") == 1
    done = sessions.cancel("s1")
    assert done.view.state == "cancelled" and done.view.reason == f"cancelled by {sessions.principal}"
    assert [e.data["status"] for e in sessions.events("s1") if e.kind == "turn_settled"] == ["interrupted"]
    wait_for("the coordinator gone", lambda: not [c for c in system.which_children("agent/coordinator")
                                                    if c.status == "running"])
    wait_for("the runtime gone", lambda: not [c for c in system.which_children("agent/execution")
                                               if c.status == "running"])
    with pytest.raises(OuroactorsError, match="cancelled"):
        sessions.send("s1", "more")
    # a retried cancel is done already (the directory answers: the coordinator has stopped); a stranger's is not
    again = sessions.cancel("s1")
    assert (again.view.state, again.view.revision) == ("cancelled", done.view.revision)
    assert again.detail.startswith("cancelled already")
    with pytest.raises(OuroactorsError, match="is cancelled"):
        Sessions(system, principal="user:mallory").cancel("s1")
    assert sessions.list() == [] and [v.state for v in sessions.list(all=True)] == ["cancelled"]


def test_a_suspended_session_exports_its_history_from_python(talking):
    from ouroactors.authorities.storage.env import StorageConfig, is_open

    system, sessions = talking
    sessions.suspend("s1")
    doc = sessions.export("s1")
    assert doc["session"]["state"] == "suspended" and "resume" in doc["next_valid"]
    assert [e["cursor"] for e in doc["events"]] == [e.cursor for e in sessions.events("s1")]
    assert [a["kind"] for a in doc["resume_events"]["accepted"]] == ["message"]
    assert doc["journal"]["ok"] and doc["journal"]["records"] > 0
    assert not is_open(StorageConfig.under(system.data_dir))  # nothing left open for a later fork
    with pytest.raises(OuroactorsError):
        sessions.export("nobody")


def _two_on_one_workspace(system, tmp_path, *, words: int, pace_ms: int) -> Sessions:
    """The agent tree, and sessions a and b on the one workspace ``<tmp>/ws``, on a slow text script."""
    ws = tmp_path / "ws"
    ws.mkdir()
    system.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(system)
    slow = {"model": {"kind": "scripted", "script": str(slow_script(tmp_path / "slow.toml", words, pace_ms))}}
    sessions.new("a", session_config(ws, **slow))
    sessions.new("b", session_config(ws, **slow))
    return sessions


@pytest.mark.parametrize("how", ["resumed", "message retried", "another message"])
def test_a_turn_that_cannot_start_leaves_its_session_suspended_and_resume_runs_it(actor_system, tmp_path, how):
    """Two sessions on one workspace. While a's turn holds it, b's message cannot lease it: nothing of b's turn ran,
    so b is suspended with the reason (it used to fail for good, or, on a resume, stay running with no runtime),
    and ``resume`` runs that message once the workspace is free — though b's log ends with an earlier turn's
    settlement, which is not this one's (the log's cursor says so). So does the client's retry of the message with
    its event id: the message was accepted and never ran, so the retry runs it (it is refused as a duplicate only
    once its turn ran). Another message instead runs in its place, and its answer says that the first will not run."""
    sessions = _two_on_one_workspace(actor_system, tmp_path, words=30, pace_ms=60)
    sessions.send("b", "first")  # b's first turn: 30 words, settled, its lease released
    wait_for("b's first turn settled", lambda: sessions.show("b").state == "suspended")
    settled = sessions.show("b").committed_cursor
    sessions.send("a", "hold the workspace")
    wait_for("a's turn running", lambda: sessions.show("a").committed_cursor >= 3)
    with pytest.raises(OuroactorsError, match=r"the turn did not start: .*workspace.*the session is suspended"):
        sessions.send("b", "second", event_id="m-b2")
    view = sessions.show("b")
    assert (view.state, view.committed_cursor) == ("suspended", settled) and "`resume` runs it" in view.reason
    with pytest.raises(OuroactorsError, match="the turn did not start"):  # still held: suspended again, not stuck
        sessions.resume("b")
    with pytest.raises(OuroactorsError, match="the turn did not start"):  # a retry of the message: not a duplicate
        sessions.send("b", "second", event_id="m-b2")
    with pytest.raises(SessionRejected, match="duplicate"):  # another text under its id is no retry
        sessions.send("b", "something else", event_id="m-b2")
    assert sessions.show("b").state == "suspended"
    sessions.suspend("a")  # frees the workspace
    # resumed, or the client retries its message, same event id: its turn runs now (the message was taken, not run)
    resumed = {"resumed": lambda: sessions.resume("b"),
               "message retried": lambda: sessions.send("b", "second", event_id="m-b2"),
               "another message": lambda: sessions.send("b", "third", event_id="m-b3")}[how]()
    assert resumed.view.state == "running" and resumed.view.reason is None
    replaced = "the earlier message 'm-b2', whose turn never started, will not run (this one replaced it)"
    assert (replaced in resumed.detail) is (how == "another message"), resumed.detail
    events = list(sessions.events("b", after=settled, follow=True, until="turn_settled", idle_timeout=30))
    assert (events[0].kind, events[0].turn) == ("turn_started", 2)
    assert events[0].data["prompt"] == ("third" if how == "another message" else "second")
    assert events[-1].data["status"] == "completed" and "next" in [e.data.get("text") for e in events]
    wait_for("b suspended after its turn", lambda: sessions.show("b").state == "suspended")
    with pytest.raises(OuroactorsError, match="nothing to resume"):  # that turn settled now
        sessions.resume("b")
    with pytest.raises(SessionRejected, match="duplicate"):  # and its message ran: a retry now is a duplicate
        sessions.send("b", "second", event_id="m-b2")
    assert [e.turn for e in sessions.events("b") if e.kind == "turn_started"] == [1, 2]


def test_a_timer_whose_turn_cannot_start_suspends_its_session_and_resume_runs_the_timers_text(actor_system,
                                                                                            tmp_path):
    """The turn a due timer starts finds the workspace held by another session: the session is suspended with the
    reason (its coordinator does not crash over it: nobody asked), and ``resume`` runs the timer's text."""
    system = actor_system
    sessions = _two_on_one_workspace(system, tmp_path, words=200, pace_ms=50)
    sessions.send("a", "hold the workspace")  # 10 s of words: far longer than the timer below
    wait_for("a's turn running", lambda: sessions.show("a").committed_cursor >= 3)
    coordinators = {c.id for c in system.which_children("agent/coordinator") if c.status == "running"}
    sessions.wait("b", "when the timer fires", seconds=0.2)
    view = wait_for("b suspended", lambda: (v := sessions.show("b")).state == "suspended" and v)
    assert "the turn did not start" in view.reason and "workspace" in view.reason
    assert sessions.show("a").state == "running"
    assert coordinators <= {c.id for c in system.which_children("agent/coordinator") if c.status == "running"}
    sessions.cancel("a")
    assert sessions.resume("b").view.state == "running"
    events = list(sessions.events("b", follow=True, until="turn_settled", idle_timeout=30))
    assert (events[0].kind, events[0].turn, events[0].data.get("prompt")) == ("turn_started", 1, "when the timer fires")


def test_a_command_cut_short_by_a_suspend_is_named_where_the_session_is_looked_at(actor_system, tmp_path):
    """A shell command a suspend killed is left ``ambiguous`` in the ledger — it may have done part of its work, so
    nothing settles it by guessing — yet nothing pointed at it: `session show` said suspended, and only `ledger list`
    held the effect. The session's view names it now, with the command that settles it; settled, it is gone."""
    import json

    from ..e2e.cli_helpers import cli

    actor_system.start_tree(agent_tree(str(tmp_path), {"user": ["allow:Bash(sleep *)"]}))
    (tmp_path / "ws").mkdir()
    script = tmp_path / "sleep.json"
    script.write_text(json.dumps({"turns": [
        {"events": [{"kind": "tool_call", "id": "c1", "name": "shell", "arguments": {"command": "sleep 30"}}]},
        {"events": [{"kind": "text", "text": "slept"}]}]}))
    sessions = Sessions(actor_system)
    sessions.new("s1", session_config(tmp_path / "ws", model={"kind": "scripted", "script": str(script)}))
    sessions.send("s1", "sleep")
    wait_for("the command started", lambda: [e for e in sessions.events("s1") if e.kind == "tool_call"])
    assert sessions.unknown_effects("s1") == []  # started is not unknown: its runtime is there to settle it
    sessions.suspend("s1")
    [unknown] = wait_for("the cut command ambiguous", lambda: sessions.unknown_effects("s1"))
    assert (unknown.effect_id, unknown.kind, unknown.status.value) == ("s1/t1/c1", "shell", "ambiguous")
    assert unknown.reason.startswith("cancelled while it ran (interrupted)")  # what cut it, not that its writer left
    data = ("--data-dir", str(actor_system.data_dir))
    shown = cli("session", "show", "s1", *data, cwd=tmp_path)
    assert shown.returncode == 0 and "unknown outcome: s1/t1/c1 (shell): " in shown.stdout, shown.stdout + shown.stderr
    assert "settle: ouroactors ledger settle s1/t1/c1 ok|failed --reason" in shown.stdout
    as_json = json.loads(cli("session", "show", "s1", "--json", *data, cwd=tmp_path).stdout)
    assert (as_json["state"], as_json["approvals"]) == ("suspended", [])
    assert [(u["effect_id"], u["kind"]) for u in as_json["unknown_outcomes"]] == [("s1/t1/c1", "shell")]
    settled = cli("ledger", "settle", "s1/t1/c1", "failed", "--reason", "killed by the suspend", *data, cwd=tmp_path)
    assert settled.returncode == 0, settled.stderr
    assert sessions.unknown_effects("s1") == []
    assert "unknown outcome" not in cli("session", "show", "s1", *data, cwd=tmp_path).stdout
