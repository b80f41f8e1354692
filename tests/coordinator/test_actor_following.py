"""Followers served by the session's coordinator on real processes: a held read becomes a stream of each commit's
events, a stray answer of an abandoned stream is never taken by another ask, and a stream whose coordinator was
killed ends and the reader goes on from the log (no gap, no duplicate, no long timeout)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from ouroactors import ActorSystem
from ouroactors.runtime.coordinator import actor, directory, trace
from ouroactors.runtime.coordinator.messages import ReadEvents, SessionView
from ouroactors.sessions import Sessions

from .actor_support import agent_tree, session_config, slow_script, stream, wait_for

pytestmark = [pytest.mark.multiproc]

HOUR = 3600.0


def started(system: Any, tmp_path: Any, words: int = 12, pace_ms: int = 80) -> Sessions:
    system.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(system, follow_direct=False)  # the directory's follow is what is tested here
    script = slow_script(tmp_path / "slow.toml", words=words, pace_ms=pace_ms)
    sessions.new("s1", session_config(None, model={"kind": "scripted", "script": str(script)}))
    sessions.send("s1", "talk", last=True)  # the directory now knows the coordinator: it lends it the reads
    return sessions


def test_a_held_read_is_a_stream_of_each_commits_events(actor_system_factory, monkeypatch, tmp_path):
    # the directory's tick (its safety net) and the coordinator's poll an hour away: only the coordinator's
    # answers at each commit can reach the reader (the words come 80 ms apart: one commit each)
    monkeypatch.setattr(directory, "FOLLOW_TICK_S", HOUR)
    monkeypatch.setattr(actor, "POLL_S", HOUR)
    system = actor_system_factory("multiproc")
    started(system, tmp_path)
    first = wait_for("the turn started", lambda: system.ask("agent/sessions", ReadEvents("s1", 0), 10.0).events)
    cursor, streams = first[-1].cursor, []
    while not streams or streams[-1][-1].events[-1:] == () or streams[-1][-1].events[-1].kind != "turn_settled":
        # a read that finds events already committed is answered at once by the directory (one final answer);
        # one that waits is the coordinator's stream
        streams.append(stream(system, cursor))
        cursor = max([cursor, *(e.cursor for a in streams[-1] for e in a.events)])
        assert len(streams) < 20, streams
    answers = max(streams, key=len)
    assert len(answers) >= 3, streams  # one stream carried several commits' events
    assert len({a.request_id for a in answers}) == 1 and answers[0].request_id
    assert all(not a.final for a in answers[:-1]) and answers[-1].final
    events = [e for s_ in streams for a in s_ for e in a.events]
    assert [e.cursor for e in events] == list(range(first[-1].cursor + 1, events[-1].cursor + 1))  # no gap, no dup
    assert events[-1].kind == "turn_settled" and streams[-1][-1].state == "completed"


def test_an_abandoned_streams_answers_are_not_taken_by_other_asks(actor_system_factory, tmp_path):
    system = actor_system_factory("multiproc")
    sessions = started(system, tmp_path, words=20, pace_ms=40)
    follower = sessions.events("s1", follow=True, idle_timeout=30)
    assert next(follower).kind == "turn_started"
    follower.close()  # the stream it read goes on being sent for a while: to nobody who asks for it
    views = []
    deadline = time.monotonic() + 30
    while (not views or views[-1].state != "completed") and time.monotonic() < deadline:
        views.append(sessions.show("s1"))
        assert isinstance(views[-1], SessionView), views[-1]  # never an EventsRead meant for the stream
    assert views[-1].state == "completed"
    everything = list(sessions.events("s1"))
    assert [e.cursor for e in everything] == list(range(1, len(everything) + 1))


@pytest.mark.slow
def test_a_stream_whose_coordinator_is_killed_ends_and_the_reader_goes_on(actor_system_factory, tmp_path):
    system = actor_system_factory("multiproc")
    sessions = started(system, tmp_path, words=30, pace_ms=100)
    follower = sessions.events("s1", follow=True, until="turn_settled", idle_timeout=60)
    seen = [next(follower), next(follower)]  # reading a stream now
    coordinator = wait_for("the coordinator runs", lambda: next(
        (c for c in system.which_children("agent/coordinator") if c.status == "running"), None))
    system.kill(f"agent/coordinator/{coordinator.id}")
    began = time.monotonic()
    events = seen + list(follower)
    assert [e.cursor for e in events] == list(range(1, len(events) + 1))  # no gap, no duplicate
    assert events[-1].kind == "turn_settled"
    assert time.monotonic() - began < 45  # not a lost read's 65 s ask timeout


@pytest.mark.parametrize("directory_restarted", [False, True], ids=["new-session", "restarted-directory"])
def test_a_follower_before_the_first_message_is_lent_to_the_coordinator(actor_system_factory, monkeypatch, tmp_path,
                                                                        directory_restarted):
    """The directory knows a session's coordinator once it started it (at creation) or found it running (a restarted
    directory's sweep), not only once it forwarded it a command: a reader that follows before the session's next
    message is served at the coordinator's commits. Before, it waited at the directory for a follow tick (20 ms: the
    first events of every such reader came late)."""
    monkeypatch.setattr(directory, "FOLLOW_TICK_S", HOUR)  # only the coordinator can serve the reader in time
    monkeypatch.setattr(actor, "POLL_S", HOUR)
    marks = tmp_path / "trace.txt"
    monkeypatch.setattr(trace, "_PATH", str(marks))
    system = actor_system_factory("multiproc")
    system.start_tree(agent_tree(str(tmp_path)))
    Sessions(system).new("s1", session_config(None, model={"kind": "scripted", "script": str(
        slow_script(tmp_path / "slow.toml", words=3, pace_ms=10))}))
    if directory_restarted:
        old = system.kill("agent/sessions")
        wait_for("the directory back", lambda: system.pid_of("agent/sessions") != old
                 and system.child_info("agent/sessions").status == "running")
        wait_for("its sweep done", lambda: [v.session_id for v in Sessions(system).list()] == ["s1"])
    sent: list[Any] = []

    def lent() -> bool:
        return marks.exists() and " lent_rx " in marks.read_text()

    def send_once_lent() -> None:  # another client: the reader's asks stay on the test's own endpoint
        wait_for("the reader lent to the coordinator", lent, timeout=20.0)
        other = ActorSystem.connect(system.data_dir)
        try:
            sent.append(Sessions(other).send("s1", "talk", last=True))
        finally:
            other.close()

    sender = threading.Thread(target=send_once_lent, daemon=True)
    sender.start()
    answers = stream(system, 0, wait_s=30.0)
    sender.join(30.0)
    assert sent, "the message was never sent: the reader was not lent to the coordinator"
    events = [e for a in answers for e in a.events]
    assert events and events[0].kind == "turn_started"
