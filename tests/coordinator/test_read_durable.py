"""What a publisher read is on disk before it is published.

A commit of another process is visible to LMDB readers once its meta page is in the page cache, a moment before the
committer's synced write of that page returns; a power loss in that moment undoes a transaction a reader has seen.
So every publisher that reads the session log — a subscriber following it itself, the coordinator answering a held
follower, the directory answering a read — flushes (:meth:`SessionStore.durable`) after its reads and before it
publishes. These tests hold the order: no event leaves before a flush that followed the read that found it.
"""

from __future__ import annotations

from typing import Any

from ouroactors.authorities.storage.commit import Committed
from ouroactors.runtime.coordinator import direct_follow
from ouroactors.runtime.coordinator.following import Following, _Held
from ouroactors.runtime.coordinator.messages import ReadEvents
from ouroactors.runtime.coordinator.publication import plan
from ouroactors.runtime.coordinator.record import RuntimeAttachment
from ouroactors.runtime.coordinator.store import SessionStore
from ouroactors.runtime.coordinator.workflow import Event
from ouroactors.runtime.execution.output import Batch, OutputEvent

from .support import new_record


class Noting(SessionStore):
    """The real store, noting its reads of the log and its flushes in ``seen``."""

    def __init__(self, env: Any, seen: list[tuple[str, int]]) -> None:
        super().__init__(env)
        self.seen = seen

    def events(self, session_id: str, after: int = 0, limit: int = 1000) -> Any:
        found = super().events(session_id, after, limit)
        self.seen.append(("read", len(found)))
        return found

    def durable(self) -> None:
        self.seen.append(("flush", 0))
        super().durable()


def _with_events(store: SessionStore, last: int) -> Any:
    def ok(outcome: Any) -> Any:
        assert isinstance(outcome, Committed), outcome
        return outcome.value

    ok(store.create(new_record("s1")))
    record = ok(store.transition("s1", 0, Event.MESSAGE, runtime=RuntimeAttachment(runtime_id="rt-1", generation=1),
                                 last_generation=1))
    events = tuple(OutputEvent(c, "text", 1, {"n": c}) for c in range(1, last + 1))
    step = plan(Batch(events, 0, last, False), record.committed_cursor, record.log_digest,
                record.conversation_digest)
    return ok(store.checkpoint("s1", record.revision, step))


def _published_after_a_flush(seen: list[tuple[str, int]]) -> None:
    """Every ('sent', n) comes after a flush that comes after the read that found events."""
    found_at = None
    flushed = False
    for what, n in seen:
        if what == "read" and n:
            found_at, flushed = n, False
        elif what == "flush" and found_at is not None:
            flushed = True
        elif what == "sent":
            assert flushed, f"published before a flush after its read: {seen}"


def test_a_subscriber_following_the_log_flushes_before_it_yields(env, tmp_path):
    seen: list[tuple[str, int]] = []
    store = Noting(env, seen)
    _with_events(store, 3)
    for event in direct_follow._follow(store, tmp_path, "s1", 0, follow=False, idle_timeout=None, until=None):
        seen.append(("sent", event.cursor))
    assert [n for what, n in seen if what == "sent"] == [1, 2, 3]
    _published_after_a_flush(seen)


class _Coordinator(Following):
    def __init__(self, store: SessionStore) -> None:
        self.session_id, self.store, self.directory = "s1", store, None
        self.held, self.served, self.sent = [], [], []
        self.quiet = None  # no wake-up FIFO here (see coordinator.quiet)

    def send(self, target: Any, message: Any) -> None:
        self.store.seen.append(("sent", len(message.events)))  # type: ignore[attr-defined]


def test_the_coordinator_flushes_before_it_answers_a_held_follower(env):
    seen: list[tuple[str, int]] = []
    store = Noting(env, seen)
    record = _with_events(store, 4)
    coordinator = _Coordinator(store)
    held = _Held("reply-to", ReadEvents("s1", 0, 100, 30.0, "r1", True), float("inf"), 0)
    assert coordinator._send_to(held, record) is True  # a stream: still held, caught up
    assert ("sent", 4) in seen
    _published_after_a_flush(seen)


def test_the_directory_flushes_before_it_answers_a_read(env):
    from ouroactors.runtime.coordinator import directory

    seen: list[tuple[str, int]] = []
    store = Noting(env, seen)
    _with_events(store, 2)

    class Door:  # the directory's state its read uses: its store, and the record as it reads it
        def __init__(self) -> None:
            self.store = store

        def _record(self, session_id: str) -> Any:
            return store.get(session_id)

    # the read both a first answer and a held follower's go through: events, then the record, then the flush
    answer, record = directory.Sessions._read_events(Door(), ReadEvents("s1", 0, 100, 0.0, "r1", False))  # type: ignore[arg-type]
    seen.append(("sent", len(answer.events)))
    assert len(answer.events) == 2 and record.committed_cursor == answer.committed
    _published_after_a_flush(seen)


def _checkpoint(store: SessionStore, first: int, last: int) -> Any:
    record = store.get("s1")
    events = tuple(OutputEvent(c, "text", 1, {"n": c}) for c in range(first, last + 1))
    outcome = store.checkpoint("s1", record.revision, plan(Batch(events, first - 1, last, False),
                                                           record.committed_cursor, record.log_digest,
                                                           record.conversation_digest))
    assert isinstance(outcome, Committed), outcome
    return outcome.value


def test_a_woken_subscriber_publishes_what_the_wake_vouches_for_without_a_flush_and_flushes_the_rest(env, tmp_path):
    """The committer's wake-up says which cursor its returned (synced) commit made durable: up to it, no flush is
    needed; an event read beyond it is held for its own committer's wake-up, or flushed when none comes."""
    from ouroactors.runtime.coordinator.wake import wake_subscribers

    seen: list[tuple[str, int]] = []
    store = Noting(env, seen)
    _with_events(store, 2)
    following = direct_follow._follow(store, tmp_path, "s1", 0, follow=True, idle_timeout=10, until=None)
    assert [next(following).cursor for _ in range(2)] == [1, 2]
    assert ("flush", 0) in seen  # the first read: nothing vouched for yet
    seen.clear()
    _checkpoint(store, 3, 4)
    wake_subscribers(tmp_path, "s1", 4)  # as the coordinator does once its checkpoint returned
    assert [next(following).cursor for _ in range(2)] == [3, 4]
    assert ("flush", 0) not in seen
    _checkpoint(store, 5, 5)
    wake_subscribers(tmp_path, "s1", 4)  # a wake-up that does not cover cursor 5 (a commit visible, not vouched)
    seen.clear()
    assert next(following).cursor == 5  # published only after a flush, once no wake-up came for it
    _published_after_a_flush([*seen, ("sent", 5)])
    following.close()


def test_the_coordinator_never_answers_beyond_the_record_it_reports(env):
    """A commit that lands between the coordinator's read of the record and its read of the log (a runtime's carried
    commit) is not sent with the older record — its cursor would be beyond the committed cursor the answer reports."""
    seen: list[tuple[str, int]] = []
    store = Noting(env, seen)
    record = _with_events(store, 4)
    _checkpoint(store, 5, 6)  # landed after ``record`` was read
    coordinator = _Coordinator(store)
    sent: list[Any] = []
    coordinator.send = lambda target, message: sent.append(message)  # type: ignore[method-assign]
    held = _Held("reply-to", ReadEvents("s1", 0, 100, 30.0, "r1", True), float("inf"), 0)
    assert coordinator._send_to(held, record) is True
    assert [e.cursor for m in sent for e in m.events] == [1, 2, 3, 4]
    assert all(m.committed == 4 for m in sent)


def test_after_its_own_checkpoint_returned_the_coordinator_answers_without_a_flush(env):
    """The record a checkpoint of the coordinator's wrote is on disk when the commit returns, and the answer goes no
    further than that record: nothing to flush."""
    seen: list[tuple[str, int]] = []
    store = Noting(env, seen)
    record = _with_events(store, 3)
    coordinator = _Coordinator(store)
    coordinator.held = [_Held("reply-to", ReadEvents("s1", 0, 100, 30.0, "r1", True), float("inf"), 0)]
    coordinator._serve_held(record, durable=True)
    assert ("sent", 3) in seen and ("flush", 0) not in seen


def test_carried_commits_the_runtime_vouched_for_are_served_without_a_flush(env):
    from ouroactors.runtime.coordinator.publishing import Publisher

    seen: list[tuple[str, int]] = []
    store = Noting(env, seen)
    record = _with_events(store, 3)
    for vouched, flushed in ((3, False), (2, True)):
        seen.clear()
        coordinator = _Coordinator(store)
        coordinator.published_through = 0  # type: ignore[attr-defined]
        coordinator.held = [_Held("reply-to", ReadEvents("s1", 0, 100, 30.0, "r1", True), float("inf"), 0)]
        Publisher._publish_carried(coordinator, record, vouched=vouched)  # type: ignore[arg-type]
        assert ("sent", 3) in seen and (("flush", 0) in seen) is flushed
