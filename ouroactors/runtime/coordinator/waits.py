"""Waits the coordinator produces, and how each one resumes the session from durable state.

A mixin of :class:`~.actor.Coordinator`. A waiting session holds **no runtime**: the wait is a
:class:`~.record.PendingWait` in the session record (committed in the transition into the waiting
state), the runtime's process is closed, and whatever ends the wait is a checked resume event
(:mod:`.resume`) after which a *new* runtime continues from the committed checkpoint. Nothing about a
wait lives only in memory, so a coordinator (or the whole system) restarting in the middle changes
nothing: the boot sweep restarts the coordinator of every non-terminal session, and its recovery ends
in :meth:`Waits._check_waits`, which picks the wait up where the record says it is.

**Approval.** A runtime opened by a coordinator does not wait for an operator itself
(``OpenSession.park_approvals``): it reports ``approval_needed`` (tool, arguments, call id) and holds the
call. The checkpoint that publishes that event also moves the session to ``waiting:approval`` (state
version W) with the proposal's digest; then the runtime is closed and the coordinator asks the grants
authority for an approval **at version W** — the version ``session show`` displays, so an answer given for
another version is refused there and recorded on the approval. The request is idempotent (an approval of
this session with the same call digest and version is looked up first), which is what makes a crash
between the checkpoint and the request harmless. The answer reaches the coordinator as a nudge from the
operator path (:class:`~.messages.ApprovalAnswered`) or, if the nudge is lost, by polling the authority
every :data:`APPROVAL_POLL_S` (a poll leaves an operator's answer younger than :data:`NUDGE_GRACE_S` to its nudge,
which brings the directory's spare runtime: :func:`left_for_nudge`); either way the coordinator reads the answer
*from grants* (where the operator's credentials were verified) and applies it as a resume event expecting version
W: a stale one (the session moved on) is rejected and recorded, a duplicate too. An accepted answer starts a new runtime
that re-runs the interrupted turn with the answered approvals named (``OpenSession.answered``): the call
that asks again finds its approval by digest and is decided by it — the operator is not asked twice, and
the coordinator does not wait again for an ``approval_needed`` it knows is answered. (The re-run does not publish
that ask again: it repeats the log's events of the turn, held back by :mod:`ouroactors.runtime.execution.repeats`,
and its ``turn_resumed`` marker names the answered asks among them, which the coordinator counts as taken.)

**Timer.** :class:`~.messages.WaitSession` with ``seconds`` makes a *suspended* session wait
(``waiting:timer``) with ``due_ns`` on the core clock (:mod:`ouroactors.core.clock`, virtual in
simulation) and the text its next turn starts with. The coordinator arms a wakeup for the due time and,
because a simulated clock may jump, also looks at every heartbeat; when due, it fires the timer as a
resume event (:func:`.timers.timer_event`: its id names the wait and the version, so firing twice is a
duplicate). After a restart the recovering coordinator fires a timer that fell due while nothing ran.

**External job.** :class:`~.messages.WaitSession` with ``job_id`` moves a suspended session to
``waiting:external_job``; :class:`~.messages.CompleteJob` (``ouroactors session complete-job``) is the
resume event that ends it — checked for the principal, the channel, the expected version and duplicates —
and the next turn starts with the wait's text and the job's result. Every job wait has an expiry rule
(``WaitSession.expires_s``, a day by default), kept as the wait's ``due_ns`` and indexed like a timer: once
it passes, the coordinator applies the system's expiry event (the same wakeup, heartbeat look and recovery
check as a timer) and the session is ``suspended`` with the reason naming the job — no model call runs for
it. A completion that arrives after the expiry is refused (``expired``) and recorded, even one that races
the coordinator applying it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Generator
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ...authorities.grants.approvals import ApprovalRefused
from ...authorities.grants.messages import ListApprovals, RequestApproval
from ...core import clock
from ...core.errors import BadRequest
from ...supervision.events import log_event
from ..execution.repeats import RESUMED, ask_digest
from .calls import Ask, Job, OffThread, TimedOut
from .commands import CoordinatorError, value_of
from .messages import JOB_EXPIRY_S, ApprovalAnswered, CompleteJob, Done, Rejected, WaitSession
from .record import PendingWait, ResumeApplied, SessionRecord, approval_wait_id
from .resume import ActorKind, Kind, ResumeEvent, VerifiedActor, system_actor
from .timers import due_event
from .views import view_of
from .workflow import Event, State

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from ..execution.messages import Opened
    from .store import SessionStore

APPROVAL_POLL_S = 5.0
# An operator's answer younger than this is left to the nudge that follows it on the operator path (the heartbeat's
# look would otherwise race the nudge, and the nudge brings the spare runtime the directory offers: see
# left_for_nudge).
NUDGE_GRACE_S = 2.0
TIMER_WAKEUP = "coordinator:timer"
MAX_CHAIN = 64  # resume events between a turn's message and now (each answered approval adds one)

__all__ = ["APPROVAL_POLL_S", "NUDGE_GRACE_S", "TIMER_WAKEUP", "TurnContext", "Waits", "left_for_nudge"]


def left_for_nudge(approval: Any, now_ns: int, grace_s: float | None = None) -> bool:
    """Whether the heartbeat's look leaves ``approval``'s answer to the operator path's nudge (the look then takes it
    at a later beat, if the nudge was lost). An operator's answer is followed at once by its nudge
    (:class:`~.messages.ApprovalAnswered`, through the directory, which offers a spare runtime with it); a look that
    took the answer first would start a runtime of its own and leave the spare unused. So an operator's answer younger
    than :data:`NUDGE_GRACE_S` waits for it. An answer grants gave itself (an expiry: answered by ``authority``) has
    no nudge and is taken at once, as is one whose time is unknown. A restarting coordinator's recovery takes every
    answer at once (it is not the heartbeat's look)."""
    grace = NUDGE_GRACE_S if grace_s is None else grace_s
    answered_ns = getattr(approval, "answered_ns", None)
    by_operator = getattr(approval, "answered_by", None) not in (None, "authority")
    return by_operator and isinstance(answered_ns, int) and 0 <= now_ns - answered_ns < grace * 1e9


@dataclass(frozen=True)
class TurnContext:
    """The turn a resume event starts or continues: its text, whether it is the last, the approvals answered."""

    text: str | None
    last: bool
    approvals: tuple[tuple[str, str], ...]  # (approval id, call digest), answered since the turn's message


class Waits:
    """See the module docstring."""

    if TYPE_CHECKING:  # what the coordinator provides
        session_id: str
        incarnation: str
        store: SessionStore
        attached: Any
        record: SessionRecord | None
        answered_asks: list[str]

        def wakeupAfter(self, timePeriod: timedelta, payload: Any = None) -> None: ...
        def _read(self) -> SessionRecord: ...
        def _authority(self, name: str, payload: Any, timeout_s: float = 10.0) -> Ask: ...
        def _transition(self, record: SessionRecord, event: Event, **changes: Any) -> SessionRecord: ...
        def _end_session(self, record: SessionRecord, event: Event, reason: str) -> SessionRecord: ...
        def _attach(self, record: SessionRecord, opened: Opened) -> SessionRecord: ...
        def _start_runtime(self, start: int, reclaim: dict[str, Any] | None = None,
                           answered: tuple[tuple[str, str], ...] = (),
                           tail: int = 0) -> Generator[Ask, Any, Opened]: ...
        def _start_turn(self, text: str) -> Generator[Ask | OffThread, Any, str]: ...
        def _with_a_spare(self, resume: Generator[Ask | OffThread, Any, Any]) -> Job: ...
        def _principal(self, claimed: str, token: str | None) -> VerifiedActor | None: ...
        def _owner_only(self, request: Any, record: SessionRecord, what: str) -> None: ...

    # -- the turn ---------------------------------------------------------------------------------------------

    def _turn_context(self, record: SessionRecord) -> TurnContext:
        """Follow ``resumed_by`` back through answered approvals to the event that started the turn (durable)."""
        approvals: list[tuple[str, str]] = []
        event_id = record.resumed_by
        for _ in range(MAX_CHAIN):
            accepted = self.store.accepted(self.session_id, event_id) if event_id else None
            if accepted is None:
                break
            if accepted.kind == Kind.APPROVAL.value:
                approvals.append((str(accepted.payload.get("approval_id")), str(accepted.payload.get("call_digest"))))
                event_id = accepted.payload.get("turn_event")
                continue
            text = accepted.payload.get("text")
            last = accepted.kind == Kind.MESSAGE.value and bool(accepted.payload.get("last"))
            return TurnContext(text if isinstance(text, str) else None, last, tuple(approvals))
        return TurnContext(None, False, tuple(approvals))

    def _last_turn(self, record: SessionRecord) -> bool:
        """Was the running turn started by a message marked ``last``?"""
        return self._turn_context(record).last

    def _continue_turn(self, record: SessionRecord) -> Generator[Ask | OffThread, Any, str | None]:
        """A resume event (or ``resume``) moved the session to running: a new runtime runs (or re-runs) the turn.
        Returns what came of the turn's text (``.commands.Commands._start_turn``), None when no turn could run."""
        context = self._turn_context(record)
        if context.text is None:
            self._end_session(record, Event.FAIL, "resumed, but no turn text is kept to run")
            return None
        try:
            opened = yield from self._start_runtime(record.committed_cursor, answered=context.approvals)
        except CoordinatorError as exc:
            raise self._turn_not_started(exc) from exc
        self.answered_asks = [d for _, d in context.approvals]
        record = self._attach(self._read(), opened)
        return (yield from self._start_turn(context.text))

    def _turn_not_started(self, exc: CoordinatorError) -> CoordinatorError:
        """No runtime could be started for the turn (the workspace held by another session, a lease refused,
        runtimes dying while opening): nothing of it ran, and nothing about it is lost. So the session is suspended
        with the reason — not failed, and never left running with no runtime — and keeps the turn (the resume event
        that started it, with the approvals answered since): ``resume`` runs it once the cause is gone. Answers the
        error to report."""
        record = self._read()
        if record.state is State.RUNNING:
            self._transition(record, Event.SUSPEND, reason=f"the turn did not start: {exc}; `resume` runs it")
        return CoordinatorError(f"the turn did not start: {exc}; the session is suspended (resume runs the turn)")

    def _pending_turn(self, record: SessionRecord) -> str | None:
        """A suspended session's turn that has not run to its end: the text of the resume event that started it,
        unless the log holds that turn's settlement (one committed after the event was accepted) — an interrupted
        one aside, which did not do what it was asked. None: nothing to resume."""
        text = self._turn_context(record).text
        last = self.store.events(self.session_id, max(record.committed_cursor - 1, 0), 1)
        if text is None or not last or last[-1].kind != "turn_settled" or last[-1].data.get("status") == "interrupted":
            return text
        started_by = self.store.accepted(self.session_id, record.resumed_by) if record.resumed_by else None
        at = started_by.at_cursor if started_by is not None else None
        return text if at is not None and last[-1].cursor <= at else None  # settled before it: it never ran

    # -- approvals --------------------------------------------------------------------------------------------

    def _approval_wait(self, record: SessionRecord, events: Any) -> tuple[PendingWait | None, list[str]]:
        """The wait a batch's ``approval_needed`` asks for (None: every ask in it is answered already), and the
        answered asks left once this batch is committed (each is expected once)."""
        left = list(self.answered_asks)
        for event in events:
            if event.kind == RESUMED:  # the re-run did not publish these answered asks again: they are taken
                taken = event.data.get("asks")
                for digest in taken if isinstance(taken, list) else ():  # (anything else names no ask)
                    if isinstance(digest, str) and digest in left:
                        left.remove(digest)
                continue
            if event.kind != "approval_needed" or "arguments" not in event.data:
                continue  # (a runtime that waits itself reports no arguments)
            digest = ask_digest(event.data)
            if digest in left:
                left.remove(digest)  # its approval is answered: the runtime is deciding by it
                continue
            version = record.state_version + 1  # the waiting state's version: the approval is asked at it
            call = {k: event.data.get(k) for k in ("tool", "arguments", "call_id")}
            return PendingWait(kind="approval", wait_id=approval_wait_id(version, digest), issued_at_version=version,
                               proposal_digest=digest, call=call), left
        return None, left

    def _approvals(self) -> Generator[Ask, Any, list[Any] | None]:
        listed = yield self._authority("grants", ListApprovals(None, self.session_id))
        return None if isinstance(listed, BaseException | TimedOut) else list(listed)

    def _asked(self, record: SessionRecord, wait: PendingWait) -> Generator[Ask | OffThread, Any, Any]:
        """The grants approval of this wait: looked up (same call digest and version), else requested at its version."""
        listed = yield from self._approvals()
        if listed is None:
            return None
        found = [a for a in listed
                 if a.call_digest == wait.proposal_digest and a.state_version == wait.issued_at_version]
        if found:
            return found[-1]
        call = wait.call or {}
        requested = yield self._authority("grants", RequestApproval(self.session_id, str(call.get("tool")),
                                                                    call.get("arguments"), wait.issued_at_version))
        if isinstance(requested, ApprovalRefused | BadRequest):
            return requested  # refused, not lost: asking again at every drain would change nothing (the caller parks)
        return None if isinstance(requested, BaseException | TimedOut) else requested

    def _resume_approval(self, record: SessionRecord, wait: PendingWait | None, approval: Any
                         ) -> Generator[Ask | OffThread, Any, ResumeApplied]:
        """Apply an answered approval as a resume event expecting the version it was asked at; continue the turn."""
        by_operator = approval.status in ("approved", "denied") and approval.answered_by not in (None, "authority")
        # grants verified the operator's credentials before it committed the answer: the identity is its record's
        actor = VerifiedActor(approval.answered_by, ActorKind.OPERATOR) if by_operator else system_actor()
        event = ResumeEvent(event_id=f"approval.{approval.approval_id}", kind=Kind.APPROVAL,
                            session_id=self.session_id, channel=record.channels[0], tenant=record.tenant,
                            actor=actor.name, expected_version=approval.state_version,
                            wait_id=wait.wait_id if wait is not None else approval.approval_id,
                            proposal_digest=approval.call_digest,
                            payload={"approval_id": approval.approval_id, "status": approval.status,
                                     "call_digest": approval.call_digest, "turn_event": record.resumed_by})
        applied: ResumeApplied = value_of(self.store.resume(self.session_id, event, actor,
                                                            coordinator=self.incarnation), "resume")
        if applied.accepted:
            self.record = applied.record
            yield from self._continue_turn(applied.record)
        return applied

    def _note_left_for_nudge(self, approval: Any) -> None:
        """Log ``approval_left_for_nudge``: the heartbeat's look found an answer it leaves to the nudge (the event
        names the approval; a test waits for it)."""
        log_event(getattr(self, "context", None), getattr(self, "path", ""), "approval_left_for_nudge",
                  {"session": self.session_id, "approval": approval.approval_id})

    # -- every wait, after a restart and on the heartbeat ------------------------------------------------------

    def _check_waits(self, look: bool = False) -> Job:
        """Pick the session's wait up from the record: ask for its approval or take its answer; fire a due timer.
        ``look``: the heartbeat's, which leaves an operator's fresh answer to its nudge (:func:`left_for_nudge`)."""
        record = self._read()
        if record.state is State.WAITING_APPROVAL:
            for wait in record.waits:
                approval = yield from self._asked(record, wait)
                if approval is not None and not approval.pending and look and left_for_nudge(approval,
                                                                                             clock.time_ns()):
                    self._note_left_for_nudge(approval)
                    return
                if approval is not None and not approval.pending:
                    try:  # a resume of its own: a spare runtime asked of the directory (a nudge brings one)
                        yield from self._with_a_spare(self._resume_approval(record, wait, approval))
                    except CoordinatorError as exc:  # the turn did not start: suspended with the reason, logged
                        log.warning("%s: %s", self.session_id, exc)
                    return
        elif record.state in (State.WAITING_TIMER, State.WAITING_JOB):
            now = clock.time_ns()
            event = due_event(record, now)
            if event is None:
                self._arm_timer(record)
                return
            applied = value_of(self.store.resume(self.session_id, event, system_actor(), now_ns=now,
                                                 coordinator=self.incarnation), event.kind.value)
            if applied.accepted:
                self.record = applied.record
                if event.kind is Kind.TIMER:  # an expired job ends the wait with no turn: suspended, with the reason
                    try:
                        yield from self._with_a_spare(self._continue_turn(applied.record))
                    except CoordinatorError as exc:  # nobody asked: the session is suspended with the reason
                        log.warning("%s: %s", self.session_id, exc)

    def _arm_timer(self, record: SessionRecord) -> None:
        when = record.timer_due()
        if when is not None:
            self.wakeupAfter(timedelta(seconds=max(0.0, (when - clock.time_ns()) / 1e9)), payload=TIMER_WAKEUP)

    # -- commands ---------------------------------------------------------------------------------------------

    def _wait_command(self, request: WaitSession | CompleteJob | ApprovalAnswered
                      ) -> Generator[Ask | OffThread, Any, Any]:
        if isinstance(request, WaitSession):
            return self._wait(request)
        if isinstance(request, CompleteJob):
            return (yield from self._complete_job(request))
        return (yield from self._approval_answered(request))

    def _wait(self, request: WaitSession) -> Done:
        record = self._read()
        self._owner_only(request, record, f"make session {self.session_id!r} wait")
        if record.state is not State.SUSPENDED:
            raise CoordinatorError(f"session is {record.state.value}: only a suspended session waits (between turns)")
        version = record.state_version + 1
        if request.seconds is not None:
            wait = PendingWait(kind="timer", wait_id=f"timer.v{version}", issued_at_version=version,
                               due_ns=clock.time_ns() + int(request.seconds * 1e9), text=request.text)
            record = self._transition(record, Event.WAIT_TIMER, waits=(wait,))
            self._arm_timer(record)
        else:
            expires_s = JOB_EXPIRY_S if request.expires_s is None else request.expires_s
            wait = PendingWait(kind="external_job", wait_id=str(request.job_id), issued_at_version=version,
                               due_ns=clock.time_ns() + int(expires_s * 1e9), text=request.text)
            record = self._transition(record, Event.WAIT_JOB, waits=(wait,))
            self._arm_timer(record)
        return Done(view_of(record, 0), f"waiting on {wait.kind} {wait.wait_id}")

    def _complete_job(self, request: CompleteJob) -> Generator[Ask | OffThread, Any, Any]:
        record = self._read()
        expected = record.state_version if request.expected_version is None else request.expected_version
        wait = record.wait(request.job_id)
        result = json.dumps(request.result, sort_keys=True, default=str)
        text = f"{wait.text if wait and wait.text else ''}\n\n[external job {request.job_id} completed: {result}]"
        event = ResumeEvent(event_id=request.event_id, kind=Kind.JOB, session_id=self.session_id,
                            channel=request.channel, tenant=record.tenant, actor=request.principal,
                            expected_version=expected, wait_id=request.job_id,
                            payload={"text": text.strip(), "result": request.result})
        # The channel vouches for the principal, as for a message (.principals); a claim alone is refused, recorded.
        applied = value_of(self.store.resume(self.session_id, event, self._principal(request.principal, request.token),
                                             coordinator=self.incarnation), "resume")
        if not applied.accepted:
            return _rejected(self.session_id, applied)
        self.record = applied.record
        yield from self._continue_turn(applied.record)
        return Done(view_of(self._read(), 0), f"job {request.job_id} completed: the next turn runs")

    def _approval_answered(self, request: ApprovalAnswered) -> Generator[Ask | OffThread, Any, Any]:
        record = self._read()
        listed = yield from self._approvals()
        if listed is None:
            raise CoordinatorError("the grants authority did not list the session's approvals; try again")
        approval = next((a for a in listed if a.approval_id == request.approval_id), None)
        if approval is None:
            raise CoordinatorError(f"session {self.session_id!r} has no approval {request.approval_id!r}")
        if approval.pending:
            return Done(view_of(record, 0), "not answered yet")
        if self.store.seen(self.session_id, f"approval.{approval.approval_id}"):
            return Done(view_of(record, 0), "the answer resumed the session already")
        wait = next((w for w in record.waits if w.kind == "approval" and w.proposal_digest == approval.call_digest),
                    None)
        applied = yield from self._resume_approval(record, wait, approval)
        if not applied.accepted:
            return _rejected(self.session_id, applied)
        return Done(view_of(self._read(), 0), f"approval {approval.status}: the turn continues")


def _rejected(session_id: str, applied: ResumeApplied) -> Rejected:
    rejection = applied.rejection
    return Rejected(session_id, rejection.code if rejection else "refused", rejection.detail if rejection else "")
