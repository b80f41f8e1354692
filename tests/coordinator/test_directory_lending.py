"""The directory lends a held poll to the session's coordinator (``reads.DirectoryReads._lend``): at once when it
knows that coordinator, and — for one held while it did not — as soon as it learns it (created, found by a restarted
directory's sweep, or forwarded a command). Pure: the mixin with a recording ``send``."""

from __future__ import annotations

from typing import Any

from ouroactors.runtime.coordinator.messages import ForSession, ReadEvents
from ouroactors.runtime.coordinator.reads import DirectoryReads, Follower


class Directory(DirectoryReads):
    def __init__(self) -> None:
        self.followers: list[Follower] = []
        self.serving: dict[str, Any] = {}
        self.sent: list[tuple[Any, Any]] = []

    def send(self, target: Any, message: Any) -> None:
        self.sent.append((target, message))


def held(session: str, request_id: str, lent_at: float | None = None) -> Follower:
    return Follower(ReadEvents(session, 0, 256, 5.0, request_id, True), f"reader-{request_id}", 1e12, lent_at)


def test_polls_held_unlent_are_lent_when_their_coordinator_becomes_known() -> None:
    directory = Directory()
    directory.followers = [held("s1", "r1"), held("s2", "r2"), held("s1", ""), held("s1", "r3", lent_at=1.0)]
    directory._lend_waiting("s1", "coordinator-of-s1")
    assert [(target, message.reply_to, message.request.request_id) for target, message in directory.sent] == [
        ("coordinator-of-s1", "reader-r1", "r1")]  # not another session's, not an untagged one, not one lent already
    assert all(isinstance(message, ForSession) for _, message in directory.sent)
    assert directory.followers[0].lent_at is not None and directory.followers[1].lent_at is None
    directory._lend_waiting("s1", "coordinator-of-s1")
    assert len(directory.sent) == 1  # lent once
