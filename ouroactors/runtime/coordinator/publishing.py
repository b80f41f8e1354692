"""Publication in the coordinator: checkpoint what the runtime produced, wake the followers, ack — in that order.

A mixin of :class:`~.actor.Coordinator`; the decisions are :mod:`.publication`'s (pure), this is the shell
that feeds them. **Where the events come from.** The runtime pushes every event it emits in an
:class:`~ouroactors.runtime.execution.messages.OutputReady` (:data:`.runtimes.PUSH`); the coordinator keeps them
by cursor and checkpoints those that follow the committed cursor, with no round trip. A drain
(``DrainOutput``) is the fallback: for a gap (a push lost to a restart, events made before an adopting
coordinator re-subscribed), and at every poll, heartbeat and adoption, so nothing depends on a push arriving.

**Carried events.** A tool call's events are usually committed by the runtime itself, inside the ledger
transactions of the call's start and settlement (:func:`.publication.carry`), and pushed only then: they arrive
at or below the committed cursor, and the coordinator publishes them without a commit of its own
(:meth:`Publisher._publish_carried`). A checkpoint of ours that such a carry overtook is refused with
:class:`~.publication.CursorMoved` inside its transaction and planned again from the record.

**Publish = the commit.** Subscribers read the durable log (the directory answers them from the store), so
nothing reaches a reader before its checkpoint is durable. After each checkpoint the coordinator sends the
directory :class:`~.messages.Committed`, which answers that session's waiting followers at once instead of at
the directory's follow tick; a lost nudge costs one tick, never an event.

**Acks are lazy.** The ack only frees the runtime's buffer: a re-drain of committed events is dropped by
:func:`.publication.plan`, and the runtime's ``acked`` never passes the durable cursor. Acking every checkpoint
cost a round trip that waits for the runtime's trio thread and, worse, held the runtime's actor thread in that
wait while its next push queued behind it. So a checkpoint is acked when :data:`ACK_EVERY` events went unacked,
when the turn settles or waits (before the runtime is closed), at each heartbeat — and a runtime's first
checkpoint is acked at once, so a runtime learns early that its reader commits (and a crash at its first ack
lands mid-turn, where the crash enumeration has always put it).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from ...authorities.storage.commit import Committed as Durable
from ...core import clock, faults
from ...core.errors import CommitOutcomeUnknown, CommitRejected, StaleGeneration
from ..execution.journal import Batch as JournalBatch
from ..execution.journal import Journal
from ..execution.journal_format import head_key
from ..execution.messages import AckOutput, DrainOutput
from ..execution.output import Batch, OutputEvent
from .calls import Ask, Gone, Job, OffThread
from .messages import Committed
from .publication import SETTLED_KIND, Abandon, CursorError, CursorMoved, Reconcile, after_commit, plan
from .trace import mark
from .workflow import Event, State

if TYPE_CHECKING:
    from .record import SessionRecord
    from .runtimes import _Attached
    from .store import SessionStore

log = logging.getLogger("ouroactors.coordinator")

DRAIN_LIMIT = 256
DRAIN_TIMEOUT_S = 2.0
ACK_EVERY = 128  # unacked events at most before a checkpoint is acked at once (the runtime's buffer holds 1024)
# The status of the turn_settled a coordinator writes for a turn its session's end cut short (Publisher._end_session)
SETTLED_AS = {Event.CANCEL: "cancelled", Event.FAIL: "failed"}
# A named boundary for crash enumeration (ouroactors.faults.session_enumerate); free unless a plan is armed.
ACKED = faults.register_point("coordinator.acked", "a checkpoint is durable and acked to the runtime")


class Publisher:
    """See the module docstring."""

    if TYPE_CHECKING:  # what the coordinator provides
        session_id: str
        incarnation: str
        path: str
        store: SessionStore
        attached: _Attached | None
        record: SessionRecord | None
        answered_asks: list[str]
        output_waiting: bool
        drain_wanted: bool
        acked: tuple[str, int]
        pushed: dict[int, OutputEvent]
        pushed_by: str
        published_through: int
        directory: Any

        def send(self, target: Any, message: Any) -> None: ...
        def stop(self, reason: Any = None) -> None: ...
        def _read(self) -> SessionRecord: ...
        def _transition(self, record: SessionRecord, event: Event, **changes: Any) -> SessionRecord: ...
        def _heartbeat(self, drain: bool = True) -> Job: ...
        def _runtime_ask(self, message: Any, timeout_s: float = ..., to: _Attached | None = None) -> Ask: ...
        def _close_runtime(self, settle: bool = True) -> Job: ...
        def _close_and_reap(self) -> Job: ...
        def _recover(self) -> Job: ...
        def _check_waits(self, look: bool = False) -> Job: ...
        def _last_turn(self, record: SessionRecord) -> bool: ...
        def _approval_wait(self, record: SessionRecord, events: Any) -> tuple[Any, list[str]]: ...
        def _asked(self, record: SessionRecord, wait: Any) -> Any: ...
        def _serve_held(self, record: SessionRecord, *, durable: bool = False) -> None: ...
        def _take_served(self) -> tuple[str, ...]: ...
        def _nudge_wanted(self) -> bool: ...
        held: list[Any]
        served: list[str]
        def _wake_subscribers(self) -> None: ...

    def _publish_carried(self, record: SessionRecord, *, vouched: int = 0) -> None:
        """Publish what the runtime carried in its own commits (:func:`.publication.carry`): durable, so it goes to
        the followers now, as after a checkpoint of ours — without the commit. ``vouched``: the cursor the runtime's
        wake-ups said their returned commits made durable (what goes beyond it is flushed before it is sent)."""
        if record.committed_cursor <= self.published_through:
            return
        self.published_through = record.committed_cursor
        mark("carried", record.committed_cursor)
        self._serve_held(record, durable=record.committed_cursor <= vouched)
        # A carried commit comes at every step of a tool turn: the directory is nudged only for the followers held
        # here (every directory follower is lent once it knows this coordinator; one not lent is answered at the
        # directory's tick, and a reader of the log itself is woken by its FIFO). The checkpoints of ours nudge
        # as before.
        if self.directory is not None and (self.served or self.held) and self._nudge_wanted():
            self.send(self.directory, Committed(self.session_id, record.committed_cursor, self._take_served()))

    def _end_session(self, record: SessionRecord, event: Event, reason: str) -> SessionRecord:
        """Move the session to the terminal state ``event`` leads to (a cancel, a failure), with ``reason``.

        A turn the log shows started and not settled — it waited on an approval, its runtime was lost and recovery
        parked it, or it did not settle within the wait when it was interrupted — settles in the same transaction:
        a ``turn_settled`` written by the coordinator (``settled_by``), its status the terminal state's
        (``cancelled``, ``failed``) and the reason. So a subscriber sees every turn it saw start end, and the
        session's end is the log's last event; nothing can follow it (the state is terminal). Call it with no
        runtime attached: the settlement is the coordinator's because nobody else can write it any more."""
        assert self.attached is None, "a runtime is attached: its own settlement comes first"
        for _ in range(3):  # a runtime closed unsettled may have carried a last commit: plan again after it
            last = self.store.events(self.session_id, max(record.committed_cursor - 1, 0), 1)
            if not last or last[-1].kind == SETTLED_KIND:  # no turn, or the last one settled: the state moves alone
                return self._transition(record, event, reason=reason)
            settled = OutputEvent(cursor=record.committed_cursor + 1, kind=SETTLED_KIND, turn=last[-1].turn,
                                  data={"status": SETTLED_AS[event], "reason": reason, "settled_by": "coordinator"})
            batch = Batch((settled,), acked=record.committed_cursor, produced=settled.cursor, more=False)
            step_plan = plan(batch, record.committed_cursor, record.log_digest, record.conversation_digest)
            ended = _TurnEnded(self.store, self.session_id, settled)
            try:
                outcome = self.store.checkpoint(self.session_id, record.revision, step_plan,
                                                coordinator=self.incarnation, then=event, also=ended.put,
                                                reason=reason)
                break
            except CursorMoved:
                record = self._read()
        else:
            raise CommitRejected(f"{event.value}: the log kept moving while its turn was settled")
        ended.settle(outcome, self.path)
        if not isinstance(outcome, Durable):  # as a transition's: a refusal or an unknown outcome stops us
            error = CommitOutcomeUnknown if outcome.kind == "commit_outcome_unknown" else CommitRejected
            raise error(f"{event.value} with the turn's settlement: {outcome.reason}")
        self.record = outcome.value
        self.published_through = max(self.published_through, step_plan.cursor)
        self._wake_subscribers()
        self._serve_held(self.record, durable=True)
        if self.directory is not None:
            self.send(self.directory, Committed(self.session_id, step_plan.cursor, self._take_served()))
        return self.record

    def _pushed_batch(self, committed: int) -> Batch | None:
        """The pushed events that follow ``committed`` without a gap, as a batch (None: none follow it)."""
        if self.attached is None or self.pushed_by != self.attached.runtime_id:
            self.pushed = {}  # pushed by a runtime no longer attached: a replacement produces its own
            return None
        for cursor in [c for c in self.pushed if c <= committed]:
            del self.pushed[cursor]  # checkpointed already (by this job or by a drain)
        events: list[OutputEvent] = []
        while len(events) < DRAIN_LIMIT and (event := self.pushed.get(committed + len(events) + 1)) is not None:
            events.append(event)
        if not events:
            return None
        produced = max(self.pushed)
        return Batch(tuple(events), committed, produced, events[-1].cursor < produced)

    def _acked(self) -> int:
        """The highest cursor acked to the attached runtime; -1 before its first ack."""
        runtime, cursor = self.acked
        return cursor if self.attached is not None and runtime == self.attached.runtime_id else -1

    def _ack(self, cursor: int) -> Generator[Ask | OffThread, Any, bool]:
        """Ack ``cursor``; False when the runtime died while asked (:class:`.calls.Gone`): recovery is due."""
        assert self.attached is not None
        answer = yield self._runtime_ask(AckOutput(cursor))
        if isinstance(answer, Gone | StaleGeneration):  # stale: its port reached another actor (.runtimes.for_runtime)
            return False
        self.acked = (self.attached.runtime_id, max(self._acked(), cursor))
        mark("acked", cursor)
        faults.point(ACKED)
        return True

    def _publish(self, drain: bool | None = None) -> Job:
        """Checkpoint → nudge the directory → ack, until the runtime has nothing more (see the module docstring).

        The events come from the runtime's pushes when they follow the committed cursor (no round trip), else from
        a drain (a poll, a heartbeat, an adoption, or a push lost or not yet arrived: the drain says what is there).
        Acks are lazy (see the module docstring).
        """
        self.output_waiting = False
        drain = self.drain_wanted if drain is None else drain
        self.drain_wanted = False
        while self.attached is not None:
            record = self._read()
            wake = getattr(self, "wake", None)  # the runtime's wake-ups say what its returned commits made durable
            self._publish_carried(record, vouched=wake.vouched if wake is not None else 0)
            # carried events fill the runtime's buffer too: they are acked as our checkpoints are
            carried_unacked = record.committed_cursor - max(self._acked(), 0) >= ACK_EVERY
            if carried_unacked and not (yield from self._ack(record.committed_cursor)):
                yield from self._heartbeat(drain=False)
                return
            batch: Any = None if drain else self._pushed_batch(record.committed_cursor)
            if batch is None and not drain and not self.pushed:
                return  # everything pushed is checkpointed: nothing to drain
            if batch is None:
                mark("drain_tx", record.committed_cursor)
                batch = yield self._runtime_ask(DrainOutput(after=record.committed_cursor, limit=DRAIN_LIMIT),
                                                DRAIN_TIMEOUT_S)
                mark("drain_rx", f"{len(getattr(batch, 'events', ()))} {getattr(batch, 'produced', '?')}")
                drain = False
            if not isinstance(batch, Batch):
                log.warning("%s: drain answered %r: checking the runtime", self.path, batch)
                yield from self._heartbeat(drain=False)
                return
            try:
                step_plan = plan(batch, record.committed_cursor, record.log_digest, record.conversation_digest)
            except CursorError as exc:  # retrying cannot help (a crash loop would escalate): park, visibly
                yield from self._close_runtime()
                record = self._transition(record, Event.RUNTIME_LOST)
                self._transition(record, Event.PARK, reason=f"cursor: {exc}")
                return
            if step_plan.empty:
                return
            settled_as = next((e.data.get("status") for e in step_plan.events if e.kind == "turn_settled"), None)
            settled = settled_as is not None
            # an interrupted turn (a suspend) did not do what it was asked: it never completes a session, even its last
            then = None
            if settled:
                last = settled_as != "interrupted" and self._last_turn(record)
                then = Event.COMPLETE if last else Event.TURN_COMPLETE
            if settled_as == "ambiguous":  # a tool call's outcome is unknown: recovery reconciles it (see below)
                then = Event.EFFECT_UNKNOWN
            changes: dict[str, Any] = {}
            asks_left = self.answered_asks
            if not settled and record.state is State.RUNNING:
                wait, asks_left = self._approval_wait(record, step_plan.events)
                if wait is not None:  # asked before the event is visible (idempotent: a re-drain finds it)
                    asked = yield from self._asked(record, wait)
                    if asked is None:
                        log.warning("%s: grants did not take the approval request; drained again later", self.path)
                        return
                    if isinstance(asked, Exception):  # refused (no operator may answer, the queue is full, …): the
                        # call can be put to nobody, and the session says so rather than run for ever (see _asked)
                        yield from self._close_runtime()
                        record = self._transition(record, Event.RUNTIME_LOST)
                        tool = (wait.call or {}).get("tool")
                        self._transition(record, Event.PARK, reason=f"the approval of {tool} could not be asked: "
                                                                    f"{asked}"[:500])
                        return
                    then, changes = Event.WAIT_APPROVAL, {"waits": (wait,)}
            mark("commit_tx", step_plan.cursor)
            # beside the actor thread (OffThread): the pushes and polls that arrive during the commit are received,
            # and the next job takes them all in one transaction
            try:
                outcome = yield OffThread(functools.partial(
                    self.store.checkpoint, self.session_id, record.revision, step_plan, coordinator=self.incarnation,
                    then=then, **changes))
            except CursorMoved:  # the runtime carried some of these meanwhile: plan again from the record
                drain = False
                continue
            step = after_commit(step_plan, outcome)
            if isinstance(step, Reconcile):
                raise CommitOutcomeUnknown(f"checkpoint to cursor {step_plan.cursor}: {step.reason}")
            if isinstance(step, Abandon):
                log.error("%s: checkpoint rejected (%s): nothing published; drained again later", self.path,
                          step.reason)
                return
            self.record = outcome.value
            self.published_through = max(self.published_through, step_plan.cursor)
            mark("committed", step_plan.cursor)
            self._wake_subscribers()  # those reading the log themselves, and
            self._serve_held(self.record, durable=True)  # the lent polls: the shortest way from the commit to a reader
            if self.directory is not None and self._nudge_wanted():  # durable: its followers may read it now
                self.send(self.directory, Committed(self.session_id, step_plan.cursor, self._take_served()))
            self.answered_asks = asks_left
            if not settled and then is None and 0 <= self._acked() > step.ack - ACK_EVERY:
                drain = batch.more and self._pushed_batch(step.ack) is None
                continue  # the ack waits (see above); the loop's head ends the job when all is checkpointed
            if not (yield from self._ack(step.ack)) and not settled and then is None:
                yield from self._heartbeat(drain=False)  # it died mid-turn while asked: recovery now
                return
            if then is Event.EFFECT_UNKNOWN:  # recovering now: the effect's reconciler settles it, or it parks
                yield from self._close_and_reap()
                yield from self._recover()
                return
            if settled:  # a runtime gone after the commit is closed all the same: its lease is released
                yield from self._close_runtime()
                if then is Event.COMPLETE:
                    self.stop()  # the session is history: a transient child that ends normally is not restarted
                return
            if then is Event.WAIT_APPROVAL:  # durable now: the runtime goes away, its turn unsettled (re-run later)
                yield from self._close_runtime(settle=False)
                yield from self._check_waits()
                return
            drain = batch.more and self._pushed_batch(step.ack) is None


class _TurnEnded:
    """The settlement the coordinator writes (:meth:`Publisher._end_session`), in the session's journal too:
    a ``turn_ended`` record, put in the log's own transaction (``checkpoint(also=...)``). No runtime will write one,
    and a journal whose last turn never settles reads as a crash; written in a commit of its own after the log's,
    a coordinator killed between the two left the journal so. A session no runtime ever journaled gets none (its
    journal would begin with the end of a turn it never recorded). The journal is evidence, not a gate: its puts
    ride in a nested transaction, so a failed one loses the record (logged), never the checkpoint."""

    def __init__(self, store: SessionStore, session_id: str, settled: OutputEvent) -> None:
        self.anchor, self.key, self.turn = store.journal_anchor, head_key(session_id.encode()), settled.turn
        self.journal = Journal(store.env, session_id)
        self.journal.stage("turn_ended", {**settled.data, "cursor": settled.cursor}, turn=settled.turn,
                           at=clock.time_ns())
        self.batch: JournalBatch | None = None

    def put(self, txn: Any) -> None:
        """Inside the checkpoint's transaction, after the log's puts."""
        self.batch = None
        if txn.get(self.key, db=self.anchor) is not None:  # else never journaled: nothing to end in it
            self.batch = self.journal.put_staged(txn, isolate=True)

    def settle(self, outcome: Any, path: str) -> None:
        """The checkpoint's outcome, for the journal to account for; a committed log without the record is logged."""
        self.journal.settle_staged(self.batch, outcome)
        if isinstance(outcome, Durable) and self.batch is None and self.journal.degraded:
            log.warning("%s: the journal did not take the end of turn %s (its puts failed; the log has it)", path,
                        self.turn)


__all__ = ["ACKED", "ACK_EVERY", "DRAIN_LIMIT", "DRAIN_TIMEOUT_S", "Publisher"]
