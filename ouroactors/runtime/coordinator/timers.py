"""Durable timers: a waiting session's due time lives in its record, and firing is a checked resume event.

The same goes for the expiry of an external job (seed 001: pending jobs and "their expiry rules"): its
``due_ns`` is indexed like a timer's, and when it passes the system's expiry event moves the session from
``waiting:external_job`` to ``suspended`` with the reason — no turn runs for it.

Nothing about a timer is held in memory that a restart would lose. The record's timer waits carry
``due_ns`` (wall clock of :mod:`ouroactors.core.clock`, so a simulation's virtual time drives them
like everything else); the store indexes the earliest one in ``session_timers`` in the same
transaction. A session's coordinator fires its own timer (:mod:`.waits`: a wakeup at the due time, a
look at every heartbeat, and at its recovery — so a timer that fell due while the node was down fires
when the boot sweep restarts the coordinator) and then starts the turn. :func:`fire_due` fires every
due timer of the store at once (tools and tests; it moves the sessions but starts no runtime). Either
way the event goes through the same checks as any other resume event, with an event id derived from
the session, wait and state version, so firing twice (two sweeps, a crash between fire and ack) is
refused as a duplicate and never resumes the session twice.

:func:`due` and :func:`next_due` are the pure schedule; :func:`fire_due` is the thin imperative part.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ...authorities.storage.commit import Committed
from ...core import clock
from ...core.errors import CorruptRecord
from .record import PendingWait, SessionRecord
from .resume import Kind, ResumeEvent, system_actor
from .store import SessionStore

__all__ = ["Fired", "due", "due_event", "expired_jobs", "expiry_event", "fire_due", "next_due", "timer_event"]


def due(waits: Iterable[PendingWait], now_ns: int) -> list[PendingWait]:
    """The timer waits due at ``now_ns`` (due time ≤ now), earliest first."""
    return sorted((w for w in waits if w.kind == "timer" and w.due_ns is not None and w.due_ns <= now_ns),
                  key=lambda w: (w.due_ns, w.wait_id))


def expired_jobs(waits: Iterable[PendingWait], now_ns: int) -> list[PendingWait]:
    """The external-job waits whose expiry passed at ``now_ns``, earliest first."""
    return sorted((w for w in waits if w.kind == "external_job" and w.due_ns is not None and w.due_ns <= now_ns),
                  key=lambda w: (w.due_ns, w.wait_id))


def next_due(waits: Iterable[PendingWait]) -> int | None:
    """When the next timer of these waits comes due (None: no timer)."""
    dues = [w.due_ns for w in waits if w.kind == "timer" and w.due_ns is not None]
    return min(dues) if dues else None


def timer_event(record: SessionRecord, wait: PendingWait) -> ResumeEvent:
    """The resume event a due timer fires: bound to the session, its first channel and its current version
    (the text the next turn starts with rides in its payload, kept with the accepted event)."""
    return ResumeEvent(event_id=f"timer.{wait.wait_id}.v{record.state_version}", kind=Kind.TIMER,
                       session_id=record.session_id, channel=record.channels[0], tenant=record.tenant,
                       actor=system_actor().name, expected_version=record.state_version, wait_id=wait.wait_id,
                       payload={"text": wait.text} if wait.text is not None else {})


def expiry_event(record: SessionRecord, wait: PendingWait) -> ResumeEvent:
    """The resume event that ends an external-job wait whose expiry passed (the system's, like a timer's: its id
    names the wait and the version, so applying it twice is a duplicate)."""
    return ResumeEvent(event_id=f"expiry.{wait.wait_id}.v{record.state_version}", kind=Kind.JOB_EXPIRY,
                       session_id=record.session_id, channel=record.channels[0], tenant=record.tenant,
                       actor=system_actor().name, expected_version=record.state_version, wait_id=wait.wait_id)


def due_event(record: SessionRecord, now_ns: int) -> ResumeEvent | None:
    """The first resume event that time alone makes due for ``record``: a timer firing or a job expiring."""
    fired = due(record.waits, now_ns)
    if fired:
        return timer_event(record, fired[0])
    expired = expired_jobs(record.waits, now_ns)
    return expiry_event(record, expired[0]) if expired else None


@dataclass(frozen=True)
class Fired:
    session_id: str
    wait_id: str
    accepted: bool
    detail: str


def fire_due(store: SessionStore, now_ns: int | None = None, limit: int = 1000) -> list[Fired]:
    """Fire every timer (and apply every job expiry) due at ``now_ns`` (default:
    :func:`ouroactors.core.clock.time_ns`) through ``store``.

    ``store`` is a :class:`~.store.SessionStore`. A session whose commit is not ``committed`` is
    reported (``accepted=False``, the outcome as detail) and stays due: the next sweep tries again.
    """
    now = clock.time_ns() if now_ns is None else now_ns
    fired: list[Fired] = []
    for _due, session_id in store.timers_due(now, limit):
        try:
            record = store.get(session_id)
        except CorruptRecord as exc:  # reported and quarantined by the store; the others still fire
            fired.append(Fired(session_id, "", False, f"corrupt: {exc}"))
            continue
        if record is None:
            continue
        event = due_event(record, now)
        if event is not None and event.wait_id is not None:
            wait_id = event.wait_id
            outcome = store.resume(session_id, event, system_actor(), now_ns=now)
            if not isinstance(outcome, Committed):
                fired.append(Fired(session_id, wait_id, False, f"{outcome.kind}: {outcome.reason}"))
            elif outcome.value.accepted:
                fired.append(Fired(session_id, wait_id, True, "resumed" if event.kind is Kind.TIMER else "expired"))
            else:
                rejection = outcome.value.rejection
                detail = f"{rejection.code}: {rejection.detail}" if rejection else "refused"
                fired.append(Fired(session_id, wait_id, False, detail))
    return fired
