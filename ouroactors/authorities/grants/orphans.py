"""Which pending approvals survive a restart of the grants authority (pure).

DESIGN.md (Grants): "on coordinator restart, pending approvals that can no longer be tied to a live interaction are
denied". An approval is tied to a live interaction in one of two ways:

* **a durable wait** — a coordinator-managed session parks the call (``OpenSession.park_approvals``) and moves to
  ``waiting:approval`` at state version W with a :class:`~ouroactors.runtime.coordinator.record.PendingWait` of kind
  ``approval`` binding the call's digest (``proposal_digest``) and W (``issued_at_version``); it then asks grants
  for an approval of that digest at W (:mod:`ouroactors.runtime.coordinator.waits`) and polls for the answer. The
  wait survives every restart (seed 001: "An approval may arrive tomorrow"), so the approval must too;
* **an in-memory waiter** — a runtime that waits itself (a bare runtime, ``park_approvals`` False) asks grants
  with :class:`~.messages.WaitApproval`. Such a waiter dies with the grants process, so after a restart nobody
  waits for its approval any more.

So at start the authority reads each pending approval's session record (the coordinator's ``sessions`` database in
the same environment, through the port of :mod:`..session_facts`) and :func:`judge` decides, one row of this
table per case (first match wins):

====================================================  =======================================================
the approval's session record                          decision
====================================================  =======================================================
approval not pending                                   nothing to decide (``None``)
no record (no coordinator manages the session: the     deny — :data:`ORPHANED` (its waiter died with the
waiter was in memory), or an id no record can have     process)
does not decode (quarantined by the session store)     deny — fail closed, the reason names the record
terminal (completed, failed, cancelled)                deny — the session is over
any state but ``waiting:approval``                     deny — the session is not waiting on an approval
``waiting:approval`` at another state version          deny — the session moved on (the answer would be stale)
``waiting:approval`` at its version, no approval wait  deny — the session waits on another call
of its call digest issued at that version
``waiting:approval`` at its version, with that wait    **keep** — the durable session still waits on it
====================================================  =======================================================

The same table answers a **review** (:class:`~.messages.ReviewApprovals`): a coordinator that cancels its session asks
grants to judge that session's pending approvals again, so that one nobody will wait for is denied at once rather
than left pending until its deadline or the next restart (an operator answering it would be told only then that
the session is gone). A review judges only sessions with a durable record: a waiter in memory is alive while its
process is. Its reasons start with :data:`REVIEWED` instead.

Every deny reason starts with :data:`ORPHANED` (what happened) and says why after it. The wait's own id is the
coordinator's (``ask.v<W>.<digest>``), not the approval's: the binding is the session, the call digest and the
version, which is exactly what the coordinator looks an approval up by.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..session_facts import Missing, SessionFacts, Undecodable
from .approvals import Approval

__all__ = ["KEEP", "ORPHANED", "REVIEWED", "Keep", "Missing", "Undecodable", "judge"]

ORPHANED = "grants authority restarted: no live interaction waits for this approval any more"
REVIEWED = "its session was reviewed: no live interaction waits for this approval any more"
WAITING_APPROVAL = "waiting:approval"  # the coordinator's workflow state of a session parked on an approval


@dataclass(frozen=True)
class Keep:
    """The approval stays pending: a durable session waits on it."""


KEEP = Keep()
Session = SessionFacts | Missing | Undecodable  # read through the coordinator's port (..session_facts)


def judge(approval: Approval, session: Session, cause: str = ORPHANED) -> Keep | str | None:
    """``None``: not pending (nothing to decide); :data:`KEEP`; or the reason to deny it (see the module table),
    starting with ``cause`` (:data:`ORPHANED` at a restart, :data:`REVIEWED` for a review)."""
    if not approval.pending:
        return None
    if isinstance(session, Missing):
        return f"{cause} (session {approval.session_id!r} has no durable record: its waiter was in memory)"
    if isinstance(session, Undecodable):
        return f"{cause} (the record of session {approval.session_id!r} does not decode: {session.detail})"
    if session.terminal:
        return f"{cause} (session {approval.session_id!r} is {session.state})"
    if session.state != WAITING_APPROVAL:
        return f"{cause} (session {approval.session_id!r} is {session.state}, not waiting on an approval)"
    if session.state_version != approval.state_version:
        return (f"{cause} (session {approval.session_id!r} waits at state version {session.state_version}, "
                f"the approval was asked at {approval.state_version})")
    if not any(w.proposal_digest == approval.call_digest and w.issued_at_version == approval.state_version
               for w in session.approval_waits):
        return f"{cause} (session {approval.session_id!r} waits on another call)"
    return KEEP
