"""The durable records of a logical session (canonical msgpack via :mod:`ouroactors.core.codec`).

A :class:`SessionRecord` is the coordinator's checkpoint: everything recovery needs to decide,
from durable state alone, what may safely continue (seed 001 "Persist a replayable history").
It is written only by :class:`~.store.SessionStore`, each write a compare-and-set on ``revision``.

Two counters, on purpose:

* ``state_version`` grows on every **workflow transition** (:mod:`.workflow`). Resume events name
  it: an approval issued while the session waited at version 7 is stale once the session moved.
* ``revision`` grows on **every mutation** (transitions, checkpoints, attachments). It is what a
  write compares-and-sets, so two coordinators of one session can never both win — and a
  checkpoint of published output does not make a pending user message stale.

Identifiers are restricted (:data:`ID_PATTERN`) because they are parts of LMDB keys: a ``/`` or a
NUL inside one would let one session's key range overlap another's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import Field, field_validator

from ...core.codec import Record
from .workflow import State

__all__ = [
    "ID_PATTERN",
    "WAIT_KINDS",
    "AcceptedEvent",
    "PendingWait",
    "PinnedVersions",
    "PublishedEvent",
    "Recoverable",
    "RejectedEvent",
    "ResumeApplied",
    "RuntimeAttachment",
    "SessionRecord",
    "Sweep",
    "WorkspaceLease",
    "approval_of_wait",
    "approval_wait_id",
    "check_id",
]

ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+-]{0,127}")
WAIT_KINDS = ("approval", "timer", "external_job")
MAX_WAITS = 64
MAX_WAIT_TEXT = 8000


def check_id(value: str, what: str) -> str:
    """``value`` if it is a usable identifier (key-safe), else ValueError naming ``what``."""
    if type(value) is not str or ID_PATTERN.fullmatch(value) is None:
        raise ValueError(f"{what}: {value!r} is not an identifier (1-128 of [A-Za-z0-9._:@+-], "
                         "starting with a letter or digit)")
    return value


class PinnedVersions(Record):
    """The versions a session runs under; a resumed turn uses these, not whatever is newest."""

    SCHEMA: ClassVar[str] = "coordinator.pinned"
    prompt: str
    model: str
    tools: str
    workflow: str
    policy: str


class WorkspaceLease(Record):
    """The workspace lease the session holds (the workspace authority's id, root and fencing token)."""

    SCHEMA: ClassVar[str] = "coordinator.lease"
    lease_id: str
    root: str
    fencing_token: int = Field(ge=0)


class RuntimeAttachment(Record):
    """The runtime a running session is attached to: its id and generation (a restart is a new one)."""

    SCHEMA: ClassVar[str] = "coordinator.runtime"
    runtime_id: str
    generation: int = Field(ge=1)


class PendingWait(Record):
    """An obligation the session waits on.

    ``wait_id`` is the approval id, the timer id or the job id; ``due_ns`` (wall clock of
    :mod:`ouroactors.core.clock`) is when a timer fires, or when an external job expires (every job wait
    has an expiry: :data:`.waits.JOB_EXPIRY_S` unless the wait names one);
    ``authorized`` names who may answer it (verified actor names; empty: any verified operator);
    ``proposal_digest`` binds an approval to the exact proposal it was asked for, and ``call`` keeps that
    proposal (tool, arguments, call id) so a coordinator that restarts can still ask for it; ``text`` is
    the message the turn after a timer or a job starts with (see :mod:`.waits`).
    """

    SCHEMA: ClassVar[str] = "coordinator.wait"
    kind: str
    wait_id: str
    issued_at_version: int = Field(ge=0)
    due_ns: int | None = Field(default=None, ge=0)
    authorized: tuple[str, ...] = ()
    proposal_digest: str | None = None
    call: dict[str, Any] | None = None
    text: str | None = Field(default=None, max_length=MAX_WAIT_TEXT)

    @field_validator("kind")
    @classmethod
    def _kind(cls, value: str) -> str:
        if value not in WAIT_KINDS:
            raise ValueError(f"kind must be one of {WAIT_KINDS}, not {value!r}")
        return value

    @field_validator("wait_id")
    @classmethod
    def _wait_id(cls, value: str) -> str:
        return check_id(value, "wait_id")


_APPROVAL_WAIT = re.compile(r"ask\.v(\d{1,18})\.([0-9a-f]{16})")


def approval_wait_id(version: int, proposal_digest: str) -> str:
    """The id of an approval wait asked at state ``version`` for the proposal with ``proposal_digest``: the one
    ``session show`` prints, and which names the approval as surely as its own id (:func:`approval_of_wait`)."""
    return f"ask.v{version}.{proposal_digest[:16]}"


def approval_of_wait(approvals: list[Any], given: str) -> Any | None:
    """The approval ``given`` names: its own id (``approval-…``), or the id of the wait it answers (``ask.vN.…``,
    :func:`approval_wait_id`: the version and the call's digest, so it cannot name another call or an older ask).
    None if none does."""
    for approval in approvals:
        if approval.approval_id == given:
            return approval
    wait = _APPROVAL_WAIT.fullmatch(given)
    if wait is None:
        return None
    version, prefix = int(wait.group(1)), wait.group(2)
    found = [a for a in approvals if a.state_version == version and str(a.call_digest).startswith(prefix)]
    return found[-1] if found else None


class SessionRecord(Record):
    """One logical session (key: ``session_id`` in the ``sessions`` database)."""

    SCHEMA: ClassVar[str] = "coordinator.session"
    session_id: str
    node: str
    state: State
    state_version: int = Field(ge=0)
    revision: int = Field(ge=0)
    pinned: PinnedVersions
    principal: str  # who owns the session (its messages are this actor's)
    tenant: str
    channels: tuple[str, ...]  # where resume events may come from
    workspace: WorkspaceLease | None = None
    runtime: RuntimeAttachment | None = None
    last_generation: int = Field(default=0, ge=0)  # the highest runtime generation ever attached
    committed_cursor: int = Field(default=0, ge=0)
    log_digest: str = ""  # chain over the committed events (see publication.chain)
    conversation_digest: str = ""  # the runtime's, from the last committed turn_settled event
    waits: tuple[PendingWait, ...] = ()
    coordinator: str = ""  # the incarnation that claimed the session last
    created_ns: int = 0
    updated_ns: int = 0
    reason: str | None = None  # why it is parked or failed
    resumed_by: str | None = None  # the id of the resume event accepted last (see store.accepted)

    @field_validator("session_id", "node")
    @classmethod
    def _ids(cls, value: str) -> str:
        return check_id(value, "session id or node")

    @field_validator("waits")
    @classmethod
    def _waits(cls, value: tuple[PendingWait, ...]) -> tuple[PendingWait, ...]:
        if len(value) > MAX_WAITS:
            raise ValueError(f"at most {MAX_WAITS} pending waits, not {len(value)}")
        if len({w.wait_id for w in value}) != len(value):
            raise ValueError("wait ids must be unique")
        return value

    def wait(self, wait_id: str) -> PendingWait | None:
        return next((w for w in self.waits if w.wait_id == wait_id), None)

    def timer_due(self) -> int | None:
        """The earliest due time of the waits that come due by themselves — timers, and the expiry of an external
        job (what the timer index holds; approvals expire in the grants authority, which answers them)."""
        dues = [w.due_ns for w in self.waits if w.kind in ("timer", "external_job") and w.due_ns is not None]
        return min(dues) if dues else None


class Recoverable(Record):
    """The boot sweep's projection of a non-terminal session (``sessions_live``), small to read.

    It holds what changes with the coordinator's transitions only — not the committed cursor (version 1 did): a
    checkpoint a runtime carries moves the cursor alone, so it leaves the projection as it was and its synced commit
    writes one B-tree page fewer (the sweep never read the cursor from here)."""

    SCHEMA: ClassVar[str] = "coordinator.recoverable"
    VERSION: ClassVar[int] = 2  # 2: no committed_cursor
    session_id: str
    state: State
    state_version: int
    revision: int
    runtime_id: str | None
    generation: int | None
    updated_ns: int
    reason: str | None

    @classmethod
    def upgrade(cls, version: int, values: list[Any]) -> list[Any]:
        if version == 1 and len(values) == 9:  # [..., generation, committed_cursor, updated_ns, reason]
            return [*values[:6], *values[7:]]
        return super().upgrade(version, values)

    @classmethod
    def of(cls, record: SessionRecord) -> Recoverable:
        runtime = record.runtime
        return cls(session_id=record.session_id, state=record.state, state_version=record.state_version,
                   revision=record.revision, runtime_id=runtime.runtime_id if runtime else None,
                   generation=runtime.generation if runtime else None, updated_ns=record.updated_ns,
                   reason=record.reason)


class PublishedEvent(Record):
    """One committed output event, as subscribers read it (``session_events``: session/cursor)."""

    SCHEMA: ClassVar[str] = "coordinator.event"
    VERSION: ClassVar[int] = 2  # 2: ``carried`` (version 1 events were all committed by the coordinator)
    cursor: int = Field(ge=1)
    kind: str
    turn: int
    data: dict[str, Any]
    generation: int  # the runtime generation that produced it
    committed_ns: int
    carried: bool = False  # committed by the runtime in its own ledger transaction (publication.carry)

    @classmethod
    def upgrade(cls, version: int, values: list[Any]) -> list[Any]:
        if version == 1:
            return [*values, False]
        return super().upgrade(version, values)


class AcceptedEvent(Record):
    """A resume event that was accepted, with what it carried (``session_resume``: session/s/event id)."""

    SCHEMA: ClassVar[str] = "coordinator.accepted"
    VERSION: ClassVar[int] = 2  # 2: ``at_cursor``
    event_id: str
    kind: str
    actor: str
    channel: str
    wait_id: str | None
    payload: dict[str, Any]
    from_version: int
    at_ns: int
    # The session log's committed cursor when the event was accepted (in the same transaction): every event with a
    # larger cursor was committed after it. None in events accepted before version 2 (only their time is known).
    at_cursor: int | None = Field(default=None, ge=0)

    @classmethod
    def upgrade(cls, version: int, values: list[Any]) -> list[Any]:
        if version == 1:
            return [*values, None]
        return super().upgrade(version, values)


class RejectedEvent(Record):
    """A resume event that was refused, and why (``session_rejected``: session/sequence)."""

    SCHEMA: ClassVar[str] = "coordinator.rejected"
    seq: int = Field(ge=1)
    event_id: str
    kind: str
    actor: str
    channel: str
    code: str
    detail: str
    expected_version: int
    found_version: int
    at_ns: int


@dataclass(frozen=True)
class Sweep:
    """The boot sweep's answer: recoverable sessions, and ids whose projection is corrupt (reported)."""

    sessions: list[Recoverable]
    corrupt: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ResumeApplied:
    """A resume event's durable result: the record after it, or the rejection that was logged."""

    record: SessionRecord
    accepted: bool
    rejection: RejectedEvent | None = None
