"""Checking a resume event before it may move a session (pure; seed 001 "Resume against the current user and state").

A resume event — an approval answer, a timer firing, a job completion, a user message — is bound
to an actor, a channel, a session and the state version it was issued against. :func:`check`
answers :class:`Accept` (the workflow event to apply and the wait it settles) or :class:`Refuse`
with a :class:`Code`; the store applies either in one write transaction (an accepted event id is
remembered there, a refused one is appended to the session's rejected-events log).

The checks, in this order (the first failing one is the answer):

1. **scope** — the event names this session, one of its channels and its tenant;
2. **identity** — the actor the event claims is the one that was verified (:class:`VerifiedActor`
   is made only by :func:`verified_operator` from the data dir's operator credentials, by
   :mod:`.principals` for a principal its channel vouched for, or by the coordinator itself for
   timers and expiries); a claim proves nothing, and an event nobody verified is refused here;
3. **duplicates** — an event id accepted before is refused as a duplicate (before freshness, so a
   replay is named for what it is), and so is a job completion for a job that an accepted event completed
   before while the session waits on no job of that id now (each completion carries an id of its own, so the
   second one is found by its job: ``completed_by``);
4. **state** — a terminal session takes none; the event's kind must match what the session waits
   on (a message resumes only a suspended session, an approval answer only one waiting on it);
5. **freshness** — the expected state version must be the session's current one: a stale approval
   for an old version never resumes a session (the proposal may have changed since);
6. **ordering** — the wait it answers must be pending (an unknown or already-settled wait id is
   refused), a timer or a job's expiry must be due, an approval must answer the proposal it was issued
   for, and a job's completion must come before the job's expiry (``expired`` otherwise: the rule holds
   even before the coordinator applied the expiry);
7. **authority** — the actor may answer this wait (named in ``authorized``, or any operator when it
   names nobody; a message only from the session's principal; timers and expiries only from the system;
   a job from the system or the session's principal, who made the session wait on it). An approval the
   grants authority closed itself (deadline passed, orphan denied) comes from the system and admits nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from ...authorities.grants import operators as operator_credentials
from .record import PendingWait, SessionRecord, check_id
from .workflow import Event, State, is_terminal

__all__ = [
    "Accept",
    "ActorKind",
    "Code",
    "Kind",
    "Refuse",
    "ResumeEvent",
    "VerifiedActor",
    "check",
    "system_actor",
    "verified_operator",
    "verified_principal",
]

SYSTEM = "system:coordinator"


class Kind(str, Enum):
    APPROVAL = "approval"
    TIMER = "timer"
    JOB = "job"
    JOB_EXPIRY = "job_expiry"  # the system ends an external-job wait whose expiry passed
    MESSAGE = "message"


class ActorKind(str, Enum):
    OPERATOR = "operator"  # verified against operators.json
    PRINCIPAL = "principal"  # the session's owner, authenticated by its channel
    SYSTEM = "system"  # the coordinator itself (timers) or a job's completion callback it verified


class Code(str, Enum):
    SCOPE = "scope"
    IDENTITY = "identity"
    DUPLICATE = "duplicate"
    STATE = "state"
    STALE = "stale"
    ORDERING = "ordering"
    AUTHORITY = "authority"
    EXPIRED = "expired"


# What a message refused for the session's state may do instead (the refusal is recorded, and its text is what the
# sender reads): one clause per state a message cannot resume.
_INSTEAD: dict[State, str] = {
    State.RUNNING: "a steer adds to the running turn; a message is sent once the turn settles",
    State.WAITING_APPROVAL: "answer its approval first (session show names it)",
    State.WAITING_TIMER: "it resumes when its timer fires, or cancel it",
    State.WAITING_JOB: "it resumes when its job completes or expires, or cancel it",
    State.RECOVERING: "send it again once the recovery has suspended the session",
    State.PARKED: "settle what parked it (session show names it), then session resume",
}

_WAITS: dict[Kind, tuple[State, str, Event]] = {
    Kind.APPROVAL: (State.WAITING_APPROVAL, "approval", Event.APPROVAL_ANSWERED),
    Kind.TIMER: (State.WAITING_TIMER, "timer", Event.TIMER_FIRED),
    Kind.JOB: (State.WAITING_JOB, "external_job", Event.JOB_COMPLETED),
    Kind.JOB_EXPIRY: (State.WAITING_JOB, "external_job", Event.JOB_EXPIRED),
}


@dataclass(frozen=True)
class VerifiedActor:
    """An identity someone checked. Build it with the ``verified_*`` / :func:`system_actor` helpers."""

    name: str
    kind: ActorKind



def when(ns: int | None) -> str:
    """A wall-clock time in ns since the epoch as a reader wants it in a reason (UTC, to the millisecond, with the
    ns after it so nothing is lost); a value no calendar has is shown as it is."""
    if ns is None:
        return "never"
    try:
        stamp = datetime.fromtimestamp(ns / 1e9, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return str(ns)
    return f"{stamp} ({ns} ns)"

def verified_operator(operators: dict[str, str], name: str, token: str) -> VerifiedActor | None:
    """The operator ``name`` if ``token`` matches its credentials (``operators.json``), else None."""
    if operator_credentials.verify(operators, name, token):
        return VerifiedActor(name, ActorKind.OPERATOR)
    return None


def verified_principal(name: str) -> VerifiedActor:
    """The session's owner as its channel authenticated it (the channel's job, e.g. the local CLI user)."""
    return VerifiedActor(name, ActorKind.PRINCIPAL)


def system_actor() -> VerifiedActor:
    return VerifiedActor(SYSTEM, ActorKind.SYSTEM)


@dataclass(frozen=True)
class ResumeEvent:
    """What arrives: ``actor`` is only a claim until it matches the verified identity."""

    event_id: str
    kind: Kind
    session_id: str
    channel: str
    tenant: str
    actor: str
    expected_version: int
    wait_id: str | None = None  # the approval, timer or job it answers (None for a message)
    proposal_digest: str | None = None  # an approval answers this exact proposal
    payload: dict[str, Any] = field(default_factory=dict)  # decision, job result, message text

    def __post_init__(self) -> None:
        check_id(self.event_id, "event_id")
        object.__setattr__(self, "kind", Kind(self.kind))
        if type(self.expected_version) is not int or self.expected_version < 0:
            raise ValueError(f"expected_version: an int >= 0, not {self.expected_version!r}")


@dataclass(frozen=True)
class Accept:
    event: Event  # the workflow transition to apply
    wait: PendingWait | None  # the wait it settles (removed from the record)
    reason: str | None = None  # what the record's ``reason`` says after it (an expiry names the job)


@dataclass(frozen=True)
class Refuse:
    code: Code
    detail: str


def check(record: SessionRecord, event: ResumeEvent, actor: VerifiedActor | None, *, seen: bool,
          now_ns: int, completed_by: str | None = None) -> Accept | Refuse:
    """Decide whether ``event`` (from verified ``actor``; None: its channel verified nobody) may resume ``record``;
    see the module docstring. ``completed_by``: for a job event, what an accepted event said of its job before
    (the store looks it up only when no wait on that job is pending)."""
    if event.session_id != record.session_id:
        return Refuse(Code.SCOPE, f"event is for session {event.session_id!r}, not {record.session_id!r}")
    if event.tenant != record.tenant:
        return Refuse(Code.SCOPE, f"tenant {event.tenant!r} is not the session's")
    if event.channel not in record.channels:
        return Refuse(Code.SCOPE, f"channel {event.channel!r} is not one of the session's channels")
    if actor is None:
        return Refuse(Code.IDENTITY, f"event claims actor {event.actor!r}, whom its channel {event.channel!r} did not "
                                     "verify")
    if event.actor != actor.name:
        return Refuse(Code.IDENTITY, f"event claims actor {event.actor!r} but {actor.name!r} was verified")
    if seen:
        return Refuse(Code.DUPLICATE, f"event {event.event_id!r} was accepted before")
    if event.kind is Kind.JOB and completed_by is not None and record.wait(str(event.wait_id)) is None:
        return Refuse(Code.DUPLICATE, f"external job {event.wait_id!r} was completed already ({completed_by}); the "
                                      "session waits on no job of that id now")
    if is_terminal(record.state):
        return Refuse(Code.STATE, f"session is {record.state.value}: it takes no resume event")
    if event.kind is Kind.MESSAGE:
        if record.state is not State.SUSPENDED:
            instead = _INSTEAD.get(record.state)
            return Refuse(Code.STATE, f"a message resumes a suspended session; this one is {record.state.value}"
                                      + (f" ({instead})" if instead else ""))
    elif record.state is not _WAITS[event.kind][0]:
        expired = f"external job {event.wait_id!r} expired"
        if event.kind is Kind.JOB and record.reason is not None and record.reason.startswith(expired):
            return Refuse(Code.EXPIRED, f"{record.reason}: the session is {record.state.value} since")  # too late
        return Refuse(Code.STATE, f"a {event.kind.value} event answers a session waiting on it; "
                                  f"this one is {record.state.value}")
    if event.expected_version != record.state_version:
        return Refuse(Code.STALE, f"issued for state version {event.expected_version}, the session is at "
                                  f"{record.state_version}: ask again")
    if event.kind is Kind.MESSAGE:
        if actor.kind is not ActorKind.PRINCIPAL or actor.name != record.principal:
            return Refuse(Code.AUTHORITY, f"{actor.name!r} may not send messages to this session")
        return Accept(Event.MESSAGE, None)
    return _check_wait(record, event, actor, now_ns)


def _check_wait(record: SessionRecord, event: ResumeEvent, actor: VerifiedActor, now_ns: int) -> Accept | Refuse:
    _, wait_kind, transition = _WAITS[event.kind]
    wait = record.wait(event.wait_id) if event.wait_id is not None else None
    if wait is None or wait.kind != wait_kind:
        return Refuse(Code.ORDERING, f"no pending {wait_kind} wait {event.wait_id!r} (settled already, or never asked)")
    if event.kind in (Kind.TIMER, Kind.JOB_EXPIRY) and (wait.due_ns is None or now_ns < wait.due_ns):
        what = "timer" if event.kind is Kind.TIMER else "job expiry"
        return Refuse(Code.ORDERING, f"{what} {wait.wait_id!r} is due at {when(wait.due_ns)}, not yet at "
                                     f"{when(now_ns)}")
    if event.kind is Kind.JOB and wait.due_ns is not None and now_ns >= wait.due_ns:
        # the expiry rule holds whoever answers: a completion after it is refused even before the expiry is applied
        return Refuse(Code.EXPIRED, f"external job {wait.wait_id!r} expired at {when(wait.due_ns)} "
                                    f"(now {when(now_ns)})")
    if event.kind is Kind.APPROVAL and wait.proposal_digest is not None \
            and event.proposal_digest != wait.proposal_digest:
        return Refuse(Code.STALE, "the answer is for another proposal than the one pending: ask again")
    if event.kind is Kind.APPROVAL:
        if actor.kind is ActorKind.SYSTEM and event.payload.get("status") != "approved":
            return Accept(transition, wait)  # the deadline passed (or the authority denied an orphan): nothing admitted
        if actor.kind is not ActorKind.OPERATOR:
            return Refuse(Code.AUTHORITY, f"{actor.name!r} is not a verified operator")
        if wait.authorized and actor.name not in wait.authorized:
            return Refuse(Code.AUTHORITY, f"operator {actor.name!r} may not answer approval {wait.wait_id!r}")
    elif event.kind is Kind.JOB_EXPIRY and actor.kind is ActorKind.SYSTEM:
        return Accept(transition, wait, reason=f"external job {wait.wait_id!r} expired before it completed "
                                               f"(due {when(wait.due_ns)})")
    elif event.kind is Kind.JOB and actor.kind is ActorKind.PRINCIPAL and actor.name == record.principal \
            and not wait.authorized:
        return Accept(transition, wait)  # the session's owner reports the job it made the session wait on
    elif actor.kind is not ActorKind.SYSTEM or (wait.authorized and actor.name not in wait.authorized):
        return Refuse(Code.AUTHORITY, f"{actor.name!r} may not complete {wait_kind} {wait.wait_id!r}")
    return Accept(transition, wait)
