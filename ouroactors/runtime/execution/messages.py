"""The runtime's protocol: what a coordinator (or a test, or the CLI) may ask a session runtime, and its answers.

Requests are checked at the door (:mod:`ouroactors.core.boundary`): a malformed one is answered with
:class:`~ouroactors.core.errors.BadRequest` and changes nothing. State refusals are the typed errors of
:mod:`.errors` (``NotOpen``, ``Busy``, ``NoActiveTurn``, ``CursorError`` …), never strings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from ...core.boundary import Address, Data, Name, Range, SessionId, Size
from ...core.errors import BadRequest
from .output import OutputEvent

Cursor = Annotated[int, Range(0, 2**62)]
Prompt = Annotated[str, Size(1, 200_000)]
Version = Annotated[int, Range(0, 2**62)]


@dataclass(frozen=True)
class OpenSession:
    """Open ``session_id`` with its configuration (the session's TOML table, as a dict).

    ``lease_id`` names the workspace lease the session holds; the runtime checks it in the workspace's durable
    records (active, this session's, the configured root) before any tool may touch a path. ``subscriber`` is the
    actor told :class:`OutputReady` when output waits (a coordinator); None: nobody is pushed to, readers poll —
    never the asker by default, since a push into an outside caller's endpoint would be taken for an answer.

    ``state_version`` is the session's workflow state version (the coordinator's record) the runtime runs
    under: an approval it requests itself carries it, so an answer given for another version is refused.
    ``park_approvals``: instead of waiting for an answer itself, the runtime reports ``approval_needed`` and
    holds the call until it is closed — the coordinator makes the wait durable and the runtime's process goes
    away (:mod:`ouroactors.runtime.coordinator.waits`). ``answered``: approvals answered for this session
    since its turn began; a call that asks again finds its own there (same tool and arguments) and is
    decided by it instead of asking twice. ``answered_asks``: their call digests, as the coordinator counts them
    (:mod:`.repeats`: an ask of the re-run that one answers is not published again).

    ``tail_turn`` (0: none) is the turn the opener has not seen settle. If the journal holds that turn settled — its
    runtime died after settling it and before its last events were committed — the runtime emits the turn's events
    the log does not hold yet, derived from the journal by replay (nothing runs), and answers ``Opened.tail``: the
    turn is not to be re-run. Either way, what the log holds of the turn it continues (up to ``start``) is not
    published again (:mod:`.repeats`).
    """

    session_id: SessionId
    config: Annotated[Any, Data(32_000)]
    lease_id: Name | None = None
    subscriber: Address = None
    start: Cursor = 0  # the output cursor to continue from (a replacement starts at the committed checkpoint)
    state_version: Version = 0
    park_approvals: bool = False
    answered: Annotated[tuple[Name, ...], Size(0, 64)] = ()
    answered_asks: Annotated[tuple[Name, ...], Size(0, 64)] = ()
    tail_turn: Version = 0


@dataclass(frozen=True)
class SendText:
    """Start a turn with this user message (refused with ``Busy`` while a turn runs)."""

    text: Prompt


@dataclass(frozen=True)
class SteerTurn:
    """Add a user message to the running turn, delivered before its next model call. Answered (``Accepted``) once
    its acceptance is committed in the session's journal (``steer_received``): a runtime lost before delivering it
    leaves it to the turn's re-run (:mod:`.reuse`)."""

    text: Prompt


@dataclass(frozen=True)
class InterruptTurn:
    """Cancel the running activity (model call or tools) and settle the turn as interrupted."""


@dataclass(frozen=True)
class CloseSession:
    """End the session: cancel what runs, write nothing more, and stop this runtime (``normal``).

    ``settle`` False: a running turn is not settled as interrupted; it is left unsettled in the journal, as
    after a crash, so the next runtime re-runs it from the checkpoint (how a coordinator parks a session on a
    durable wait: the turn continues, with the same conversation, once the wait is answered).
    """

    settle: bool = True


@dataclass(frozen=True)
class DrainOutput:
    """The output events after ``after`` (at most ``limit``); nothing is dropped until acknowledged."""

    after: Cursor
    limit: Annotated[int, Range(1, 4096)] = 256


@dataclass(frozen=True)
class AckOutput:
    """Everything up to ``cursor`` is committed by the reader: the runtime may drop it."""

    cursor: Cursor


@dataclass(frozen=True)
class SubscribeOutput:
    """Push :class:`OutputReady` to ``subscriber`` from now on (a coordinator that adopted this runtime: the one
    that opened it is gone). None: nobody is pushed to."""

    subscriber: Address = None


@dataclass(frozen=True)
class RuntimeStatusRequest:
    """Where the runtime stands (a read)."""


# -- answers and pushes -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Opened:
    session_id: str
    runtime_id: str
    generation: int | None
    produced: int
    tail: bool = False  # the open's tail_turn had settled: its withheld events follow ``start`` (see OpenSession)


@dataclass(frozen=True)
class Accepted:
    """The request was taken: ``turn`` is the turn it started (send) or reached (steer, interrupt)."""

    turn: int


@dataclass(frozen=True)
class Acked:
    cursor: int
    dropped: int


@dataclass(frozen=True)
class Closed:
    session_id: str


@dataclass(frozen=True)
class RuntimeStatus:
    session_id: str | None
    runtime_id: str
    generation: int | None
    open: bool
    turn: int  # turns started so far
    running: bool  # a turn is running now
    produced: int
    acked: int


@dataclass(frozen=True)
class OutputReady:
    """Pushed to the session's subscriber for every event the runtime emits, carrying it.

    The event rides in the push so that the subscriber (the coordinator) can checkpoint it without a drain round
    trip — a drain has to wait for the runtime's trio thread, which is busy with the turn (ledger commits, tools).
    The buffer still holds every event until it is acknowledged: a push lost to a restart is found by a drain.

    A push is checked at the coordinator's door like a request (its events are checkpointed from it): the ids
    are names, ``produced`` a cursor, at most :data:`MAX_PUSHED` events, each with a cursor in ``1..produced``
    and above the one before it. That it comes from the attached runtime is the coordinator's check (the sender).
    """

    NEVER_AN_ANSWER: ClassVar[bool] = True  # sent to an actor, never an answer (see system._answers.tagged_for)

    session_id: SessionId
    runtime_id: Name
    produced: Cursor
    events: Annotated[tuple[OutputEvent, ...], Size(0, 256)] = ()  # Size(0, MAX_PUSHED)

    def check(self) -> None:
        last = 0
        for i, event in enumerate(self.events):
            if not last < event.cursor <= self.produced:
                where = "1" if i == 0 else f"{last + 1} (after events[{i - 1}])"
                raise BadRequest("OutputReady", f"events[{i}].cursor", f"must be {where} to produced={self.produced}",
                                 repr(event.cursor))
            last = event.cursor

    def then(self, later: Any) -> OutputReady | None:
        """This push and ``later`` as one (the runtime folds the pushes its actor thread finds queued together), or
        None when they do not fold: another message, another session or runtime, too many events, or a later push
        whose events do not follow these."""
        if not isinstance(later, OutputReady) or (later.session_id, later.runtime_id) != (self.session_id,
                                                                                         self.runtime_id):
            return None
        if len(self.events) + len(later.events) > MAX_PUSHED or later.produced < self.produced:
            return None
        if self.events and later.events and later.events[0].cursor <= self.events[-1].cursor:
            return None
        return OutputReady(self.session_id, self.runtime_id, later.produced, self.events + later.events)


MAX_PUSHED = 256  # events in one OutputReady (the runtime pushes each event; queued pushes fold into one)

REQUESTS = (OpenSession, SendText, SteerTurn, InterruptTurn, CloseSession, DrainOutput, AckOutput,
            RuntimeStatusRequest, SubscribeOutput)

__all__ = [
    "MAX_PUSHED", "REQUESTS", "Accepted", "AckOutput", "Acked", "CloseSession", "Closed", "DrainOutput",
    "InterruptTurn", "OpenSession", "Opened", "OutputReady", "RuntimeStatus", "RuntimeStatusRequest", "SendText",
    "SessionId", "SteerTurn", "SubscribeOutput",
]
