"""The session directory's read side: ``list``, ``show`` and ``events`` (:mod:`.directory` is the whole actor).

Reads are answered from the durable store, so a reader never depends on a coordinator being up, and an event is
readable only once its checkpoint committed (commit before publish). ``events`` with ``wait_s`` is a long poll:
the request is held and the log re-read every :data:`FOLLOW_TICK_S` until something is committed or the wait ends.
Once the directory knows the session's coordinator it also lends it the poll, which the coordinator answers right
after its commit (:mod:`.following`); the directory answers a lent poll itself only if the coordinator has not
within :data:`LEND_GRACE_S` (it died, or never took it), or at its deadline.

**Who reads what** (:mod:`.principals`): the reader is verified as a command's principal is; it reads its own
sessions, the data dir's owner reads all; a session it may not read is answered as unknown. A held poll is checked
once, when it arrives.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from ...core.errors import OuroactorsError
from .errors import CursorAhead, UnknownSession
from .messages import EventsRead, ForSession, ListSessions, ReadEvents, ShowSession, StopReading
from .principals import PrincipalCheck, Unverified
from .record import SessionRecord
from .resume import VerifiedActor
from .store import SessionStore
from .views import view_of
from .workflow import State, is_terminal

__all__ = ["FOLLOW_TICK_S", "LEND_GRACE_S", "DirectoryError", "DirectoryReads"]

FOLLOW_TICK_S = 0.02
LEND_GRACE_S = 0.25  # a lent poll the coordinator has not answered by then is answered here (the safety net)
FOLLOW = "directory:follow"  # the follow tick's wake-up payload


class DirectoryError(OuroactorsError):
    """A request the directory refuses (unknown session, terminal session, bad configuration)."""


@dataclass
class Follower:
    request: ReadEvents
    sender: Any
    deadline: float
    lent_at: float | None = None  # when the poll was lent to the session's coordinator (.following)


class DirectoryReads:
    """The read handlers of :class:`.directory.Sessions` (a mixin: the actor provides ``send``, ``wakeupAfter``,
    ``asker_of``)."""

    store: SessionStore
    node: str
    principals: PrincipalCheck
    followers: list[Follower]
    serving: dict[str, Any]
    ticking: bool
    send: Any
    wakeupAfter: Any
    asker_of: Any

    def _record(self, session_id: str) -> SessionRecord:
        record = self.store.get(session_id)
        if record is None:
            raise UnknownSession(session_id)
        return record

    def _reader(self, message: ShowSession | ListSessions | ReadEvents | StopReading) -> VerifiedActor:
        """The verified principal a read comes from (:mod:`.principals`); an unverified one is refused."""
        reader = self.principals.reader(message.principal, message.token)
        if isinstance(reader, Unverified):
            raise DirectoryError(str(reader))
        return reader

    def _readable(self, message: ShowSession) -> SessionRecord:
        """The session's record, if the reader may read it; one it may not is unknown to it (not even its id)."""
        reader, record = self._reader(message), self._record(message.session_id)
        if not self.principals.may_read(reader, record.principal):
            raise UnknownSession(message.session_id)
        return record

    def handle_ShowSession(self, message: ShowSession, sender: Any) -> Any:
        return view_of(self._readable(message), self.store.rejection_count(message.session_id))

    def handle_ListSessions(self, message: ListSessions, sender: Any) -> Any:
        reader = self._reader(message)
        if not message.all:
            found = self.store.list_recoverable(self.node).sessions
            records = [self.store.get(r.session_id) for r in found]
        else:
            with self.store.env.begin(db=self.store.sessions) as txn:
                ids = [bytes(key).decode() for key, _ in txn.cursor()]
            records = [self.store.get(i) for i in ids]
        return tuple(view_of(r) for r in records if r is not None and self.principals.may_read(reader, r.principal))

    def handle_ReadEvents(self, message: ReadEvents, sender: Any) -> Any:
        reader = self._reader(message)
        answer, record = self._read_events(message)
        # Checked once, on the record read with the events (one read, not two): a held poll is answered later from
        # the same request. A reader that may not read the session hears only that it is unknown, nothing read.
        if not self.principals.may_read(reader, record.principal):
            raise UnknownSession(message.session_id)
        if message.after > record.committed_cursor:  # read from there, the events up to it would never be shown
            raise CursorAhead(message.session_id, message.after, record.committed_cursor)
        if answer.events or message.wait_s <= 0 or is_terminal(State(answer.state)):
            return answer
        # held: answered later (each answer carries the request id); asker_of says so (no Unanswered notice)
        follower = Follower(message, self.asker_of(sender).address, time.monotonic() + message.wait_s)
        coordinator = self.serving.get(message.session_id)
        if coordinator is not None:
            self._lend(follower, coordinator)
        self.followers.append(follower)
        if not self.ticking:
            self.ticking = True
            self.wakeupAfter(timedelta(seconds=FOLLOW_TICK_S), payload=FOLLOW)
        return None

    def on_stop(self, reason: Any) -> None:
        """Answer every poll held here with what is committed now (a stream's last answer): a reader whose directory
        stops — an upstream authority's restart stops it (rest_for_one) — reads again from the one that replaces
        it, instead of waiting out its ask (``wait_s`` + a minute). A lent poll is answered too: its coordinator
        stops with this directory, or answers it as well (the reader takes one answer per request id)."""
        held, self.followers = self.followers, []
        for follower in held:
            try:
                answer: Any = self._events(follower.request)
            except Exception as exc:  # whatever the read met: the reader hears it, and reads again
                answer = DirectoryError(f"the session directory stopped ({type(exc).__name__}: {exc}); read again")
            self.send(follower.sender, answer)
        super().on_stop(reason)  # type: ignore[misc]

    def handle_StopReading(self, message: StopReading, sender: Any) -> None:
        """A reader is done with its stream: forget it here, and where it was lent (see
        :class:`~.messages.StopReading`). Matched by its request id (the reader's random one, which only it and the
        actors serving it know) and principal: a stop for a stream that is not held (answered, expired, another
        reader's) changes nothing and is not answered (it is a tell)."""
        try:
            self._reader(message)  # verified as the read was
        except DirectoryError:
            return None
        if not message.request_id:
            return None
        self.followers = [f for f in self.followers if (f.request.request_id, f.request.session_id, f.request.principal)
                          != (message.request_id, message.session_id, message.principal)]
        coordinator = self.serving.get(message.session_id)
        if coordinator is not None:  # a stream it answered once is its alone (the nudge made this side forget it)
            self.send(coordinator, ForSession(sender, message))
        return None

    def _lend(self, follower: Follower, coordinator: Any) -> None:
        """Lend ``follower``'s poll to the session's coordinator: it answers at its next commit, a hop sooner than
        here. Only a tagged poll (a request id) can be answered by another actor and still be told apart."""
        if follower.request.request_id and follower.lent_at is None:
            self.send(coordinator, ForSession(follower.sender, follower.request))
            follower.lent_at = time.monotonic()

    def _lend_waiting(self, session_id: str, coordinator: Any) -> None:
        """The session's coordinator just became known: lend it the polls of that session held here unlent."""
        for follower in self.followers:
            if follower.request.session_id == session_id:
                self._lend(follower, coordinator)

    def _events(self, message: ReadEvents) -> EventsRead:
        return self._read_events(message)[0]

    def _read_events(self, message: ReadEvents) -> tuple[EventsRead, SessionRecord]:
        events = self.store.events(message.session_id, message.after, message.limit)
        record = self._record(message.session_id)  # read after the events: its cursor covers every one of them
        if events or is_terminal(record.state):
            self.store.durable()  # another process's commit may be visible before it is on disk (its meta page)
        return EventsRead(tuple(events), record.committed_cursor, record.state.value, message.request_id), record

    def _serve_followers(self, only: str | None = None, served: frozenset[str] = frozenset()) -> None:
        """Answer the followers that have events (or whose wait ended); ``only``: those of one session (a
        :class:`Committed` nudge naming the lent polls its coordinator ``served``; the tick stays as it is).

        A poll lent to the coordinator is its to answer (:mod:`.following`): one the nudge names is forgotten here;
        any other is answered here only after :data:`LEND_GRACE_S` or at its deadline (the reader drops a second
        answer)."""
        now = time.monotonic()
        waiting: list[Follower] = []
        for follower in self.followers:
            if only is not None and follower.request.session_id != only:
                waiting.append(follower)
                continue
            lent = follower.lent_at is not None
            if lent and follower.request.request_id in served:
                continue  # answered by the coordinator
            if lent and now - follower.lent_at < LEND_GRACE_S and now < follower.deadline:  # type: ignore[operator]
                waiting.append(follower)
                continue
            try:
                answer = self._events(follower.request)
            except UnknownSession as exc:
                self.send(follower.sender, exc)
                continue
            if answer.events or now >= follower.deadline or is_terminal(State(answer.state)):
                self.send(follower.sender, answer)
            else:
                waiting.append(follower)
        self.followers = waiting
        if waiting and only is None:
            self.ticking = True
            self.wakeupAfter(timedelta(seconds=FOLLOW_TICK_S), payload=FOLLOW)
