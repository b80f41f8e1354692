"""A read of a session's events after a cursor beyond its committed one is refused (:class:`CursorAhead`), by every
reader: the direct follow (``session events``, with and without ``--follow``), the directory's read and long poll
(:class:`~ouroactors.runtime.coordinator.messages.ReadEvents`), and the SSE server (``after``, ``Last-Event-ID``).

The hole it closes: with committed cursor 3, a follow ``--after 4`` read nothing, waited, and then printed cursors 5
and 6 of the next commit — ``turn_started`` at cursor 4 was never shown, and it exited 0. No actor system here: a
real LMDB environment holding a session with three committed events."""

from __future__ import annotations

import pickle
import threading
from pathlib import Path
from typing import Any

import pytest

from ouroactors.authorities.storage.commit import Committed
from ouroactors.runtime.coordinator import direct_follow
from ouroactors.runtime.coordinator.errors import CursorAhead
from ouroactors.runtime.coordinator.messages import EventsRead, ReadEvents
from ouroactors.runtime.coordinator.principals import PrincipalCheck, add_principal
from ouroactors.runtime.coordinator.publication import plan
from ouroactors.runtime.coordinator.record import RuntimeAttachment
from ouroactors.runtime.coordinator.store import SessionStore
from ouroactors.runtime.coordinator.workflow import Event
from ouroactors.runtime.execution.output import Batch, OutputEvent

from .support import RecordingDirectory, new_record

TOKEN = "t" * 43


def _three_events(store: SessionStore) -> None:
    def ok(outcome: Any) -> Any:
        assert isinstance(outcome, Committed), outcome
        return outcome.value

    ok(store.create(new_record("s1", principal="user:bob")))
    record = ok(store.transition("s1", 0, Event.MESSAGE, runtime=RuntimeAttachment(runtime_id="rt-1", generation=1),
                                 last_generation=1))
    events = tuple(OutputEvent(c, "text", 1, {"n": c}) for c in (1, 2, 3))
    step = plan(Batch(events, 0, 3, False), record.committed_cursor, record.log_digest, record.conversation_digest)
    assert ok(store.checkpoint("s1", record.revision, step)).committed_cursor == 3


@pytest.mark.parametrize("follow", [False, True])
def test_the_direct_follow_refuses_a_cursor_beyond_the_committed_one(store: SessionStore, tmp_path: Path,
                                                                     follow: bool) -> None:
    _three_events(store)
    with pytest.raises(CursorAhead, match=r"session 's1': cursor 4 is beyond its committed cursor 3"):
        next(direct_follow._follow(store, tmp_path, "s1", 4, follow=follow, idle_timeout=1, until=None))
    assert [e.cursor for e in direct_follow._follow(store, tmp_path, "s1", 3, follow=False, idle_timeout=None,
                                                    until=None)] == []  # at it: nothing more, no error
    assert [e.cursor for e in direct_follow._follow(store, tmp_path, "s1", 1, follow=False, idle_timeout=None,
                                                    until=None)] == [2, 3]
    refused = pickle.loads(pickle.dumps(CursorAhead("s1", 4, 3)))  # it crosses processes as an answer
    assert (refused.session_id, refused.after, refused.committed, str(refused)) == ("s1", 4, 3, str(CursorAhead(
        "s1", 4, 3)))


def test_the_directory_refuses_a_read_or_a_poll_beyond_the_committed_cursor(store: SessionStore,
                                                                           tmp_path: Path) -> None:
    _three_events(store)
    directory = RecordingDirectory(PrincipalCheck(tmp_path))
    directory.store, directory.node = store, "n1"
    token = add_principal(tmp_path, "user:bob")
    for wait_s in (0.0, 5.0):  # a read, and a long poll (which was held, then answered with the events after 4)
        with pytest.raises(CursorAhead, match="cursor 4 is beyond its committed cursor 3"):
            directory.handle_ReadEvents(ReadEvents("s1", 4, 256, wait_s, "r1", principal="user:bob", token=token),
                                        "bob's reader")
    assert directory.followers == [] and directory.sent == []  # nothing held, nothing lent
    read = directory.handle_ReadEvents(ReadEvents("s1", 3, principal="user:bob", token=token), "bob's reader")
    assert isinstance(read, EventsRead) and read.events == () and read.committed == 3
    stranger = add_principal(tmp_path, "user:eve")  # who may not read it hears only that it is unknown
    with pytest.raises(Exception, match="no session 's1'"):
        directory.handle_ReadEvents(ReadEvents("s1", 4, principal="user:eve", token=stranger), "eve's reader")


def test_the_sse_server_refuses_after_and_last_event_id_beyond_the_committed_cursor(store: SessionStore,
                                                                                    tmp_path: Path) -> None:
    import httpx

    from ouroactors.runtime.coordinator.sse_server import SessionEventServer

    _three_events(store)
    server = SessionEventServer(tmp_path, "127.0.0.1", 0, TOKEN)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/sessions/s1/events?access_token={TOKEN}"
        got = httpx.get(url + "&after=4", timeout=10)
        assert got.status_code == 400, got.text
        assert got.text.startswith("after: session 's1': cursor 4 is beyond its committed cursor 3"), got.text
        got = httpx.get(url, headers={"Last-Event-ID": "9"}, timeout=10)
        assert got.status_code == 400 and got.text.startswith("Last-Event-ID: session 's1': cursor 9 is beyond its "
                                                              "committed cursor 3"), got.text
        with httpx.stream("GET", url + "&after=2", timeout=10) as streamed:  # within it: streamed as before
            assert streamed.status_code == 200
            first = next(streamed.iter_lines())
        assert first == "id: 3", first
    finally:
        server.close()
        thread.join(10)
