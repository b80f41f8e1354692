"""The coordinator's commands from users: a message (a checked resume event), steering, suspend/cancel/resume.

A mixin of :class:`~.actor.Coordinator`, kept apart so each module stays small: every command is a
job (:mod:`.calls`) run between the coordinator's other jobs, never interleaved with a publication.
A user message goes through :meth:`~.store.SessionStore.resume` — :func:`~.resume.check` decides
and the store applies it or records the rejection in one transaction — before any runtime starts.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Mapping
from typing import TYPE_CHECKING, Any

from ...authorities.grants.messages import ReviewApprovals
from ...authorities.storage.commit import Committed, Outcome
from ...core import faults
from ...core.errors import ActorCrashed, CommitOutcomeUnknown, CommitRejected, OuroactorsError
from ...supervision.calls import Asker
from ..execution import tool_set, versions

# The tool registry comes with this module, not with a session's first message. The coordinator supervisor's process
# imports this module once, and each coordinator it forks inherits the registry. Imported by the tools check instead
# (tool_set imports it lazily), it cost every session start ~45 ms, in a coordinator that had just been forked.
from ..execution import tools as _tool_registry  # noqa: F401
from ..execution.config import parse_session_config
from ..execution.messages import Accepted, InterruptTurn, SteerTurn
from . import recovery
from .calls import Ask, Job, Nap, OffThread
from .configs import get_config
from .errors import crash_answer
from .messages import (
    ApprovalAnswered,
    CompleteJob,
    ControlSession,
    Done,
    Rejected,
    SendMessage,
    SteerSession,
    Taken,
    WaitSession,
    tagged_answer,
)
from .principals import PrincipalCheck, Unverified
from .resume import Kind, ResumeEvent, VerifiedActor
from .trace import mark
from .views import view_of
from .workflow import Event, State, is_terminal

if TYPE_CHECKING:
    from ..execution.messages import Opened
    from .record import AcceptedEvent, SessionRecord
    from .store import SessionStore


# A named boundary for crash enumeration; free unless a plan is armed.
TEXT_SENT = faults.register_point("coordinator.text_sent", "the turn's text reached the runtime, its sender not told")
COMMAND_BEGINS = faults.register_point("coordinator.command_begins",
                                       "a command's job begins; the directory not yet told the command was taken")


class CoordinatorError(OuroactorsError):
    """A command this session cannot take in its state (nothing changed)."""


log = logging.getLogger("ouroactors.coordinator")


def value_of(outcome: Outcome[Any], what: str) -> Any:
    """The committed value; a rejection or an unknown outcome stops this coordinator (recovery reads back)."""
    if isinstance(outcome, Committed):
        return outcome.value
    if outcome.kind == "commit_outcome_unknown":
        raise CommitOutcomeUnknown(f"{what}: {outcome.reason}")
    raise CommitRejected(f"{what}: {outcome.reason}")


SETTLE_WAIT_S = 3.0  # how long a suspend waits for the interrupted turn to settle and be published
SETTLE_NAP_S = 0.02


class Commands:
    """The user commands of a coordinator (see the module docstring)."""

    if TYPE_CHECKING:  # what the coordinator provides
        session_id: str
        incarnation: str
        path: str
        store: SessionStore
        callers: list[tuple[Asker, int]]  # (caller, ticket) of each command received and not answered yet, in order
        begun: set[int]  # tickets of the commands whose job began here
        directory: Any
        started_by: Any
        attached: Any
        record: SessionRecord | None
        context: Any
        myAddress: Any

        def send(self, address: Any, message: Any) -> None: ...
        def stop(self, reason: Any = None) -> None: ...
        def _read(self) -> SessionRecord: ...
        def _transition(self, record: SessionRecord, event: Event, **changes: Any) -> SessionRecord: ...
        def _end_session(self, record: SessionRecord, event: Event, reason: str) -> SessionRecord: ...
        def _attach(self, record: SessionRecord, opened: Opened) -> SessionRecord: ...
        def _pending_turn(self, record: SessionRecord) -> str | None: ...
        def _continue_turn(self, record: SessionRecord) -> Generator[Ask | OffThread, Any, str | None]: ...
        def _turn_not_started(self, exc: CoordinatorError) -> CoordinatorError: ...
        def _start_runtime(self, start: int, reclaim: dict[str, Any] | None = None,
                           answered: tuple[tuple[str, str], ...] = (),
                           tail: int = 0) -> Generator[Ask, Any, Opened]: ...
        def _send_text(self, text: str) -> Generator[Ask | OffThread, Any, Any]: ...
        def _runtime_ask(self, message: Any, timeout_s: float = ..., to: Any = None) -> Ask: ...
        def _authority(self, name: str, payload: Any, timeout_s: float = 10.0) -> Ask: ...
        authorities: Mapping[str, Any]
        def _close_runtime(self, settle: bool = True) -> Job: ...
        def _publish(self, drain: bool | None = None) -> Job: ...
        def _recover(self) -> Job: ...
        def _wait_command(self, request: Any) -> Generator[Ask | OffThread, Any, Any]: ...

    def _tools_changed(self, record: SessionRecord) -> str | None:
        """Why this code's tools are not the ones ``record`` pinned (:mod:`..execution.tool_set`), or None."""
        config = get_config(self.store, self.session_id)
        if config is None:
            return None  # nothing to run a turn with: starting the runtime says so
        try:
            enabled = parse_session_config(config, f"session {self.session_id}").tools.enabled
            tool_set.check(self.session_id, record.pinned.tools, enabled)
        except tool_set.ToolSetChanged as exc:
            return str(exc)
        except (OuroactorsError, ValueError) as exc:  # a stored config this code cannot read: not its tools either
            return f"its stored configuration does not parse here: {exc}"
        return None

    # -- who asks -------------------------------------------------------------------------------------------

    def _principal(self, claimed: str, token: str | None) -> VerifiedActor | None:
        """The principal the channel verified for this request (see :mod:`.principals`), else None."""
        check = getattr(self, "principal_check", None) or PrincipalCheck(self.context.data_dir)
        self.principal_check = check
        verified = check.verify(claimed, token)
        return None if isinstance(verified, Unverified) else verified

    def _owner_only(self, request: Any, record: SessionRecord, doing: str) -> None:
        """Refuse a command unless its principal is verified and owns the session (nothing changes either way);
        ``doing`` completes "… may not ___"."""
        check = getattr(self, "principal_check", None) or PrincipalCheck(self.context.data_dir)
        self.principal_check = check
        verified = check.verify(request.principal, request.token)
        if isinstance(verified, Unverified):
            raise CoordinatorError(f"{verified}; it may not {doing}")
        if verified.name != record.principal:
            raise CoordinatorError(f"{request.principal!r} may not {doing}")

    # -- commands -------------------------------------------------------------------------------------------

    def _command(self, caller: Asker, request: Any, ticket: int = 0) -> Job:
        faults.point(COMMAND_BEGINS)
        self._taken(ticket)  # before anything is done: a command the directory forwards again never began (.in_flight)
        if ticket:
            self.begun.add(ticket)
        try:
            if getattr(request, "session_id", self.session_id) != self.session_id:  # scope: never another's session
                raise CoordinatorError(f"this coordinator serves session {self.session_id!r}, not "
                                       f"{getattr(request, 'session_id', None)!r}: nothing done")
            if isinstance(request, SendMessage):
                answer = yield from self._message(request)
            elif isinstance(request, SteerSession):
                answer = yield from self._steer(request)
            elif isinstance(request, ControlSession):
                answer = yield from self._control(request)
            elif isinstance(request, WaitSession | CompleteJob | ApprovalAnswered):
                answer = yield from self._wait_command(request)
            else:
                answer = CoordinatorError(f"a coordinator takes no {type(request).__name__}")
        except CoordinatorError as exc:
            answer = exc
        except Exception as exc:  # tell the caller, then crash: recovery reads the record back
            self._answer_caller(caller, crash_answer(self.path, exc), ticket)
            raise
        self._answer_caller(caller, answer, ticket)

    def _answer_caller(self, caller: Asker, answer: Any, ticket: int = 0) -> None:
        """Answer a command's caller, once and as it asked (tagged or bare: ``ForSession.tag``): it is no longer among
        the :attr:`callers` a stop answers (the entry of this command: its ticket tells two of one caller apart), and
        the directory hears it was answered."""
        if (caller, ticket) in self.callers:
            self.callers.remove((caller, ticket))
        self.send(caller.address, tagged_answer(caller.tag, answer))
        self._taken(ticket, answered=True)

    def _taken(self, ticket: int, answered: bool = False, returned: bool = False) -> None:
        """Tell the directory that forwarded command ``ticket`` that it was taken, or (``answered``) that its caller
        has the answer, or (``returned``) that it never began here and this coordinator crashed (0: a command it does
        not track; :mod:`.in_flight`)."""
        if not ticket:
            return
        # the directory that sent it; before any command reached this one (refused after a crash in on_start), the
        # directory that started it — the same one: only the directory forwards commands
        directory = getattr(self, "directory", None) or getattr(self, "started_by", None)
        if directory is not None:
            self.send(directory, Taken(self.session_id, ticket, answered, returned))

    def _answer_callers(self, reason: Any) -> None:
        """At this coordinator's stop, answer every command it took and has not answered (queued behind the one that
        ran, or cut short by a crash outside it): its caller sends it again — an event it sent is recognised — to
        the coordinator that replaces this one, instead of waiting out its ask. (Answered here, a command is taken:
        the directory does not forward it again.) After a crash, a command the directory tracks that never began
        here is left to the directory instead, which forwards it to the replacement (:meth:`_left_to_the_directory`)."""
        callers, self.callers = self.callers, []
        kind = getattr(getattr(reason, "kind", None), "value", reason)
        for caller, ticket in callers:
            if self._left_to_the_directory(ticket, reason):
                self._taken(ticket, returned=True)  # forwarded to the replacement, or answered at once if none comes
                continue
            if kind == "crash":
                self.send(caller.address, tagged_answer(caller.tag, ActorCrashed(self.path, str(reason))))
            else:
                self.send(caller.address, tagged_answer(caller.tag, CoordinatorError(
                    f"{self.path} stopped ({kind}) before it answered: the command may have been taken; send it "
                    "again (a resume event's id is recognised)")))
            self._taken(ticket, answered=True)

    def _left_to_the_directory(self, ticket: int, reason: Any) -> bool:
        """Whether command ``ticket`` is left unanswered at this coordinator's end, for the directory to forward
        again: the directory tracks it (a ticket), its job never began here (no ``Taken`` was sent, so nothing of it
        ran), and this coordinator crashed, so its supervisor starts a replacement — the one place the command can
        run now: it is returned (``Taken.returned``) and the directory forwards it there. Its caller then gets the
        replacement's answer, not a crash report and a retry of its own (and if the crash escalates, restarting the
        directory too, the directory's stop answers it). At any other stop (the session ended, the node shuts down) it
        is answered at once: nobody may come back to run it."""
        crashed = getattr(getattr(reason, "kind", None), "value", None) == "crash"
        return crashed and bool(ticket) and ticket not in getattr(self, "begun", ())  # (none: on_start failed)

    def _message(self, request: SendMessage) -> Generator[Ask | OffThread, Any, Any]:
        mark("start.message_received")
        record = self._read()
        if not versions.provides(record.pinned.workflow):  # refused before anything changes: see .versions
            unavailable = versions.WorkflowUnavailable(self.session_id, record.pinned.workflow, versions.PROVIDED)
            return Rejected(self.session_id, recovery.ParkReason.WORKFLOW_UNAVAILABLE.value, str(unavailable))
        changed = self._tools_changed(record)
        if changed is not None:  # its tools are not the ones it was created with: refused before anything changes
            return Rejected(self.session_id, recovery.ParkReason.TOOL_SET_UNAVAILABLE.value, changed)
        if self._never_started(record, request):  # the retry of a message whose turn could not start: run it now
            record = self._transition(record, Event.RESUME, reason=None)
            started = yield from self._continue_turn(record)
            return Done(view_of(self._read(), 0), f"{started or 'no turn started'}; the message's turn, which had not "
                                                  "started, runs now")
        unstarted = self._unstarted_message(record)  # a new message goes on without it: the answer says so
        expected = record.state_version if request.expected_version is None else request.expected_version
        event = ResumeEvent(event_id=request.event_id, kind=Kind.MESSAGE, session_id=self.session_id,
                            channel=request.channel, tenant=record.tenant, actor=request.principal,
                            expected_version=expected, payload={"text": request.text, "last": request.last})
        # The channel vouches for the principal (.principals); an unverified claim is refused and recorded.
        applied = value_of(self.store.resume(self.session_id, event, self._principal(request.principal, request.token),
                                           coordinator=self.incarnation), "resume")
        if not applied.accepted:
            rejection = applied.rejection
            return Rejected(self.session_id, rejection.code if rejection else "refused",
                            rejection.detail if rejection else "")
        record = self.record = applied.record
        mark("start.resumed")
        try:
            opened = yield from self._start_runtime(record.committed_cursor)
        except CoordinatorError as exc:
            raise self._turn_not_started(exc) from exc
        record = self._attach(record, opened)
        started = yield from self._start_turn(request.text)
        faults.point(TEXT_SENT)
        record = self.record or record  # as recovery left it, when the runtime did not take the text (_start_turn)
        if unstarted is not None and unstarted.event_id != request.event_id:
            log.info("%s: message %s replaces message %s, whose turn never started", self.path, request.event_id,
                     unstarted.event_id)
            return Done(view_of(record, 0), f"{started}; the earlier message {unstarted.event_id!r}, "
                                            "whose turn never started, will not run (this one replaced it)")
        return Done(view_of(record, 0), started)

    def _start_turn(self, text: str) -> Generator[Ask | OffThread, Any, str]:
        """Send the attached runtime its turn's text and say what came of it.

        Only ``Accepted`` is a started turn. Anything else (the runtime died meanwhile, refused, or did not answer
        in time) leaves the message accepted and its turn unknown, so recovery runs now, as the next heartbeat
        would: a live runtime that never got the text is sent it again, a lost one is replaced and re-runs the turn,
        and what cannot go on parks with its reason. The answer says which, never "started" on a guess."""
        answer = yield from self._send_text(text)
        if isinstance(answer, Accepted):
            return f"turn {answer.turn} started"
        log.warning("%s: the runtime answered %r to the turn's text: recovering", self.path, answer)
        yield from self._recover()
        record = self._read()
        return (f"message accepted, but the runtime did not take its text ({type(answer).__name__}: {answer}); "
                f"the session was recovered and is {record.state.value}")

    def _never_started(self, record: SessionRecord, request: SendMessage) -> bool:
        """Is ``request`` a retry, by the principal it came from, of the accepted message whose turn could not start
        (:meth:`_turn_not_started`)? Then the session is suspended on it, and nothing was published since it was
        accepted (the log's cursor is the one its acceptance saw). Running its turn is what the message asked for,
        not a second turn; refusing it as a duplicate would leave the message accepted and never run."""
        accepted = self._unstarted_message(record)
        if accepted is None or accepted.event_id != request.event_id:
            return False
        if accepted.payload.get("text") != request.text or bool(accepted.payload.get("last")) != request.last:
            return False  # another message under the same id: a duplicate id, refused as such
        verified = self._principal(request.principal, request.token)
        return verified is not None and verified.name == accepted.actor

    def _unstarted_message(self, record: SessionRecord) -> AcceptedEvent | None:
        """The accepted message whose turn could not start (:meth:`_turn_not_started`): the session is suspended on
        it and nothing was published since it was accepted (the log's cursor is the one its acceptance saw). None
        when there is none."""
        if record.state is not State.SUSPENDED or not record.resumed_by:
            return None
        accepted = self.store.accepted(self.session_id, record.resumed_by)
        if accepted is None or accepted.kind != Kind.MESSAGE.value or accepted.at_cursor != record.committed_cursor:
            return None
        return accepted

    def _steer(self, request: SteerSession) -> Generator[Ask | OffThread, Any, Any]:
        record = self._read()
        self._owner_only(request, record, f"steer session {self.session_id!r}")
        if self.attached is None:
            hint = {State.WAITING_APPROVAL: "; the turn waits on an approval: deny it with a reason to tell the model "
                                            "what to do instead, or answer it and steer the turn that resumes",
                    State.SUSPENDED: "; send a message to start the next turn"}.get(record.state, "")
            raise CoordinatorError(f"session {self.session_id!r} is {record.state.value}: no turn to steer{hint}")
        answer = yield self._runtime_ask(SteerTurn(request.text))
        if isinstance(answer, BaseException):
            raise CoordinatorError(str(answer))
        return Done(view_of(record, 0), "steered")

    def _control(self, request: ControlSession) -> Generator[Ask | OffThread, Any, Any]:
        record = self._read()
        self._owner_only(request, record, f"{request.action} session {self.session_id!r}")
        if request.action == "resume":
            if record.state is State.PARKED:
                self._transition(record, Event.RETRY, reason=None)
                yield from self._recover()
                return Done(view_of(self._read(), 0), "recovery retried")
            if record.state is not State.SUSPENDED:
                raise CoordinatorError(f"session is {record.state.value}: only a suspended or parked one resumes")
            if self._pending_turn(record) is None:
                raise CoordinatorError("nothing to resume: the last turn settled; send a message")
            record = self._transition(record, Event.RESUME, reason=None)
            started = yield from self._continue_turn(record)
            return Done(view_of(self._read(), 0), f"resumed: the turn runs again ({started or 'no turn started'})")
        if request.action == "cancel" and record.state is State.CANCELLED:  # a retry: what it asked for is done
            return Done(view_of(record, 0), "cancelled already")
        if is_terminal(record.state):
            raise CoordinatorError(f"session is {record.state.value} already")
        if request.action == "suspend" and record.state is State.SUSPENDED:  # a retry, or its turn ended meanwhile
            return Done(view_of(record, 0), "suspended already: no turn was running")
        if request.action == "suspend" and record.state is not State.RUNNING:
            waiting = " (a waiting session holds no runtime: answer its wait, or cancel it)" if record.state in (
                State.WAITING_APPROVAL, State.WAITING_TIMER, State.WAITING_JOB) else ""
            raise CoordinatorError(f"session is {record.state.value}: only a running one is suspended{waiting}")
        if self.attached is not None and record.state is State.RUNNING:  # suspend or cancel: its turn ends visibly
            yield from self._settle_interrupted()
        if self.attached is not None:
            yield from self._publish(drain=True)  # everything the runtime holds, pushed or not
            yield from self._close_runtime()
        record = self._read()
        if request.action == "suspend":
            if record.state is State.RUNNING:
                record = self._transition(record, Event.SUSPEND)
            return Done(view_of(record, 0), "suspended")
        record = self._end_session(record, Event.CANCEL, f"cancelled by {request.principal}")
        # its pending approvals (an approval wait it was cancelled in) are denied now, not left for an operator to
        # answer into nothing until their deadline; best effort: a restart of grants denies them too (.orphans)
        if "grants" in self.authorities:  # a tree with no grants authority asks none
            yield self._authority("grants", ReviewApprovals(self.session_id), 5.0)
        self.stop()
        return Done(view_of(record, 0), "cancelled")

    def _settle_interrupted(self) -> Job:
        """Interrupt the running turn and publish its settlement before the runtime goes (a suspend, a cancel): a
        subscriber sees the turn end (``turn_settled``, ``interrupted``) instead of a turn that never settles, and
        the interrupted turn's commit moves the session to ``suspended`` (:mod:`.publishing`: an interrupted turn
        never completes a session; a cancel goes on from there). The runtime cancels within a moment; one that has
        not settled within :data:`SETTLE_WAIT_S` (or has no turn running) is closed as before, its turn left as the
        log holds it."""
        answer = yield self._runtime_ask(InterruptTurn())
        turn = getattr(answer, "turn", None)
        if not isinstance(turn, int):  # no turn running (it settled meanwhile), or the runtime is gone
            return
        for _ in range(int(SETTLE_WAIT_S / SETTLE_NAP_S)):
            yield from self._publish(drain=True)
            last = self.store.events(self.session_id, max(self._read().committed_cursor - 1, 0), 1)
            if self.attached is None or (last and last[-1].kind == "turn_settled" and last[-1].turn >= turn):
                return
            yield Ask(self.myAddress, Nap(), SETTLE_NAP_S)  # answered by nobody: resumes after the nap



__all__ = ["Commands", "CoordinatorError", "value_of"]
