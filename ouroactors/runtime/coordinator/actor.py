"""The coordinator of one logical session: the thin shell over the store and the pure decisions.

A child of ``agent/coordinator`` (``simple_one_for_one``: one per session, started by the session
directory, :mod:`.directory`, with the session id as its argument). It owns recovery, publication
and the runtime's admission; the live conversation belongs to a runtime, a child of
``agent/execution`` it asks that supervisor to start. Its work is a sequence of asks, written as
jobs (:mod:`.calls`), one at a time.

**Start = recovery** (:mod:`.recovering`): read the record back, claim it, probe the runtime the record
expects, and let :func:`.recovery.decide` choose — adopt that runtime, replace it, or park the session.

**Publication** (:mod:`.publishing` over the pure :mod:`.publication`): the events the runtime pushed (or a
drain after the committed cursor), plan, checkpoint (events, cursor and digests in one transaction; a
``turn_settled`` also moves the session to ``suspended`` in it; the commit runs on a thread beside the actor's,
:mod:`ouroactors.core.call_thread`, so pushes keep arriving meanwhile and the next checkpoint takes them together),
answer the followers the directory lent it (:mod:`.following`: each follower's stream gets the events read back
from the store), nudge the directory, ack (lazily) — "publish" is the commit becoming visible and nothing
reaches a reader before it is durable. A rejected commit acks and publishes nothing (the
batch stays in the runtime and is drained again); an unknown outcome crashes the coordinator.

**Workspace lease: the runtime is its owner.** The workspace authority watches the owner; a
coordinator crash must not turn the lease into a reservation while the runtime keeps working (that
is the adoption case), whereas a runtime's death must — so the runtime owns it.

**Liveness.** Thespian does not tell an actor that a non-child died, so while attached the coordinator asks the
execution supervisor every :data:`HEARTBEAT_S` about the runtime's child
(:meth:`.recovering.Recovering._heartbeat`): a new generation or another status means the runtime is gone, and
recovery runs. The heartbeat runs only between jobs, so an ask to the runtime asks the same question itself while it
goes unanswered (a watched ask, :mod:`.calls`, :meth:`.runtimes.RuntimeLink._runtime_ask`): a runtime that dies
while asked ends the job within about a second and recovery follows at once, not after the ask's timeout.

**Pushed publication, with a slow poll as a safety net.** The runtime is opened with this coordinator as its
subscriber (:data:`.runtimes.PUSH`): it posts an ``OutputReady`` carrying each event it emits, and the post
is sent from the runtime's actor thread (its outbox, :mod:`ouroactors.runtime.execution.bridge`), never from its
trio thread — sending from two threads is what once lost the runtime's answers. An adopted runtime's pushes went
to the dead incarnation that opened it, so adoption re-subscribes it (``SubscribeOutput``) and takes over the
lease it holds (closing it releases the lease, as for a runtime this incarnation opened: without that, a
coordinator killed after a partial checkpoint left the lease active and the next turn could not lease the root).
While attached the coordinator still drains every :data:`POLL_S` (1 s): a push lost to a restart, or a batch
whose checkpoint was rejected, is found there.
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from typing import Any

from thespian.actors import WakeupMessage, WatchMessage

from ...authorities.ledger.domain import Entry
from ...core import codec
from ...core.call_thread import CallThread
from ...core.errors import BadRequest, OuroactorsError
from ...supervision.calls import Asker
from ...supervision.protocol import AdminCall, Stamped
from ...supervision.worker import Worker
from ..execution.messages import OutputReady
from ..execution.output import OutputEvent
from . import publishing
from .calls import Ask, Jobs, Nap
from .commands import Commands, CoordinatorError, value_of
from .following import Following
from .messages import (
    COMMANDS,
    COORDINATOR_REQUESTS,
    ForSession,
    ReadEvents,
    Serving,
    SpareRuntime,
    StopReading,
    WhichSession,
)
from .publishing import Publisher
from .quiet import QuietMarker
from .record import AcceptedEvent, PublishedEvent, Recoverable, RejectedEvent, SessionRecord, check_id
from .recovering import CLAIMED as CLAIMED  # re-exported: registered beside the claim that reaches it
from .recovering import Recovering
from .runtimes import RuntimeLink, _Attached
from .store import SessionStore
from .trace import mark
from .waits import APPROVAL_POLL_S, TIMER_WAKEUP, Waits
from .wake import SubscriberWaker, WakeReader
from .workflow import Event, State, is_terminal

log = logging.getLogger("ouroactors.coordinator")

HEARTBEAT_S = 1.0
_HEARTBEAT = "coordinator:heartbeat"
_POLL = "coordinator:poll"
POLL_S = 1.0  # a safety net only: output is pushed (OutputReady), see "Pushed publication"


class Coordinator(Recovering, Publisher, Following, Waits, RuntimeLink, Commands, Worker):
    """One logical session; see the module docstring."""

    protocol = COORDINATOR_REQUESTS  # ForSession (the command inside too), WhichSession, OutputReady: at the door

    # ForSession comes only from the directory, which checked the request inside it at its own door.

    @classmethod
    def on_preload(cls) -> None:
        """Every coordinator is forked from its supervisor: the records it writes are planned there once (see
        :func:`ouroactors.core.codec.prepare`), not in each session's coordinator on its first command."""
        codec.prepare(SessionRecord, Recoverable, PublishedEvent, AcceptedEvent, RejectedEvent, Entry)

    def on_start(self, session_id: str, directory: Any = None) -> None:
        assert self.context is not None
        self.session_id = check_id(session_id, "session_id")
        if directory is not None and type(directory).__name__ != "ActorAddress":
            raise OuroactorsError(f"{self.path}: the directory that starts a coordinator passes its own address, "
                                  f"not {type(directory).__name__}")
        self.started_by = directory  # the directory whose offers of spare runtimes need no check (.spares)
        self.callers: list[tuple[Asker, int]] = []  # (caller, ticket) of commands received, not answered yet
        # (.commands: a stop answers them)
        self.begun: set[int] = set()  # tickets of the commands whose job began here (told the directory: Taken)
        for name in ("storage", "ledger", "execution"):
            if name not in self.authorities:
                raise OuroactorsError(f"{self.path}: no {name!r} before the coordinator in the tree")
        self.incarnation = f"c.{uuid.uuid4().hex[:20]}"
        self.store = SessionStore.open(self.context.data_dir, fence=self.authorities["storage"].generation)
        # checkpoint commits run beside the actor thread, which keeps receiving meanwhile (see .publishing)
        self.committer = CallThread(f"commit:{self.path}") if self.context.base == "multiproc" else None
        # the runtime's carried commits wake this loop through a FIFO (see .wake); pushes remain the fallback
        self.wake = WakeReader.open(self.context.data_dir, self.session_id) if self.committer is not None else None
        # while it serves nobody, it asks its runtime for no wake-up at all (see .quiet); no FIFO: nothing to skip
        self.quiet = QuietMarker.fresh(self.context.data_dir, self.session_id) if self.wake is not None else None
        self.subscribers = SubscriberWaker(self.context.data_dir, self.session_id)  # those reading the log themselves
        self.watched_fds = tuple(fd for fd in (getattr(self.committer, "fd", None), getattr(self.wake, "fd", None))
                                 if fd is not None)
        self.jobs = Jobs(self.send, self.wakeupAfter, self.committer.submit if self.committer is not None else None)
        self.attached: _Attached | None = None
        self.spare: SpareRuntime | None = None  # offered with the command being run (.spares); a start takes it
        self.spare_trusted = False  # offered by the directory that started this coordinator (.spares)
        self.record: SessionRecord | None = None
        self.output_waiting = False
        self.drain_wanted = False
        self.acked = ("", 0)  # (runtime id, the highest cursor acked to it): acks are lazy, see .publishing
        self.pushed: dict[int, OutputEvent] = {}  # events the runtime pushed, not yet checkpointed (by cursor)
        self.pushed_by = ""  # the runtime id those events came from
        self.published_through = 0  # the committed cursor followers were last served (see Publisher._publish_carried)
        self.directory: Any = None  # the session directory, told of each checkpoint (it holds the followers)
        self.held: list[Any] = []  # followers' polls the directory lent this coordinator (.following)
        self.served: list[str] = []  # request ids of lent polls answered since the last nudge (.following)
        self.polling = False
        self.released_lease: str | None = None  # the last lease this incarnation saw released (.runtimes)
        self.answered_asks: list[str] = []  # call digests of answered approvals the runtime decides by (.waits)
        self.beats = 0
        self._sync_wakes()
        self.jobs.submit(self._recover)
        self.wakeupAfter(timedelta(seconds=HEARTBEAT_S), payload=_HEARTBEAT)

    # -- dispatch -----------------------------------------------------------------------------------------

    def on_stop(self, reason: Any) -> None:
        self._answer_callers(reason)
        committer = getattr(self, "committer", None)
        if committer is not None:
            committer.close()
        for line in (getattr(self, "wake", None), getattr(self, "subscribers", None), getattr(self, "quiet", None)):
            if line is not None:
                line.close()

    def refused(self, message: Any, refusal: OuroactorsError) -> None:
        """A command forwarded after this coordinator crashed (or while it stops): its caller hears it, not only the
        directory that forwarded it (which cannot tell whose command it was), and sends it again — unless the
        directory tracks it and this was a crash: it never began here, and the directory forwards it to the
        coordinator that replaces this one (:meth:`~.commands.Commands._left_to_the_directory`)."""
        if isinstance(message, ForSession) and isinstance(message.request, COMMANDS) \
                and type(message.reply_to).__name__ == "ActorAddress":
            if self._left_to_the_directory(message.ticket, self._crash_reason):
                self._taken(message.ticket, returned=True)
                return
            self.send(message.reply_to, message.answer(refusal))
            self._taken(message.ticket, answered=True)  # the directory must not forward it again

    def on_message(self, message: Any, sender: Any) -> Any:
        if isinstance(message, WatchMessage):  # the commit thread is done (or a stray wake-up: nothing to take)
            done = self.committer.poll() if self.committer is not None else None
            if done is not None:
                self.jobs.finished(*done)
            if self.wake is not None and self.wake.fd in (message.ready or ()) and self.wake.drain():
                mark("wake_rx")
                # The runtime carried a commit (see .wake): durable, so its followers are served now, from the
                # record, even while a job runs (the turn's first events arrive while the send that started the
                # turn still waits for its answer); a publication job follows only if it has something to do.
                record = self.store.get(self.session_id)
                if record is not None:
                    self._publish_carried(record, vouched=self.wake.vouched)
                if self.attached is not None and (record is None or self.pushed or record.committed_cursor
                                                  - max(self._acked(), 0) >= publishing.ACK_EVERY):
                    self._want_publish(drain=False)  # pushed events wait, or acks are due: a job for them
            return None
        if isinstance(message, WakeupMessage):
            if message.payload == _HEARTBEAT:
                self.wakeupAfter(timedelta(seconds=HEARTBEAT_S), payload=_HEARTBEAT)
                self.beats += 1
                self._prune_held()
                if self.attached is not None and not self.jobs.busy:
                    self.jobs.submit(self._heartbeat)
                elif self.attached is None and not self.jobs.busy and self._wait_due_a_look():
                    self.jobs.submit(lambda: self._check_waits(look=True))
            elif message.payload == TIMER_WAKEUP:
                self.jobs.submit(self._check_waits)
            elif message.payload == _POLL:
                self.polling = False
                if self.attached is not None:
                    self._poll()
                    self._want_publish()
            else:
                self.jobs.offer(message.payload, None)
            return None
        if isinstance(message, OutputReady):
            mark("ready_rx", message.produced)
            attached = self.attached
            if attached is None or sender != attached.address or message.session_id != self.session_id:
                # a push is taken from the runtime attached, for this session, only: another's is refused, and a
                # late one of a runtime no longer attached changes nothing (its output is drained, never pushed in)
                return BadRequest("OutputReady", "runtime_id", f"is not the runtime session {self.session_id!r} "
                                  "is attached to (a push is taken from that runtime only)",
                                  repr(message.runtime_id))
            if message.runtime_id == attached.runtime_id:
                if self.pushed_by != message.runtime_id:  # another runtime's events are not this one's
                    self.pushed, self.pushed_by = {}, message.runtime_id
                for event in message.events:
                    self.pushed[event.cursor] = event
                self._want_publish(drain=not message.events)
            return None
        if isinstance(message, Nap):
            return None
        if isinstance(message, WhichSession):
            return Serving(self.session_id)
        if isinstance(message, ForSession):
            self.directory = sender  # the nudge after each checkpoint goes there (see _publish)
            if isinstance(message.request, ReadEvents):  # a lent poll: no job, it waits for the next commit
                self._follow(message.reply_to, message.request)
                return None
            if isinstance(message.request, StopReading):  # its reader is done with it
                self._unfollow(message.request)
                return None
            # a spare runtime offered with the command is its own (.spares); from another sender, checked before use
            trusted = self.started_by is not None and sender == self.started_by
            caller = Asker(message.reply_to, message.tag)  # answered as it asked the directory: tagged or bare
            self.callers.append((caller, message.ticket))
            self.jobs.submit(lambda: self._offering(message.spare, trusted, self._command(
                caller, message.request, message.ticket)))
            return None
        if self.jobs.offer(message, sender):
            return None
        log.debug("%s: unexpected %s from %s", self.path, type(message).__name__, sender)
        return None

    def _wait_due_a_look(self) -> bool:
        """A timer or a job's expiry at every heartbeat (a simulated clock may jump); an approval's answer every
        APPROVAL_POLL_S (the operator path nudges at once: this only finds a lost nudge or an answer grants gave
        itself)."""
        state = self.record.state if self.record is not None else None
        if state in (State.WAITING_TIMER, State.WAITING_JOB):  # a timer, or a job's expiry
            return True
        return state is State.WAITING_APPROVAL and self.beats % max(1, round(APPROVAL_POLL_S / HEARTBEAT_S)) == 0

    def _poll(self) -> None:
        """Drain again in :data:`POLL_S` (one timer at a time; it stops when no runtime is attached)."""
        if not self.polling:
            self.polling = True
            self.wakeupAfter(timedelta(seconds=POLL_S), payload=_POLL)

    def _want_publish(self, drain: bool = True) -> None:
        """A publication job, unless one is queued already (a queued job publishes what arrives until it runs);
        ``drain`` False: only pushed events are waiting, no drain unless they do not follow the cursor."""
        self.drain_wanted = self.drain_wanted or drain
        if not self.output_waiting:
            self.output_waiting = True
            self.jobs.submit(self._publish)

    # -- helpers --------------------------------------------------------------------------------------------

    def _authority(self, name: str, payload: Any, timeout_s: float = 10.0) -> Ask:
        entry = self.authorities[name]
        return Ask(entry.address, Stamped(entry.generation, payload), timeout_s)

    def _execution(self, call: AdminCall, timeout_s: float = 30.0) -> Ask:
        return Ask(self.authorities["execution"].address, call, timeout_s)

    def _read(self) -> SessionRecord:
        record = self.store.get(self.session_id)
        if record is None:
            raise CoordinatorError(f"session {self.session_id!r} has no record")
        self.record = record
        return record

    def _transition(self, record: SessionRecord, event: Event, **changes: Any) -> SessionRecord:
        self.record = value_of(self.store.transition(self.session_id, record.revision, event,
                                                   coordinator=self.incarnation, **changes), f"{event.value}")
        if is_terminal(self.record.state):  # subscribers reading the log themselves stop once it is terminal
            self._wake_subscribers()
        return self.record

    def _wake_subscribers(self) -> None:
        """Tell the subscribers that read the session's log themselves (:mod:`.direct_follow`) of a commit of ours
        that returned: the cursor it made durable (the record's)."""
        cursor = self.record.committed_cursor if self.record is not None else 0
        self.subscribers.wake(cursor)


__all__ = ["HEARTBEAT_S", "Coordinator", "CoordinatorError"]
