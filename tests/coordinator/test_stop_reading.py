"""A reader done with its stream ends it at the source (``StopReading``): the directory forgets it and tells the
session's coordinator, which stops answering it — instead of both serving it at every commit until its ``wait_s``
ran out. ``Sessions.events`` sends the stop when its caller stops iterating, and only then. Pure: the mixins with a
recording ``send``, and a recording system."""

from __future__ import annotations

import time
from typing import Any

from ouroactors.runtime.coordinator.following import Following, _Held
from ouroactors.runtime.coordinator.messages import EventsRead, ForSession, ReadEvents, StopReading
from ouroactors.runtime.coordinator.principals import PrincipalCheck, add_principal
from ouroactors.runtime.coordinator.reads import Follower
from ouroactors.sessions import Sessions

from .support import RecordingDirectory


def read(request_id: str, session: str = "s1", principal: str | None = None, token: str | None = None) -> ReadEvents:
    return ReadEvents(session, 0, 256, 5.0, request_id, True, principal=principal, token=token)


def test_the_directory_forgets_the_stream_and_tells_the_coordinator(tmp_path) -> None:
    directory = RecordingDirectory(PrincipalCheck(tmp_path))
    directory.followers = [Follower(read("r1"), "reader", 1e12), Follower(read("r2"), "other", 1e12),
                           Follower(read("r1", "s2"), "reader", 1e12)]
    directory.serving = {"s1": "coordinator-of-s1"}
    assert directory.handle_StopReading(StopReading("s1", "r1"), "reader-teller") is None  # a tell: no answer
    assert [(f.request.session_id, f.request.request_id) for f in directory.followers] == [("s1", "r2"), ("s2", "r1")]
    [(target, forwarded)] = directory.sent
    assert target == "coordinator-of-s1" and isinstance(forwarded, ForSession)
    assert forwarded.request == StopReading("s1", "r1")


def test_a_stop_from_another_principal_or_unverified_or_untagged_ends_nothing(tmp_path) -> None:
    """The attack: alice learns bob's stream id and stops it. Her stop names her principal: nothing of bob's
    matches; claiming bob's name without his token is refused before anything is looked at."""
    bob = add_principal(tmp_path, "user:bob")
    alice = add_principal(tmp_path, "user:alice")
    directory = RecordingDirectory(PrincipalCheck(tmp_path))
    directory.followers = [Follower(read("r1", principal="user:bob", token=bob), "bob", 1e12),
                           Follower(read(""), "x", 1e12)]
    directory.handle_StopReading(StopReading("s1", "r1", "user:alice", token=alice), "alice")
    directory.handle_StopReading(StopReading("s1", "r1", "user:bob", token="not bob's"), "alice")
    directory.handle_StopReading(StopReading("s1", ""), "x")
    assert len(directory.followers) == 2 and directory.sent == []  # no coordinator known: nothing forwarded either


class Coordinator(Following):
    def __init__(self) -> None:
        self.session_id = "s1"
        self.held: list[_Held] = []
        self.served: list[str] = []
        self.quiet = None


def test_the_coordinator_stops_answering_that_stream_only() -> None:
    coordinator = Coordinator()
    coordinator.held = [_Held("reader", read("r1"), 1e12, 0), _Held("reader", read("r2"), 1e12, 0),
                        _Held("bob", read("r3", principal="user:bob"), 1e12, 0)]
    coordinator._unfollow(StopReading("s1", "r1"))
    coordinator._unfollow(StopReading("s2", "r2"))  # another session's
    coordinator._unfollow(StopReading("s1", "r3"))  # bob's stream, stopped by someone who is not bob
    coordinator._unfollow(StopReading("s1", ""))
    assert [h.request.request_id for h in coordinator.held] == ["r2", "r3"]


class System:
    """Answers a streamed read with a first, non-final batch, then one more; records what is told."""

    base = "multiproc"

    def __init__(self, tmp_path) -> None:
        self.data_dir = tmp_path
        self.told: list[tuple[str, Any]] = []
        self.asked: list[Any] = []

    def ask(self, path: str, message: Any, timeout: float) -> Any:
        self.asked.append(message)
        return EventsRead((), 0, "running", message.request_id, final=False)

    def listen_tagged(self, request_id: str, timeout: float) -> Any:
        return EventsRead((), 0, "running", request_id, final=True)

    def tell(self, path: str, message: Any) -> None:
        self.told.append((path, message))


def test_sessions_stops_a_stream_its_caller_abandoned_and_not_one_that_ended(tmp_path) -> None:
    system = System(tmp_path)
    sessions = Sessions(system, follow_direct=False)
    batches = sessions._batches("s1", 0, 5.0)
    first = next(batches)
    assert not first.final
    batches.close()  # the caller stopped iterating (a break): the stream is ended at the source
    [(path, stop)] = system.told
    assert path == sessions.directory and stop == StopReading("s1", system.asked[0].request_id, sessions.principal)
    system.told.clear()
    assert [b.final for b in sessions._batches("s1", 0, 5.0)] == [False, True]  # read to its end: nothing to stop
    assert system.told == []
    started = time.monotonic()
    assert list(sessions._batches("s1", 0, 0.0))  # a plain read (no wait): no stream, nothing to stop
    assert system.told == [] and time.monotonic() - started < 5
