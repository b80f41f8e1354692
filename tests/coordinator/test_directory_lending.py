"""The directory lends a held poll to the session's coordinator (``reads.DirectoryReads._lend``): at once when it
knows that coordinator, and — for one held while it did not — as soon as it learns it (created, found by a restarted
directory's sweep, or forwarded a command). Pure: the mixin with a recording ``send``."""

from __future__ import annotations

import pytest

from ouroactors.authorities.storage.commit import Committed
from ouroactors.runtime.coordinator.errors import UnknownSession
from ouroactors.runtime.coordinator.messages import ForSession, ReadEvents
from ouroactors.runtime.coordinator.principals import PrincipalCheck, add_principal
from ouroactors.runtime.coordinator.reads import Follower
from ouroactors.runtime.coordinator.store import SessionStore

from .support import RecordingDirectory, new_record

Directory = RecordingDirectory


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


def test_a_reader_who_may_not_read_the_session_is_neither_held_nor_lent(store: SessionStore, tmp_path) -> None:
    """The attack: another principal follows bob's new session before its first message, hoping to be lent to its
    coordinator once the directory learns it. It is refused as if the session did not exist, and nothing of its is
    held, lent or sent."""
    assert isinstance(store.create(new_record("s1", principal="user:bob")), Committed)
    directory = Directory()
    directory.store, directory.node, directory.principals = store, "n1", PrincipalCheck(tmp_path)
    token = add_principal(tmp_path, "user:alice")
    stranger = ReadEvents("s1", 0, 256, 5.0, "r1", True, principal="user:alice", token=token)
    with pytest.raises(UnknownSession):
        directory.handle_ReadEvents(stranger, "alice's reader")
    directory._lend_waiting("s1", "coordinator-of-s1")
    assert directory.followers == [] and directory.sent == []
    owner = ReadEvents("s1", 0, 256, 5.0, "r2", True, principal="user:bob", token=add_principal(tmp_path, "user:bob"))
    assert directory.handle_ReadEvents(owner, "bob's reader") is None  # held: nothing committed yet
    directory._lend_waiting("s1", "coordinator-of-s1")
    assert [message.reply_to for _, message in directory.sent] == ["bob's reader"]
