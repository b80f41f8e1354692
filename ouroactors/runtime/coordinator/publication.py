"""Commit before publish, as a small pure state machine (DESIGN.md invariant 3).

The order for every batch the coordinator drains from its runtime::

    drain(after=committed) -> plan()           decide what to commit; refuse gaps and disorder
    store.checkpoint(plan)  -> outcome         cursor, digests and the events, in ONE transaction
    after_commit(plan, outcome)                committed: ack then publish; rejected: nothing;
                                               unknown: stop and reconcile by reading back

A failed commit publishes nothing and acks nothing, so the runtime keeps the batch and the next
drain (after recovery if need be) offers it again. Cursors never go back: events at or below the
committed cursor are already part of the session (a redrain after a crash between commit and ack)
and are dropped from the plan, not committed twice; a batch whose first new event is beyond
``committed + 1`` is refused (:class:`CursorGap`) — committing it would hide the missing events.

**Where subscribers read from.** The committed events themselves are written to the session's
event log in the checkpoint's transaction (not derived later from the runtime): the runtime drops
what was acknowledged, and a replacement runtime starts from the checkpoint, so after an ack the
log is the only durable copy. Writing both in one transaction is what lets a subscriber resume
from any cursor with no gap and no duplicate across coordinator and runtime restarts: the log and
the cursor can never disagree. Live delivery is only a hint to read the log (:class:`Follower`).

**Carried checkpoints.** The coordinator is not the only process that may commit a checkpoint: the attached
runtime commits a tool call's events inside the ledger transaction that records the call's start anyway
(:func:`carry` decides, :mod:`ouroactors.runtime.execution.carried` is the runtime's side). Without it every
event cost a second synced commit, the coordinator's, racing the runtime's own for the disk, one process hop
after the event existed. A carried checkpoint is fenced *inside* its transaction by the session record: the
session must be running on exactly that runtime id and generation, and the events must follow the committed
cursor — so a zombie runtime, a session moved to recovery, or a gap commits nothing. It moves only the checkpoint
fields (cursor, log digest), never the state nor the revision (the coordinator's compare-and-set token), and never
an event the coordinator decides on (:data:`DECIDED_BY_COORDINATOR`): those stay the coordinator's to commit with
the transition they cause. A coordinator whose plan was overtaken by a carried checkpoint is told
:class:`CursorMoved` and plans again from the record.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ...core.codec import digest_of
from ...core.errors import OuroactorsError
from ..execution.output import Batch, OutputEvent
from ..execution.repeats import RESUMED

__all__ = [
    "DECIDED_BY_COORDINATOR",
    "Abandon",
    "CarryRefused",
    "CursorError",
    "CursorGap",
    "CursorMoved",
    "Follower",
    "Plan",
    "Publish",
    "Reconcile",
    "after_commit",
    "carry",
    "chain",
    "plan",
    "reconciled",
    "unsettled_turn",
]

GENESIS = ""  # the log digest of a session with no committed event
SETTLED_KIND = "turn_settled"
# Events the coordinator acts on when it commits them (the turn's end moves the workflow; an approval is asked of
# grants before it is visible; a re-run's marker names the answered asks it did not publish again, which the
# coordinator counts): a runtime never carries them, nor anything after them.
DECIDED_BY_COORDINATOR = frozenset({SETTLED_KIND, "approval_needed", RESUMED})


class CursorError(OuroactorsError):
    """A batch cannot be committed as it stands (a gap, disorder, or a cursor that went back)."""


class CursorGap(CursorError):
    def __init__(self, committed: int, first: int) -> None:
        self.committed, self.first = committed, first
        super().__init__(f"batch starts at cursor {first} but the committed cursor is {committed}: "
                         f"events {committed + 1}..{first - 1} are missing; refusing to commit beyond a gap")

    def __reduce__(self) -> tuple[object, ...]:
        return (self.__class__, (self.committed, self.first))


class CursorMoved(CursorError):
    """The record's cursor went past the plan's start since the plan was made: a runtime carried those events.

    Not a fault: plan again from the record (the events it committed are dropped from the next plan)."""

    def __init__(self, planned_from: int, committed: int) -> None:
        self.planned_from, self.committed = planned_from, committed
        super().__init__(f"the plan starts after cursor {planned_from} but {committed} is committed already "
                         "(carried by the runtime): plan again")

    def __reduce__(self) -> tuple[object, ...]:
        return (self.__class__, (self.planned_from, self.committed))


class _Event(Protocol):
    @property
    def cursor(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def turn(self) -> int: ...
    @property
    def data(self) -> dict[str, Any]: ...


def chain(previous: str, events: Iterable[_Event]) -> str:
    """The log digest after ``events``: ``sha256(previous || canonical(cursor, kind, turn, data))`` each."""
    digest = previous
    for event in events:
        body = digest_of([event.cursor, event.kind, event.turn, event.data])
        digest = hashlib.sha256(f"{digest}:{body}".encode()).hexdigest()
    return digest


@dataclass(frozen=True)
class Plan:
    """What one checkpoint commits: the new cursor, both digests, and the events it makes public."""

    committed_before: int
    cursor: int
    log_digest: str
    conversation_digest: str
    events: tuple[OutputEvent, ...]

    @property
    def empty(self) -> bool:
        return not self.events


def unsettled_turn(last: _Event | None) -> int:
    """The turn the committed log has not seen settle, from its ``last`` event (None: the log is empty)."""
    if last is None:
        return 1
    return last.turn + 1 if last.kind == SETTLED_KIND else last.turn


def plan(batch: Batch, committed: int, log_digest: str, conversation_digest: str) -> Plan:
    """Decide the checkpoint for ``batch`` given what is committed; refuse what would break the log.

    ``batch.acked`` above ``committed`` means the runtime was told of a commit the record does not
    hold (a cursor went back): refused. Events must be contiguous and strictly increasing.
    """
    if batch.acked > committed:
        raise CursorError(f"the runtime says cursor {batch.acked} was acknowledged but the durable committed "
                          f"cursor is {committed}: the checkpoint went back (or belongs to another session)")
    fresh = [event for event in batch.events if event.cursor > committed]
    expected = committed + 1
    for event in fresh:
        if event.cursor != expected:
            if event is fresh[0]:
                raise CursorGap(committed, event.cursor)
            raise CursorError(f"batch is not contiguous: cursor {event.cursor} where {expected} was due")
        expected += 1
    cursor = fresh[-1].cursor if fresh else committed
    conversation = conversation_digest
    for event in fresh:
        value = event.data.get("conversation_digest") if event.kind == SETTLED_KIND else None
        if isinstance(value, str):
            conversation = value
    return Plan(committed, cursor, chain(log_digest, fresh), conversation, tuple(fresh))


@dataclass(frozen=True)
class CarryRefused:
    """A runtime may not carry these events now; ``reason`` says why (they stay for the coordinator to commit)."""

    reason: str


class _Attachment(Protocol):
    @property
    def runtime_id(self) -> str: ...
    @property
    def generation(self) -> int: ...


class _Record(Protocol):
    @property
    def state(self) -> Any: ...
    @property
    def runtime(self) -> _Attachment | None: ...
    @property
    def committed_cursor(self) -> int: ...
    @property
    def log_digest(self) -> str: ...
    @property
    def conversation_digest(self) -> str: ...


def carry(record: _Record, runtime_id: str, generation: int, events: Sequence[OutputEvent]) -> Plan | CarryRefused:
    """The checkpoint runtime ``runtime_id`` (``generation``) may commit for ``events`` in its own transaction.

    ``record`` is the session record as that transaction reads it. Refused unless the session runs on exactly this
    runtime; events at or below the committed cursor are dropped (committed by the coordinator meanwhile); the rest
    must follow the cursor without a gap, and stop before the first event the coordinator decides on. An empty plan
    means there is nothing left to carry.
    """
    if getattr(record.state, "value", record.state) != "running":
        return CarryRefused(f"the session is {getattr(record.state, 'value', record.state)}, not running")
    attached = record.runtime
    if attached is None or (attached.runtime_id, attached.generation) != (runtime_id, generation):
        return CarryRefused("the session is not attached to this runtime (id and generation)")
    committed = record.committed_cursor
    fresh: list[OutputEvent] = []
    for event in events:
        if event.cursor <= committed:
            continue
        if event.kind in DECIDED_BY_COORDINATOR:
            break
        if event.cursor != committed + len(fresh) + 1:
            if not fresh:
                return CarryRefused(f"event {event.cursor} does not follow the committed cursor {committed}")
            break
        fresh.append(event)
    cursor = fresh[-1].cursor if fresh else committed
    return Plan(committed, cursor, chain(record.log_digest, fresh), record.conversation_digest, tuple(fresh))


@dataclass(frozen=True)
class Publish:
    """The commit is durable: ack ``ack`` to the runtime, then publish ``events`` (in this order)."""

    ack: int
    events: tuple[OutputEvent, ...]


@dataclass(frozen=True)
class Abandon:
    """Definitely not written: ack nothing, publish nothing; drain again from the committed cursor."""

    reason: str


@dataclass(frozen=True)
class Reconcile:
    """The outcome is unknown: stop; on restart read the record back (:func:`reconciled`) before anything else."""

    reason: str


Step = Publish | Abandon | Reconcile


def after_commit(step_plan: Plan, outcome: Any) -> Step:
    """The next step after the store answered ``outcome`` (a storage commit-contract outcome)."""
    kind = getattr(outcome, "kind", None)
    if kind == "committed":
        return Publish(step_plan.cursor, step_plan.events)
    if kind == "rejected":
        return Abandon(str(outcome.reason))
    if kind == "commit_outcome_unknown":
        return Reconcile(str(outcome.reason))
    raise TypeError(f"not a commit outcome: {outcome!r}")


def reconciled(step_plan: Plan, durable_cursor: int, durable_log_digest: str) -> bool:
    """After an unknown outcome: did the checkpoint land? (read the record back and ask this).

    True when the durable record holds exactly the plan's cursor and digest; False when it still
    holds the state before it. Anything else means another writer moved the session: an error.
    """
    if durable_cursor == step_plan.cursor and durable_log_digest == step_plan.log_digest:
        return True
    if durable_cursor == step_plan.committed_before:
        return False
    raise CursorError(f"reconciling checkpoint {step_plan.committed_before}->{step_plan.cursor}: the record holds "
                      f"cursor {durable_cursor}, neither before nor after it (another writer moved the session)")


class Follower:
    """A subscriber's position: deliver each cursor once, in order, whatever arrives live.

    ``offer`` takes events pushed live (possibly duplicated or out of order after a restart) and
    returns those to deliver now; when it sees a gap it returns nothing and sets ``gap_from``: the
    subscriber reads the durable log from there (``store.events(after=last)``) and offers those.
    """

    def __init__(self, after: int = 0) -> None:
        if after < 0:
            raise CursorError(f"a subscriber cursor is >= 0, not {after}")
        self.last = after
        self.gap_from: int | None = None

    def offer(self, events: Sequence[_Event]) -> list[_Event]:
        out: list[_Event] = []
        for event in sorted(events, key=lambda e: e.cursor):
            if event.cursor <= self.last:
                continue  # a duplicate: already delivered
            if event.cursor != self.last + 1:
                self.gap_from = self.last + 1
                break
            out.append(event)
            self.last = event.cursor
        else:
            self.gap_from = None
        return out
