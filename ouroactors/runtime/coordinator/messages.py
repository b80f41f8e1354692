"""What a user surface (``ouroactors.sessions``, the CLI) may ask the session directory and the coordinators.

Every request goes to the directory (``agent/sessions``, :mod:`.directory`): reads (``list``, ``show``,
``events``) it answers from the durable store itself, so they work whatever state a coordinator is in;
commands for one session (send, steer, cancel …) it forwards to that session's coordinator wrapped in
:class:`ForSession`, and the coordinator answers the original caller directly.

Requests are checked at the door (:mod:`ouroactors.core.boundary`): a malformed one is answered
:class:`~ouroactors.core.errors.BadRequest` and changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar

from ...core.boundary import Address, Data, Name, Pattern, Range, Size
from ...supervision.calls import MAX_REF_CHARS, TaggedAnswer
from ..execution.messages import OutputReady, SessionId
from .record import ID_PATTERN

Cursor = Annotated[int, Range(0, 2**62)]
# Event, job and approval ids are parts of LMDB keys: the store's identifiers (record.ID_PATTERN); a session id is
# a SessionId (the journal's rule too).
Ident = Annotated[str, Size(1, 128), Pattern(ID_PATTERN.pattern, "an identifier: 1 to 128 of [A-Za-z0-9._:@+-], "
                                                                 "starting with a letter or digit")]
MAX_PROMPT_BYTES = 200_000  # a message's text, in UTF-8
Prompt = Annotated[str, Size(1, MAX_PROMPT_BYTES)]
WaitSeconds = Annotated[float, Range(0.0, 60.0)]
Token = Annotated[str, Size(16, 256)]  # a principal's credential (see .principals); never shown in a repr
JOB_EXPIRY_S = 86400.0  # an external-job wait that names no expiry expires after a day
Version = Annotated[int, Range(0, 2**62)]
RequestId = Annotated[str, Size(0, 64), Pattern(r"[A-Za-z0-9._:-]*", "at most 64 of [A-Za-z0-9._:-]")]


@dataclass(frozen=True)
class NewSession:
    """Create a logical session (state ``suspended``, version 0) and start its coordinator.

    ``config`` is the session's table (:mod:`ouroactors.runtime.execution.config`); ``principal``
    is who owns it — the channel (the local CLI, the Python API in this process) vouches for it.
    """

    session_id: SessionId
    config: Annotated[Any, Data(32_000)]
    principal: Name
    channel: Name = "local"
    tenant: Name = "local"
    token: Token | None = field(default=None, repr=False)  # the principal's credential, if not the local owner


@dataclass(frozen=True)
class ListSessions:
    """Every session of this node that is not terminal, and (``all``) the terminal ones too — of those the reader
    may read: ``principal`` (verified as for a command; None: the local channel's) reads its own sessions, the data
    dir's owner reads all (see :func:`.principals.may_read`)."""

    all: bool = False
    principal: Name | None = None
    token: Token | None = field(default=None, repr=False)  # the principal's credential, if not the local owner


@dataclass(frozen=True)
class ShowSession:
    """One session's view; a session the reader may not read is answered as unknown (its existence not told)."""

    session_id: SessionId
    principal: Name | None = None
    token: Token | None = field(default=None, repr=False)  # the principal's credential, if not the local owner


@dataclass(frozen=True)
class ReadEvents:
    """Committed events with cursor > ``after`` (at most ``limit``), from the durable log.

    With ``wait_s`` > 0 and nothing to read yet, the answer is held until an event is committed or
    ``wait_s`` passed (a long poll: how ``events --follow`` waits without spinning).

    ``request_id`` is echoed in the answer: a held poll may be answered by the session's coordinator and, late,
    by the directory too (its safety net), and the reader takes only the answers to the request it made.
    ``stream``: the session's coordinator may answer with a series of :class:`EventsRead` (each commit's events
    as it becomes durable, until ``wait_s`` ends or the session is terminal; the last one is ``final``) instead
    of one answer; the reader listens for them (:meth:`ouroactors.sessions.Sessions.events`).
    ``principal``/``token``: the reader, as for :class:`ShowSession`.
    """

    session_id: SessionId
    after: Cursor = 0
    limit: Annotated[int, Range(1, 4096)] = 256
    wait_s: WaitSeconds = 0.0
    request_id: RequestId = ""
    stream: bool = False
    principal: Name | None = None
    token: Token | None = field(default=None, repr=False)  # the principal's credential, if not the local owner


@dataclass(frozen=True)
class StopReading:
    """A reader is done with its :class:`ReadEvents` stream ``request_id``: the directory, and the session's
    coordinator it lent the stream to, stop serving it now instead of at every commit until its ``wait_s`` ends.

    :meth:`ouroactors.sessions.Sessions.events` sends it when its caller stops iterating (a ``break``, ``until``):
    without it, each abandoned stream cost the coordinator a read and a message at every commit for ``wait_s`` — a
    client following each message's turn and moving on made every later commit slower. Only the reader's own
    stream ends: the request id is the reader's (random, known only to it and the actors serving it), and the
    principal must be the one the read was made for.
    """

    session_id: SessionId
    request_id: RequestId
    principal: Name | None = None
    token: Token | None = field(default=None, repr=False)


@dataclass(frozen=True)
class SendMessage:
    """A user message: a resume event bound to the principal, the channel and the expected state version.

    ``expected_version`` None: the session's current one, read by the coordinator (a caller that
    wants the stale check names the version it saw). ``event_id`` is the idempotency key: the same
    id twice is refused as a duplicate, never acted on twice. ``last``: the session is ``completed``
    (not ``suspended``) when this turn settles, in the same transaction as the turn's last checkpoint.
    """

    session_id: SessionId
    text: Prompt
    principal: Name
    event_id: Ident
    channel: Name = "local"
    expected_version: Version | None = None
    last: bool = False  # the session completes when this turn settles (kept with the accepted event)
    token: Token | None = field(default=None, repr=False)  # the principal's credential, if not the local owner


@dataclass(frozen=True)
class SteerSession:
    """Add a message to the running turn (delivered before its next model call)."""

    session_id: SessionId
    text: Prompt
    principal: Name
    token: Token | None = field(default=None, repr=False)  # the principal's credential, if not the local owner


@dataclass(frozen=True)
class ControlSession:
    """``cancel`` (any non-terminal state), ``suspend`` (a running one) or ``resume`` (suspended or parked)."""

    session_id: SessionId
    action: Annotated[str, Size(1, 16)]
    principal: Name
    token: Token | None = field(default=None, repr=False)  # the principal's credential, if not the local owner

    def check(self) -> None:
        from ...core.errors import BadRequest

        if self.action not in ("cancel", "suspend", "resume"):
            raise BadRequest("ControlSession", "action", f"one of cancel, suspend, resume; not {self.action!r}")


@dataclass(frozen=True)
class WaitSession:
    """Make a suspended session wait — on a timer (``seconds`` from now) or an external job (``job_id``) — and
    start its next turn with ``text`` when the wait completes (for a job, its result is appended).

    A job wait always expires: ``expires_s`` from now (default :data:`JOB_EXPIRY_S`); a job not completed by
    then ends the wait, and the session is suspended with the reason (see :mod:`.waits`)."""

    session_id: SessionId
    text: Annotated[str, Size(1, 8000)]
    principal: Name
    seconds: Annotated[float, Range(0.0, 366 * 86400.0)] | None = None
    job_id: Ident | None = None
    expires_s: Annotated[float, Range(0.001, 366 * 86400.0)] | None = None
    token: Token | None = field(default=None, repr=False)  # the principal's credential, if not the local owner

    def check(self) -> None:
        from ...core.errors import BadRequest

        if (self.seconds is None) == (self.job_id is None):
            raise BadRequest("WaitSession", "seconds", "exactly one of seconds (a timer) or job_id (a job)")
        if self.expires_s is not None and self.job_id is None:
            raise BadRequest("WaitSession", "expires_s", "an expiry is for a job wait (job_id); a timer is its own")


@dataclass(frozen=True)
class CompleteJob:
    """The external job a session waits on completed: a resume event (``event_id`` its idempotency key),
    checked like a message — the principal, the channel and (when given) the expected state version."""

    session_id: SessionId
    job_id: Ident
    principal: Name
    event_id: Ident
    result: Annotated[Any, Data(16_000)] = None
    channel: Name = "local"
    expected_version: Version | None = None
    token: Token | None = field(default=None, repr=False)  # the principal's credential, if not the local owner


@dataclass(frozen=True)
class ApprovalAnswered:
    """The grants authority has an answer for ``approval_id`` (a nudge: the coordinator reads the answer there,
    where the operator's credentials were verified, and checks it as a resume event)."""

    session_id: SessionId
    approval_id: Ident


@dataclass(frozen=True)
class WhichSession:
    """The directory asks a running coordinator which session it serves (after a restart of the directory)."""


@dataclass(frozen=True)
class Serving:
    session_id: str


@dataclass(frozen=True)
class SpareRuntime:
    """A runtime the directory started ahead of need (``agent/execution``'s child ``key``, its ``generation``).

    Only an offer, for the one command it comes with. From the directory that started the coordinator it is used as
    it is (its generation must be above the session's last runtime); from anybody else, the execution supervisor
    must say that child runs as that generation at that address, and the runtime that it serves no session yet,
    before the coordinator names it in a record (:mod:`.spares`). A refused offer is ignored and a runtime started.
    """

    key: Annotated[str, Size(1, 256)]  # a child key as its supervisor names it (``runtime#3``); asked, not trusted
    generation: Version
    address: Address

    def check(self) -> None:
        from ...core.errors import BadRequest

        if self.address is None:
            raise BadRequest("SpareRuntime", "address", "must be the runtime's address, not None")


@dataclass(frozen=True)
class ForSession:
    """The directory → a coordinator: ``request`` from ``reply_to`` (answer it there).

    Checked again at the coordinator's door, whoever sent it: ``request`` must be one of the :data:`COMMANDS`
    or a held :class:`ReadEvents` (a follower lent to the coordinator, answered the moment its events are durable:
    :mod:`.following`) or the :class:`StopReading` that ends one, itself well-formed (its own checks run nested),
    and ``reply_to`` an address to answer.
    ``spare``: a runtime started ahead, offered with a command that may start one (:mod:`.spares`).
    ``ticket``: the directory's number for a command it tracks until the coordinator says it took it (:class:`Taken`;
    0: untracked, :mod:`.in_flight`).
    ``tag``: the ref the caller's request came tagged with (:class:`~ouroactors.supervision.calls.Tagged`): every
    answer to ``reply_to`` goes inside a :class:`~ouroactors.supervision.calls.TaggedAnswer` with it, so the caller's
    endpoint tells it from an answer to another of its asks (None: it came bare, and is answered bare).
    """

    reply_to: Address
    request: (SendMessage | SteerSession | ControlSession | WaitSession | CompleteJob | ApprovalAnswered | ReadEvents
              | StopReading)
    spare: SpareRuntime | None = None
    ticket: Annotated[int, Range(0, 2**62)] = 0
    tag: Annotated[str, Size(1, MAX_REF_CHARS)] | None = None

    def check(self) -> None:
        from ...core.errors import BadRequest

        if self.reply_to is None:
            raise BadRequest("ForSession", "reply_to", "must be the address to answer, not None")

    def answer(self, value: Any) -> Any:
        """``value`` as the caller is answered: inside a ``TaggedAnswer`` with :attr:`tag` when there is one."""
        return tagged_answer(self.tag, value)


def tagged_answer(tag: str | None, value: Any) -> Any:
    """``value`` as a caller whose request came tagged ``tag`` is answered (None: bare)."""
    return value if tag is None else TaggedAnswer(tag, value)


@dataclass(frozen=True)
class Committed:
    """A coordinator → the directory: a checkpoint of ``session_id`` up to ``cursor`` is durable.

    Only a wake-up: the directory answers that session's waiting followers from the durable log now instead of
    at its next tick. The commit is what publishes (a reader sees nothing before it); a lost nudge costs a tick.
    Checked at the directory's door, and taken only from the coordinator the directory forwards that session's
    commands to, for a cursor that is durable and does not go back (:mod:`.directory`). ``served`` names the polls
    the directory lent the coordinator that it has answered, which the directory then forgets.
    """

    NEVER_AN_ANSWER: ClassVar[bool] = True  # sent to an actor, never an answer (see system._answers.tagged_for)

    session_id: SessionId
    cursor: Cursor
    served: Annotated[tuple[RequestId, ...], Size(0, 256)] = ()  # lent polls the coordinator answered (.following)


# -- answers ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionView:
    """A session as a user sees it (from its durable record)."""

    session_id: str
    state: str
    state_version: int
    revision: int
    committed_cursor: int
    runtime_id: str | None
    generation: int | None
    reason: str | None
    principal: str
    updated_ns: int
    rejections: int = 0
    waits: tuple[str, ...] = ()  # what a waiting session waits on ("timer timer.v3 due_ns=…", "approval …")
    pinned: dict[str, str] | None = None  # the versions it runs under: prompt, model, tools, workflow, policy
    next_events: tuple[str, ...] = ()  # the valid transitions from its state (seed 001), from the workflow table


@dataclass(frozen=True)
class EventsRead:
    ANSWERS_BY_REQUEST_ID: ClassVar[bool] = True  # taken only by the read with this request_id (system._answers)

    events: tuple[Any, ...]  # PublishedEvent records, in cursor order
    committed: int  # the session's committed cursor when read
    state: str
    request_id: str = ""  # the ReadEvents' own, echoed
    final: bool = True  # False: a stream's answer, more follow (``ReadEvents.stream``)


@dataclass(frozen=True)
class Done:
    """A command was taken; ``view`` is the session after it (durable), ``detail`` what happened."""

    view: SessionView
    detail: str = ""


@dataclass(frozen=True)
class Rejected:
    """A resume event was refused and recorded (``code`` from :class:`~.resume.Code`)."""

    session_id: str
    code: str
    detail: str


REQUESTS = (NewSession, ListSessions, ShowSession, ReadEvents, StopReading, SendMessage, SteerSession, ControlSession,
            WaitSession, CompleteJob, ApprovalAnswered)
COMMANDS = (SendMessage, SteerSession, ControlSession, WaitSession, CompleteJob, ApprovalAnswered)
@dataclass(frozen=True)
class RuntimeStarted:
    """A coordinator → the directory: it started the runtime a command of ``session_id`` needed itself (no spare
    was offered, or none it could use). The directory's spare refill that such a command left waiting starts now:
    its runtime is then newer than this one, so the session can take it at its next command (:mod:`.spares`).
    Checked at the directory's door and taken only from the coordinator it forwards that session's commands to."""

    session_id: SessionId


@dataclass(frozen=True)
class Taken:
    """A coordinator → the directory: the command of ``ForSession.ticket`` began (``answered``: its caller has its
    answer, and the directory stops tracking it; ``returned``: the coordinator crashed and the command never began
    there, so the directory forwards it to the replacement; :mod:`.in_flight`). Checked at the directory's door and
    believed only from the coordinator the ticket went to, for that session."""

    NEVER_AN_ANSWER: ClassVar[bool] = True  # sent to an actor, never an answer (see system._answers.tagged_for)

    session_id: SessionId
    ticket: Annotated[int, Range(1, 2**62)]
    answered: bool = False
    returned: bool = False

    def check(self) -> None:
        from ...core.errors import BadRequest

        if self.answered and self.returned:
            raise BadRequest("Taken", "returned", "a command answered is not returned too", "True")


@dataclass(frozen=True)
class SpareWanted:
    """A coordinator → its directory: a turn it resumes itself (a timer, an approval it found answered, its recovery)
    needs a runtime now; answered :class:`SpareOffer`. Believed only from the session's coordinator (:mod:`.spares`)."""

    session_id: SessionId


@dataclass(frozen=True)
class SpareOffer:
    """The directory's answer to :class:`SpareWanted`: a spare runtime, offered to the asker alone, or None."""

    spare: SpareRuntime | None = None


DIRECTORY_REQUESTS = (*REQUESTS, Committed, RuntimeStarted, Taken, SpareWanted)  # checked at the directory's door
COORDINATOR_REQUESTS = (ForSession, WhichSession, OutputReady)  # what a coordinator checks at its door

__all__ = [
    "COMMANDS", "COORDINATOR_REQUESTS", "DIRECTORY_REQUESTS", "REQUESTS", "ApprovalAnswered", "Committed",
    "CompleteJob", "ControlSession", "Done", "EventsRead", "ForSession", "ListSessions", "NewSession", "ReadEvents",
    "Rejected", "RuntimeStarted", "SendMessage", "SessionView", "ShowSession", "SpareOffer", "SpareRuntime",
    "SpareWanted", "SteerSession",
    "StopReading", "Taken", "WaitSession", "tagged_answer",
]
