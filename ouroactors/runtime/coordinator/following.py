"""Followers lent to the coordinator: a held long poll answered the moment its events are durable.

A mixin of :class:`~.actor.Coordinator`. **Why the coordinator answers.** A follower asks the session directory
(:mod:`.directory`), which reads the durable log. When nothing is there yet the directory holds the poll and used
to answer it after the coordinator's ``Committed`` nudge: commit → nudge → the directory re-reads → the answer, one
process hop more than the commit needs. So the directory also *lends* the held poll to the session's coordinator
(``ForSession(reply_to, ReadEvents)``), and the coordinator answers it straight after the checkpoint commit that
made events durable — read back from its own store, so nothing a reader sees is ahead of the commit (publish = the
commit, DESIGN.md invariant 3), and only then nudges the directory.

**Nothing depends on the loan.** The directory keeps every poll it lent and answers it itself if the coordinator
did not within :data:`~.directory.LEND_GRACE_S` (a coordinator that died, or one that never took it: a poll for
another session, or beyond :data:`MAX_HELD`), at its deadline, or when the session is terminal. A poll answered
twice is told apart by its ``request_id``: the reader (:meth:`ouroactors.sessions.Sessions.read`) takes only the
answer to the request it made. The nudge after a commit (or after answering a poll on its arrival) names the
request ids the coordinator answered (``Committed.served``), and the directory forgets exactly those: a poll the
coordinator never took (it was starting, or the poll was not its session's) stays with the directory.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .messages import Committed, EventsRead, ReadEvents, StopReading
from .trace import mark
from .workflow import is_terminal

if TYPE_CHECKING:
    from .quiet import QuietMarker
    from .record import SessionRecord
    from .store import SessionStore

MAX_HELD = 256  # polls held at once (and ids named in one nudge); more are left to the directory


@dataclass
class _Held:
    reply_to: Any
    request: ReadEvents
    deadline: float
    cursor: int  # the last cursor sent to this follower (a stream's position; the poll's ``after`` at first)
    answered: bool = False


class Following:
    """See the module docstring."""

    if TYPE_CHECKING:  # what the coordinator provides
        session_id: str
        store: SessionStore
        directory: Any
        held: list[_Held]
        served: list[str]
        quiet: QuietMarker | None

        def send(self, target: Any, message: Any) -> None: ...
        def _read(self) -> SessionRecord: ...

    def _follow(self, reply_to: Any, request: ReadEvents) -> None:
        """A poll lent by the directory: answered now if its events are durable already, else held."""
        if request.session_id != self.session_id or len(self.held) >= MAX_HELD:
            return  # not this session's (or too many): the directory, which holds it too, answers it
        mark("lent_rx", request.after)
        if self.quiet is not None and not self.quiet.want(True):
            return  # runtimes would not wake this coordinator for it: the directory, which holds it too, answers it
        held = _Held(reply_to, request, time.monotonic() + request.wait_s, request.after)
        record = self._read()  # after the marker went (see .quiet): a commit it misses wakes this coordinator
        if self._send_to(held, record):
            self.held.append(held)
        if held.answered and self.directory is not None:  # answered on arrival: the directory forgets it
            self.send(self.directory, Committed(self.session_id, record.committed_cursor, self._take_served()))
        self._sync_wakes()

    def _unfollow(self, stop: StopReading) -> None:
        """A held stream's reader is done with it (:class:`~.messages.StopReading`, checked by the directory that
        forwards it): no more answers to it. Matched by request id and principal, not by address: the stop comes
        from the reader's own sending endpoint, not the one its answers go to."""
        if stop.session_id == self.session_id and stop.request_id:
            self.held = [h for h in self.held if (h.request.request_id, h.request.principal)
                         != (stop.request_id, stop.principal)]
            self._sync_wakes()

    def _sync_wakes(self) -> None:
        """Wake-ups at every commit only while a lent follower is held here or a nudge is due (see .quiet)."""
        if self.quiet is not None:
            self.quiet.want(bool(self.held or self.served))

    def _take_served(self) -> tuple[str, ...]:
        """The request ids answered since the last nudge (the nudge after each commit carries them)."""
        served, self.served = tuple(self.served), []
        self._sync_wakes()
        return served

    def _nudge_wanted(self) -> bool:
        """Whether the nudge after a commit is worth its message: it names lent polls answered since the last one,
        or no stream is held here (the followers, if any, wait at the directory). While a stream is served from
        here the directory has nothing to do at each commit; a reader that is not lent (none is, once the
        directory knows this coordinator) is answered at the directory's tick."""
        return bool(self.served) or not any(h.request.stream for h in self.held)

    def _serve_held(self, record: SessionRecord, *, durable: bool = False) -> None:
        """After a commit (``record``: what it made visible; ``durable``: what a commit of ours that returned wrote,
        so on disk already): send every follower what it lacks."""
        if self.held:
            self.held = [h for h in self.held if self._send_to(h, record, durable)]
            self._sync_wakes()

    def _prune_held(self) -> None:
        """At each heartbeat: a stream past its deadline is ended (its reader polls again); a plain poll past its
        deadline is forgotten (the directory, which holds it too, answers it)."""
        now = time.monotonic()
        keep: list[_Held] = []
        for held in self.held:
            if held.deadline > now:
                keep.append(held)
            elif held.request.stream:
                self._answer(held, (), self._read(), final=True)
        self.held = keep
        self._sync_wakes()

    def _send_to(self, held: _Held, record: SessionRecord, durable: bool = False) -> bool:
        """Send ``held`` the events after its cursor, if any (or its end), up to ``record``'s cursor; whether it is
        still held after. ``durable``: ``record`` is known to be on disk (else what was read is flushed first)."""
        over = is_terminal(record.state) or time.monotonic() >= held.deadline
        while True:
            events = self.store.events(self.session_id, held.cursor, held.request.limit) \
                if record.committed_cursor > held.cursor else []
            # never beyond the record the answer reports: a commit that landed since ``record`` was read (a carried
            # one) is served with its own record, at its wake-up
            events = [event for event in events if event.cursor <= record.committed_cursor]
            if not events and not over:
                return True
            if not durable:
                self.store.durable()  # what was read may be another process's commit not yet on disk
            caught_up = not events or events[-1].cursor >= record.committed_cursor
            # a plain poll ends with its first answer; a stream once it is over and has sent everything durable
            final = not held.request.stream or (over and caught_up)
            self._answer(held, events, record, final)
            if final:
                return False
            if caught_up:
                return True

    def _answer(self, held: _Held, events: Any, record: SessionRecord, final: bool) -> None:
        mark("held_tx", record.committed_cursor)
        self.send(held.reply_to, EventsRead(tuple(events), record.committed_cursor, record.state.value,
                                            held.request.request_id, final))
        if events:
            held.cursor = events[-1].cursor
        if not held.answered and held.request.request_id and len(self.served) < MAX_HELD:
            self.served.append(held.request.request_id)
        held.answered = True


__all__ = ["MAX_HELD", "Following"]
