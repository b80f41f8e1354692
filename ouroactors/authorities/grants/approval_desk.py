"""The grants authority's approvals desk: request, wait, answer, consume, list, expire.

Mixed into :class:`~.actor.Grants`; the decisions themselves are pure (:mod:`.approvals`). Who may answer is
this authority's policy (the ``answerers`` kwarg; by default the local operator), never the requester's; an
operator's answer is verified against the credentials in the data dir, committed, and only then told to the
waiter. An approval binds the digest of the policy it was asked under (:meth:`ApprovalDesk._policy_digest`).
Expired approvals are settled, and finished ones pruned, every second (the ``_EXPIRY`` wakeup).

At start, pending approvals no live interaction can wait for any more are denied with the reason: those a
durable session (the coordinator's record) still waits on are kept, the others — whose waiter lived in memory,
or whose session is over or moved on — are denied (see :mod:`.orphans`).
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import lmdb
from thespian.actors import WakeupMessage

from ...core import clock, faults
from ...core.codec import digest_of
from ..session_facts import Missing, Reader
from . import approvals as book
from . import orphans
from .approvals import Approval, ApprovalRefused, Refusal
from .inline import Policy, effective_rules
from .messages import (
    AnswerApproval,
    ConsumeApproval,
    ListApprovals,
    RequestApproval,
    ReviewApprovals,
    WaitApproval,
)
from .operators import load_operators, verify
from .posture import Posture
from .records import unreadable_for
from .rules import Rule

if TYPE_CHECKING:
    from ...supervision.calls import Asker
    from ...supervision.protocol import SystemContext

APPROVAL_COMMITTED = faults.register_point("grants.approval_committed", "an answer is durable, the waiter not yet told")
_EXPIRY = "ouroactors:approval-expiry"
log = logging.getLogger("ouroactors.grants")


class ApprovalDesk:
    """The approval handlers; the state they touch belongs to :class:`~.actor.Grants`."""

    env: lmdb.Environment
    fence: int | None
    session_facts: Reader
    context: SystemContext | None
    node_rules: tuple[Rule, ...]
    stored_rules: dict[str, tuple[str, ...]]
    postures: dict[str, str]
    protected: tuple[str, ...]
    answerers: tuple[str, ...]
    corrupt: dict[str, str]
    approvals: dict[str, Approval]
    waiters: dict[str, list[Asker]]
    max_pending: int
    max_pending_total: int
    keep_finished_ns: int
    keep_finished: int

    if TYPE_CHECKING:  # what the actor provides

        def send(self, targetAddr: Any, msg: Any) -> None: ...
        def asker_of(self, sender: Any) -> Asker: ...
        def answer_asker(self, asker: Asker, value: Any) -> None: ...
        def wakeupAfter(self, timePeriod: timedelta, payload: Any = None) -> None: ...
        def _commit(self, *, approvals: list[Approval] = ..., postures: dict[str, str] | None = None,
                    rules: dict[str, tuple[str, ...]] | None = None, forget: list[str] = ...,
                    policy: Policy | None = None) -> None: ...

    def _deny_orphans(self) -> None:
        """Deny the pending approvals no live interaction can wait for any more (see :mod:`.orphans`): a durable
        session still waiting on one keeps it; a waiter that lived in memory died with the process."""
        self._deny_unwaited([a for a in self.approvals.values() if a.pending], orphans.ORPHANED)

    def handle_ReviewApprovals(self, message: ReviewApprovals, sender: Any) -> list[Approval]:
        """Judge ``message.session_id``'s pending approvals again (:mod:`.orphans`, a review): those its durable
        session no longer waits on are denied and their waiters told. A session with no durable record is not
        judged (its waiter, if any, lives in memory). Answers the approvals denied."""
        pending = [a for a in self.approvals.values() if a.pending and a.session_id == message.session_id]
        if not pending or isinstance(self.session_facts(message.session_id), Missing):
            return []
        denied = self._deny_unwaited(pending, orphans.REVIEWED)
        for approval in denied:
            self._tell_waiters(approval)
        return denied

    def _deny_unwaited(self, pending: list[Approval], cause: str) -> list[Approval]:
        """Deny (one commit) each of ``pending`` that :func:`.orphans.judge` finds no durable session waits on."""
        if not pending:
            return []
        sessions = {session_id: self.session_facts(session_id) for session_id in {a.session_id for a in pending}}
        now = clock.time_ns()
        denied: list[Approval] = []
        for approval in pending:
            verdict = orphans.judge(approval, sessions[approval.session_id], cause)
            if isinstance(verdict, str):
                denied.append(book.deny_orphan(approval, now, verdict) or approval)
            elif verdict is orphans.KEEP:
                log.info("approval %s stays pending: session %r still waits on it durably", approval.approval_id,
                         approval.session_id)
        if denied:
            self._commit(approvals=denied)
        return denied

    def _policy_digest(self, session_id: str) -> str:
        """What an approval of ``session_id`` is asked under (see :mod:`.approvals`): the rules that apply to the
        session, its posture, the protected roots and who may answer."""
        rules = effective_rules(self.node_rules, self.stored_rules, session_id)
        parts = [sorted(str(rule) for rule in rules), self.postures.get(session_id, Posture.DEFAULT.value),
                 list(self.protected), list(self.answerers)]
        unreadable = unreadable_for(self.corrupt, session_id)  # a repaired record changes the policy
        return digest_of([*parts, unreadable] if unreadable else parts)

    def handle_RequestApproval(self, message: RequestApproval, sender: Any) -> Approval:
        now = clock.time_ns()
        approval = book.request(
            list(self.approvals.values()), approval_id=f"approval-{uuid.uuid4().hex[:12]}",
            session_id=message.session_id, tool=message.tool, call_digest=digest_of([message.tool, message.arguments]),
            state_version=message.state_version, answerers=self.answerers,
            deadline_ns=now + int(message.timeout_s * 1e9), now_ns=now, max_pending=self.max_pending,
            max_pending_total=self.max_pending_total, arguments=message.arguments,
            policy=self._policy_digest(message.session_id),
        )
        self._commit(approvals=[approval])
        return approval

    def handle_WaitApproval(self, message: WaitApproval, sender: Any) -> Approval | None:
        approval = self._approval(message.approval_id)
        if approval.pending:
            self.waiters.setdefault(approval.approval_id, []).append(self.asker_of(sender))  # tagged as asked
            return None  # answered when decided
        return approval

    def handle_AnswerApproval(self, message: AnswerApproval, sender: Any) -> Approval:
        approval = self._approval(message.approval_id)
        assert self.context is not None
        if not verify(load_operators(self.context.data_dir), message.operator, message.token):
            forged = f"answer claiming {message.operator!r}: credentials not verified"
            self._commit(approvals=[book.refuse(approval, forged)])  # the refusal is recorded
            raise ApprovalRefused(forged)
        try:
            decided = book.answer(approval, approve=message.approve, operator=message.operator,
                                  call_digest=message.call_digest, state_version=message.state_version,
                                  now_ns=clock.time_ns(), reason=message.reason)
        except Refusal as refusal:
            self._commit(approvals=[refusal.record])
            self._tell_waiters(refusal.record)
            raise ApprovalRefused(str(refusal)) from None
        if decided is approval:  # the same answer again (a retry): done already, nothing to record or tell
            return approval
        self._commit(approvals=[decided])  # durable before the waiter hears it
        faults.point(APPROVAL_COMMITTED)
        self._tell_waiters(decided)
        return decided

    def handle_ConsumeApproval(self, message: ConsumeApproval, sender: Any) -> Approval:
        approval = self._approval(message.approval_id)
        try:
            used = book.consume(approval, session_id=message.session_id, call_digest=message.call_digest,
                                state_version=message.state_version, now_ns=clock.time_ns(),
                                policy=self._policy_digest(message.session_id))
        except Refusal as refusal:
            self._commit(approvals=[refusal.record])
            raise ApprovalRefused(str(refusal)) from None
        self._commit(approvals=[used])
        return used

    def handle_ListApprovals(self, message: ListApprovals, sender: Any) -> list[Approval]:
        return sorted((a for a in self.approvals.values()
                       if (message.status is None or a.status == message.status)
                       and (message.session_id is None or a.session_id == message.session_id)),
                      key=lambda a: a.requested_ns)

    def handle_WakeupMessage(self, message: WakeupMessage, sender: Any) -> None:
        if message.payload == _EXPIRY:
            now = clock.time_ns()
            expired = [x for a in self.approvals.values() if (x := book.expire(a, now)) is not None]
            if expired:
                self._commit(approvals=expired)
                for approval in expired:
                    self._tell_waiters(approval)
            forget = book.prune(list(self.approvals.values()), now, keep_ns=self.keep_finished_ns,
                                keep_max=self.keep_finished)
            if forget:
                self._commit(forget=forget)
            self.wakeupAfter(timedelta(seconds=1), payload=_EXPIRY)

    def _approval(self, approval_id: str) -> Approval:
        approval = self.approvals.get(approval_id)
        if approval is None and f"approval/{approval_id}" in self.corrupt:
            raise ApprovalRefused(f"approval {approval_id!r} is corrupt (quarantined; not approved): "
                                  f"{self.corrupt[f'approval/{approval_id}']}")
        if approval is None:
            raise ApprovalRefused(f"no approval {approval_id!r}")
        return approval

    def _tell_waiters(self, approval: Approval) -> None:
        if approval.pending:
            return
        for waiter in self.waiters.pop(approval.approval_id, []):
            self.answer_asker(waiter, approval)
