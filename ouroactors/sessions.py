"""Durable agent sessions from Python, over a running system with the agent tree.

::

    from ouroactors import ActorSystem
    from ouroactors.sessions import Sessions

    system = ActorSystem.connect(".ouroactors")          # or the system your program started
    sessions = Sessions(system)
    sessions.new("s1", {"workspace": "/srv/repo", "sandbox": {"mode": "bwrap"}})
    sessions.send("s1", "tidy the notes")
    for event in sessions.events("s1", after=0, follow=True, idle_timeout=30):
        print(event.cursor, event.kind, event.data)

Everything goes to the session directory (``agent/sessions``): reads come from the durable log, so
``events(after=C)`` resumes from any cursor with no gap and no duplicate, across coordinator and
runtime restarts — an event is there only once its checkpoint committed. Commands are resume
events checked by the coordinator against the session's state version: a stale one is refused
(:class:`SessionRejected`) and the rejection is recorded (``show(...).rejections``).

Approvals are answered through the grants authority as the operator whose credentials are in the
data dir (the authority verifies them); a name typed by a caller proves nothing. The session's
coordinator is then told (a nudge): it reads the answer from the authority and resumes the session
if the answer is for the state version the session waits at.

**Waits.** A session waiting on an approval, a timer or an external job holds no runtime; it resumes
from durable state, across restarts. ``wait(s, text, seconds=…)`` / ``wait(s, text, job=…)`` make a
suspended session wait; ``complete_job(s, job, result)`` ends a job wait (a checked resume event).
"""

from __future__ import annotations

import builtins
import logging
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .authorities.asking import ask_authority, current_generation
from .core.errors import OuroactorsError
from .runtime.coordinator import principals
from .runtime.coordinator.messages import (
    ApprovalAnswered,
    CompleteJob,
    ControlSession,
    Done,
    EventsRead,
    ListSessions,
    NewSession,
    ReadEvents,
    Rejected,
    SendMessage,
    SessionView,
    ShowSession,
    SteerSession,
    StopReading,
    WaitSession,
)
from .runtime.coordinator.record import PublishedEvent, approval_of_wait

log = logging.getLogger(__name__)
DIRECTORY = "agent/sessions"
GRANTS = "agent/grants"
LEDGER = "agent/ledger"
ASK_TIMEOUT_S = 60.0
FOLLOW_WAIT_S = 5.0
STREAM_SLACK_S = 2.0  # how long past its end a stream may stay quiet before it counts as lost

__all__ = ["PublishedEvent", "SessionRejected", "SessionView", "Sessions", "local_principal"]


class SessionRejected(OuroactorsError):
    """A resume event (a message) was refused by the session's checks and recorded; nothing moved."""

    def __init__(self, session_id: str, code: str, detail: str) -> None:
        self.session_id, self.code, self.detail = session_id, code, detail
        super().__init__(f"session {session_id!r} refused the event ({code}): {detail}")

    def __reduce__(self) -> tuple[object, ...]:
        return (self.__class__, (self.session_id, self.code, self.detail))


def local_principal() -> str:
    """Who the local channel vouches for when no token is given: the OS user running this process (the data dir's
    owner, who alone can read the system's secret; see :mod:`ouroactors.runtime.coordinator.principals`)."""
    return principals.local_principal()


class Sessions:
    """The session API over ``system`` (an :class:`~ouroactors.ActorSystem` started or connected)."""

    def __init__(self, system: Any, *, principal: str | None = None, token: str | None = None,
                 directory: str = DIRECTORY, data_dir: str | Path | None = None,
                 follow_direct: bool | None = None) -> None:
        """``principal``/``token``: whom the requests act for — by default the local user, whom the local channel
        vouches for without a token; any other principal gives the token :func:`principals.add_principal` made
        (:mod:`ouroactors.runtime.coordinator.principals`).

        ``follow_direct``: :meth:`events` reads the committed log itself, in this process, woken by the committers
        (:mod:`ouroactors.runtime.coordinator.direct_follow`: one process hop less than the directory's stream; the
        environment is open only while it follows, so do not start an actor system on the same data dir
        *while* following in another thread). Only for a multiproc system whose data dir this process may read;
        ``None`` (the default) takes it there, ``False`` always follows through the session directory."""
        self.system = system
        self.principal = principal or local_principal()
        self.token = token  # the principal's credential (principals.add_principal); None: the local owner
        self.directory = directory
        self.data_dir = Path(data_dir) if data_dir is not None else Path(system.data_dir)
        local = getattr(system, "base", None) == "multiproc"
        if follow_direct is None:  # ours to read: the data dir's environment exists and this user may open it
            lmdb_dir = self.data_dir / "lmdb"
            follow_direct = lmdb_dir.is_dir() and os.access(lmdb_dir, os.R_OK | os.W_OK | os.X_OK)
        self.follow_direct = bool(follow_direct) and local

    def _ask(self, message: Any, timeout: float = ASK_TIMEOUT_S) -> Any:
        return self.system.ask(self.directory, message, timeout)

    # -- sessions -------------------------------------------------------------------------------------------

    def new(self, session_id: str | None = None, config: dict[str, Any] | None = None) -> SessionView:
        """Create a session (suspended, version 0) and start its coordinator."""
        sid = session_id or f"s-{uuid.uuid4().hex[:12]}"
        view: SessionView = self._ask(NewSession(sid, dict(config or {}), self.principal, token=self.token))
        return view

    def list(self, *, all: bool = False) -> list[SessionView]:
        """The sessions this principal may read (its own; the data dir's owner: all), not terminal unless ``all``."""
        return list(self._ask(ListSessions(all, self.principal, token=self.token)))

    def show(self, session_id: str) -> SessionView:
        view: SessionView = self._ask(ShowSession(session_id, self.principal, token=self.token))
        return view

    def send(self, session_id: str, text: str, *, expected_version: int | None = None,
             event_id: str | None = None, last: bool = False) -> Done:
        """Start a turn with ``text`` (the session must be suspended); :class:`SessionRejected` if refused.

        ``last``: the session completes when this turn settles (instead of waiting for the next message).
        """
        answer = self._ask(SendMessage(session_id, text, self.principal, event_id or f"m-{uuid.uuid4().hex}",
                                       expected_version=expected_version, last=last, token=self.token))
        return self._done(answer)

    def steer(self, session_id: str, text: str) -> Done:
        """Add ``text`` to the running turn, delivered before its next model call (a ``steered`` event says which).
        Answered once the runtime has journaled it; refused with no turn running, or once the turn has no point
        left to take it. A turn that stops first (a model error, an interrupt) still puts an answered steer in the
        conversation, after its last message (``at_end`` in the event): the next turn's model sees it."""
        return self._done(self._ask(SteerSession(session_id, text, self.principal, token=self.token)))

    def cancel(self, session_id: str) -> Done:
        """End the session for good; a running turn is interrupted first and its end (``turn_settled``,
        ``interrupted``) published. Cancelling a cancelled session (a retry) is done already, not an error."""
        return self._done(self._ask(ControlSession(session_id, "cancel", self.principal, token=self.token)))

    def suspend(self, session_id: str) -> Done:
        """Stop a running session: its turn is interrupted, its end (``turn_settled``, ``interrupted``) published and
        its runtime closed. An interrupted turn never completes a session, even one sent as the ``last``.
        Suspending a suspended session (a retry, or a turn that ended meanwhile) is done already, not an error."""
        return self._done(self._ask(ControlSession(session_id, "suspend", self.principal, token=self.token)))

    def resume(self, session_id: str) -> Done:
        """Run a suspended session's interrupted message again, as its next turn (or retry a parked recovery)."""
        return self._done(self._ask(ControlSession(session_id, "resume", self.principal, token=self.token)))

    def wait(self, session_id: str, text: str, *, seconds: float | None = None, job: str | None = None,
             expires: float | None = None) -> Done:
        """Make a suspended session wait on a timer (``seconds``) or an external ``job``; when the wait ends its
        next turn starts with ``text`` (a job's result appended). The wait is durable: no runtime runs meanwhile.
        A job wait expires ``expires`` seconds from now (default a day): the session is then suspended with the
        reason and no turn runs; a completion after that is refused."""
        return self._done(self._ask(WaitSession(session_id, text, self.principal, seconds=seconds, job_id=job,
                                                expires_s=expires, token=self.token)))

    def complete_job(self, session_id: str, job_id: str, result: Any = None, *, event_id: str | None = None,
                     expected_version: int | None = None) -> Done:
        """The external job the session waits on completed: a resume event (``event_id`` its idempotency key;
        :class:`SessionRejected` if it is a duplicate, stale or for no pending job — the rejection is recorded)."""
        return self._done(self._ask(CompleteJob(session_id, job_id, self.principal,
                                                event_id or f"j-{uuid.uuid4().hex}", result,
                                                expected_version=expected_version, token=self.token)))

    @staticmethod
    def _done(answer: Any) -> Done:
        if isinstance(answer, Rejected):
            raise SessionRejected(answer.session_id, answer.code, answer.detail)
        if not isinstance(answer, Done):
            raise OuroactorsError(f"unexpected answer {answer!r}")
        return answer

    # -- events ---------------------------------------------------------------------------------------------

    def read(self, session_id: str, after: int = 0, limit: int = 256, wait_s: float = 0.0) -> EventsRead:
        """Committed events after ``after``; ``wait_s`` > 0 holds the read until one is committed (a long poll).

        A held poll may be answered twice (by the session's coordinator the moment its events are durable, and
        late by the directory's safety net): each read carries its own request id and takes only its answer.
        """
        answer: EventsRead = self.system.ask(
            self.directory, ReadEvents(session_id, after, limit, wait_s, uuid.uuid4().hex, False, self.principal,
                                       token=self.token), wait_s + ASK_TIMEOUT_S)
        return answer

    def _batches(self, session_id: str, after: int, wait_s: float) -> Iterator[EventsRead]:
        """One read; with ``wait_s`` a stream: the session's coordinator sends each commit's events as it becomes
        durable, until ``wait_s`` ends (a ``final`` answer). A stream that goes quiet past its end (its coordinator
        died) just ends: the caller reads again from where it is."""
        request_id = uuid.uuid4().hex
        stream = wait_s > 0 and hasattr(self.system, "listen_tagged")
        started = time.monotonic()
        batch: EventsRead = self.system.ask(
            self.directory, ReadEvents(session_id, after, 256, wait_s, request_id, stream, self.principal,
                                       token=self.token), wait_s + ASK_TIMEOUT_S)
        try:
            yield batch
            while stream and not batch.final:
                left = max(0.0, wait_s - (time.monotonic() - started))
                following = self.system.listen_tagged(request_id, left + STREAM_SLACK_S)
                if not isinstance(following, EventsRead):
                    return
                batch = following
                yield batch
        finally:
            if stream and not batch.final:  # the caller stopped reading (a break, `until`): end it at the source
                self._stop_reading(session_id, request_id)

    def _stop_reading(self, session_id: str, request_id: str) -> None:
        """Tell the directory this process is done with stream ``request_id`` (see
        :class:`~.runtime.coordinator.messages.StopReading`); a system already gone has nothing to stop."""
        try:
            self.system.tell(self.directory, StopReading(session_id, request_id, self.principal, token=self.token))
        except Exception as exc:  # the reader's own shutdown: the stream ends at its wait_s, as it always did
            log.debug("stopping stream %s of %s: %s", request_id, session_id, exc)

    def events(self, session_id: str, after: int = 0, *, follow: bool = False,
               idle_timeout: float | None = None, until: str | None = None) -> Iterator[PublishedEvent]:
        """The committed events after cursor ``after``, in order, each once.

        Without ``follow`` it ends at the last committed event. With ``follow`` it waits for more
        and ends when the session is terminal and drained, when an event of kind ``until`` was
        yielded, or after ``idle_timeout`` seconds without a new event (None: never). Following is
        the durable log read in this process, woken by the committers (``follow_direct``, the default
        where this process may read the data dir) — or a stream from the session's coordinator through
        the directory (see :meth:`_batches`), read again every ``FOLLOW_WAIT_S``.
        """
        if self.follow_direct:
            from .runtime.coordinator import direct_follow

            if self.token is not None:  # reading the store itself skips the directory's scope: ask it first
                self.show(session_id)

            yield from direct_follow.follow(self.data_dir, session_id, after, follow=follow,
                                            idle_timeout=idle_timeout, until=until)
            return
        cursor = after
        quiet_since = time.monotonic()
        while True:
            wait = FOLLOW_WAIT_S if follow else 0.0
            if follow and idle_timeout is not None:
                wait = max(0.0, min(wait, idle_timeout - (time.monotonic() - quiet_since)))
            state, moved = "", False
            for batch in self._batches(session_id, cursor, wait):
                for event in batch.events:
                    if event.cursor <= cursor:
                        continue  # sent twice (a late second answer overlaps a stream): each event is yielded once
                    if event.cursor != cursor + 1:  # the log is contiguous; anything else is a bug worth stopping on
                        raise OuroactorsError(f"session {session_id!r}: event {event.cursor} after {cursor}: a gap")
                    cursor = event.cursor
                    yield event
                    if until is not None and event.kind == until:
                        return
                if batch.events:
                    moved, quiet_since = True, time.monotonic()
                state = batch.state
            if moved:
                continue
            if not follow or state in ("completed", "failed", "cancelled"):
                return
            if idle_timeout is not None and time.monotonic() - quiet_since >= idle_timeout:
                return

    # -- export --------------------------------------------------------------------------------------------------

    def export(self, session_id: str) -> dict[str, Any]:
        """The session's whole durable history as one JSON-ready document — what ``ouroactors session export``
        writes (:mod:`ouroactors.runtime.coordinator.export`: record, next valid transitions, events, resume events,
        ledger effects, approvals, artifacts, journal). Read from the data dir's files in this process, by a principal
        that may read the session (asked first); an environment this process did not hold open is closed again, so
        a system started here later forks with no LMDB handle."""
        from .authorities.storage.env import StorageConfig, close_env, is_open, open_env
        from .runtime.coordinator.export import export_session

        self.show(session_id)  # may this principal read it? (an unknown session is an error here too)
        config = StorageConfig.under(self.data_dir)
        ours = not is_open(config)
        env = open_env(config)
        try:
            return export_session(env, session_id)
        finally:
            if ours:
                close_env(config)

    # -- artifacts ---------------------------------------------------------------------------------------------

    def artifacts(self, session_id: str) -> builtins.list[Any]:
        """What the session left in its workspace, named by content (:mod:`.runtime.coordinator.artifacts`):
        derived from its settled ledger effects, oldest first."""
        from .authorities.ledger.messages import ListEntries
        from .runtime.coordinator.artifacts import artifacts_of

        self.show(session_id)  # an unknown session is an error, not an empty list
        entries = ask_authority(self.system, LEDGER, ListEntries("ok", session_id, None, 0, 1_000_000))
        return artifacts_of(entries)

    def unknown_effects(self, session_id: str) -> builtins.list[Any]:
        """The session's effects whose outcome the ledger does not know (``ambiguous``: started, never settled —
        a runtime lost or a tool cancelled mid-run), oldest first. Nothing settles them by guessing: a reconciler
        does when the session recovers, else the operator (``ouroactors ledger settle``)."""
        from .authorities.ledger.messages import ListEntries

        self.show(session_id)  # an unknown session is an error, not an empty list
        return list(ask_authority(self.system, LEDGER, ListEntries("ambiguous", session_id, None, 0, 10_000)))

    # -- approvals (the operator path) --------------------------------------------------------------------

    def approvals(self, session_id: str, status: str | None = "pending") -> builtins.list[Any]:
        from .authorities.grants.actor import ListApprovals

        if self.token is not None:  # a principal of its own sees the approvals of the sessions it may read
            self.show(session_id)
        return list(ask_authority(self.system, GRANTS, ListApprovals(status, session_id)))

    def approve(self, session_id: str, approval_id: str, reason: str | None = None, *,
                expected_version: int | None = None) -> Any:
        """Approve as the data dir's operator. ``expected_version``: the state version the operator saw when
        deciding (default: the approval's own); an answer for another version is refused and recorded."""
        return self._answer(session_id, approval_id, True, reason, expected_version)

    def deny(self, session_id: str, approval_id: str, reason: str | None = None, *,
             expected_version: int | None = None) -> Any:
        return self._answer(session_id, approval_id, False, reason, expected_version)

    def _answer(self, session_id: str, approval_id: str, approve: bool, reason: str | None,
                expected_version: int | None) -> Any:
        from .authorities.grants.actor import AnswerApproval, ListApprovals
        from .authorities.grants.operators import read_credentials

        name, token = read_credentials(self.data_dir)  # the verified identity: grants checks the token
        # its id, or the id of the wait `session show` names (which pins the version and the call)
        approval = approval_of_wait(list(ask_authority(self.system, GRANTS, ListApprovals(None, session_id))),
                                    approval_id)
        if approval is None:
            raise OuroactorsError(f"session {session_id!r} has no approval {approval_id!r}")
        approval_id = approval.approval_id  # answered for exactly the call it was asked for, at the version seen
        version = approval.state_version if expected_version is None else expected_version
        answered = ask_authority(self.system, GRANTS, AnswerApproval(approval_id, approve, name, token,
                                                                     approval.call_digest, version, reason))
        nudged = self._ask(ApprovalAnswered(session_id, approval_id))  # the coordinator checks it as a resume event
        if isinstance(nudged, Rejected):
            raise SessionRejected(nudged.session_id, nudged.code, nudged.detail)
        return answered

    # -- compensation (the operator path) ------------------------------------------------------------------

    def compensate(self, effect_id: str, reason: str) -> Any:
        """Undo a file write (``write``/``edit``) of a session that holds no runtime, as the data dir's operator:
        the file back to its content from before (kept in the data dir), recorded in the ledger as a
        ``compensation`` effect of its own — started before the file is touched, settled after. Refused, with
        nothing changed, when the file changed since the write or its pre-image was not kept (see
        :mod:`ouroactors.runtime.execution.tools.compensation`). Answers the compensation's settled entry."""
        from .authorities.grants.operators import read_credentials
        from .authorities.ledger.domain import StartRequest, fingerprint
        from .authorities.ledger.messages import GetEntry, RecordSettled, RecordStarted
        from .runtime.execution.tools import compensation

        who, _ = read_credentials(self.data_dir)  # the operator the data dir names: the principal of the undo
        entry = ask_authority(self.system, LEDGER, GetEntry(effect_id))
        if entry.session_id is not None:
            view = self.show(entry.session_id)
            if view.state in ("running", "recovering"):
                raise OuroactorsError(f"session {entry.session_id!r} is {view.state}: its runtime may be writing; "
                                      "compensate once it is suspended, waiting, parked or ended")
        plan = compensation.plan(entry, str(self.data_dir))
        undo = f"compensate:{effect_id}"[:200]
        # admitted under the authorities as they are now, like any effect (the ledger refuses a stale snapshot)
        authority = {name: generation for name in ("storage", "grants", "workspace")
                     if (generation := current_generation(self.system, f"agent/{name}")) is not None}
        started = ask_authority(self.system, LEDGER, RecordStarted(StartRequest(
            effect_id=undo, kind="compensation", idempotency_key=undo,
            fingerprint=fingerprint("compensation", {"effect": effect_id, "after": plan.after}),
            principal=f"operator:{who}", session_id=entry.session_id, turn_id=None, call_id=None, authority=authority,
            grant=f"operator:{who}", cause=reason[:500], intent=plan.intent())))
        if started.answer != "created":
            raise OuroactorsError(f"{effect_id} was compensated before ({undo} is {started.entry.status.value})")
        evidence = compensation.apply(plan)
        return ask_authority(self.system, LEDGER, RecordSettled(undo, "ok", reason[:500], evidence)).entry

