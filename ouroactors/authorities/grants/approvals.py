"""Durable approvals as pure decisions: who may answer, until when, for which exact call.

An approval binds: its id, the requesting session, the exact call (tool + canonical argument
digest, and the canonical arguments themselves, which the operator is shown), the session state
version it refers to, the operators allowed to answer (the authority's policy, never the
requester's choice), and a deadline. Each session has a bounded queue of pending approvals, and
the node a global bound; finished approvals are kept for a retention period and at most a bounded
number of them (:func:`prune`). The answer is committed before the waiter hears it (the actor does
that), and an approval is **consumed exactly once, before its deadline**.

An answer is refused — and the refusal recorded on the approval — when it comes from an operator
not allowed to answer, after the deadline, for another state version, for a call whose arguments
changed, or for an approval no longer pending (a replay). Consuming is refused for anything but an
approved, unconsumed approval of the same session, call and version whose deadline has not passed.

**The policy it was asked under.** An approval also binds the digest of the session's policy when it was
asked (:attr:`Approval.policy`: the rules that apply to the session, its posture, the protected roots and
who may answer — the authority computes it). An operator answers *this call under that policy*; if the
policy changed before the approval is used (rules added or revoked, the posture switched, other answerers
configured) — typically while the session was suspended waiting for the answer — using it is refused, and
the call must be asked again under the policy that now applies. An approval recorded before this field
existed has no policy digest and is not checked against one.

Operators are identities the authority verifies (see :mod:`.operators`), never names a request
merely asserts.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ...core.errors import OuroactorsError

Status = Literal["pending", "approved", "denied", "expired", "consumed"]
MAX_REFUSALS_KEPT = 20


class ApprovalRefused(OuroactorsError, ValueError):
    """An approval request, answer or use was refused; only the refusal was recorded."""


@dataclass(frozen=True)
class Approval:
    approval_id: str
    session_id: str
    tool: str
    call_digest: str
    state_version: int
    answerers: tuple[str, ...]  # operator names allowed to answer ("*": any verified operator)
    deadline_ns: int
    requested_ns: int
    status: Status = "pending"
    answered_by: str | None = None
    answered_ns: int | None = None
    reason: str | None = None
    refusals: tuple[str, ...] = field(default=())
    arguments: Any = None  # the canonical arguments the digest is of (shown to the operator)
    policy: str | None = None  # digest of the session's policy when it was asked (None: recorded before it was kept)

    @property
    def pending(self) -> bool:
        return self.status == "pending"


def request(existing: list[Approval], *, approval_id: str, session_id: str, tool: str, call_digest: str,
            state_version: int, answerers: tuple[str, ...], deadline_ns: int, now_ns: int,
            max_pending: int, max_pending_total: int | None = None, arguments: Any = None,
            policy: str | None = None) -> Approval:
    """A new pending approval, unless the session's queue (or the node's) is full."""
    if deadline_ns <= now_ns:
        raise ApprovalRefused(f"approval for {tool} in session {session_id!r}: deadline is already past")
    if not answerers:
        raise ApprovalRefused("an approval needs at least one operator allowed to answer it")
    waiting = sum(1 for a in existing if a.session_id == session_id and a.pending)
    if waiting >= max_pending:
        raise ApprovalRefused(
            f"session {session_id!r} already has {waiting} pending approvals (the queue holds {max_pending})"
        )
    if max_pending_total is not None:
        everywhere = sum(1 for a in existing if a.pending)
        if everywhere >= max_pending_total:
            raise ApprovalRefused(f"{everywhere} approvals are pending on this node (the bound is {max_pending_total})")
    return Approval(approval_id, session_id, tool, call_digest, state_version, answerers, deadline_ns, now_ns,
                    arguments=arguments, policy=policy)


def refuse(approval: Approval, why: str) -> Approval:
    """The approval with one more recorded refusal (bounded)."""
    return replace(approval, refusals=(*approval.refusals, why)[-MAX_REFUSALS_KEPT:])


def answer(approval: Approval, *, approve: bool, operator: str, call_digest: str, state_version: int,
           now_ns: int, reason: str | None) -> Approval:
    """Decide an operator's (already verified) answer. Raises :class:`Refusal` with the record to keep.

    The same answer again — same operator, decision, reason, call and version: a retry after a lost reply or a
    timeout — is answered with the approval as it stands, changed in nothing (the caller commits nothing and tells
    no waiter): done already, not refused. Any other answer to an approval that is no longer pending is refused
    (an answer is final)."""
    if not approval.pending:
        if same_answer(approval, approve=approve, operator=operator, call_digest=call_digest,
                       state_version=state_version, reason=reason):
            return approval
        by = f" by {approval.answered_by}" if approval.answered_by else ""
        raise Refusal(refuse(approval, f"answer by {operator}: approval is {approval.status}{by} already "
                                       "(an answer is final)"))
    if now_ns > approval.deadline_ns:
        expired = replace(approval, status="expired", answered_ns=now_ns, reason="deadline passed")
        raise Refusal(refuse(expired, f"answer by {operator}: after the deadline"))
    if "*" not in approval.answerers and operator not in approval.answerers:
        raise Refusal(refuse(approval, f"answer by {operator}: not allowed (allowed: {', '.join(approval.answerers)})"))
    if state_version != approval.state_version:
        raise Refusal(refuse(approval, f"answer by {operator}: for state version {state_version}, "
                                       f"approval is for {approval.state_version}"))
    if call_digest != approval.call_digest:
        raise Refusal(refuse(approval, f"answer by {operator}: the call's arguments changed"))
    return replace(approval, status="approved" if approve else "denied", answered_by=operator,
                   answered_ns=now_ns, reason=reason)


def same_answer(approval: Approval, *, approve: bool, operator: str, call_digest: str, state_version: int,
                reason: str | None) -> bool:
    """Is this the answer ``approval`` was given (a used approval was approved)?"""
    given = ("approved", "consumed") if approve else ("denied",)
    return (approval.status in given and approval.answered_by == operator and approval.reason == reason
            and approval.call_digest == call_digest and approval.state_version == state_version)


def consume(approval: Approval, *, session_id: str, call_digest: str, state_version: int,
            now_ns: int | None = None, policy: str | None = None) -> Approval:
    """Use an approved approval for exactly the call it approved, exactly once, before its deadline, under the
    policy it was asked under (``policy``: the session's policy digest now; None: not checked).

    An approval answered in time but used after its deadline is expired, not used: the operator
    approved the call for that window, and the world may have moved on since.
    """
    if approval.status == "consumed":
        raise Refusal(refuse(approval, "use: already consumed (an approval works once)"))
    if approval.status != "approved":
        raise Refusal(refuse(approval, f"use: approval is {approval.status}"))
    if now_ns is not None and now_ns > approval.deadline_ns:
        expired = replace(approval, status="expired", reason="approved, but not used before the deadline")
        raise Refusal(refuse(expired, "use: after the deadline"))
    if session_id != approval.session_id:
        raise Refusal(refuse(approval, f"use: by session {session_id!r}, approval belongs to {approval.session_id!r}"))
    if call_digest != approval.call_digest or state_version != approval.state_version:
        raise Refusal(refuse(approval, "use: another call or state version than the one approved"))
    if policy is not None and approval.policy is not None and policy != approval.policy:
        raise Refusal(refuse(approval, f"use: the session's policy changed since the approval was asked (asked under "
                                       f"{approval.policy[:12]}, now {policy[:12]}): ask again"))
    return replace(approval, status="consumed")


def expire(approval: Approval, now_ns: int) -> Approval | None:
    """A pending approval past its deadline expires; so does an approved one nobody used in time."""
    if approval.pending and now_ns > approval.deadline_ns:
        return replace(approval, status="expired", answered_ns=now_ns, reason="deadline passed")
    if approval.status == "approved" and now_ns > approval.deadline_ns:
        return replace(approval, status="expired", reason="approved, but not used before the deadline")
    return None


def prune(approvals: list[Approval], now_ns: int, *, keep_ns: int, keep_max: int) -> list[str]:
    """The ids of finished approvals to forget: those finished more than ``keep_ns`` ago, then the
    oldest beyond ``keep_max``. Pending ones are never pruned (they are bounded by the queues)."""
    finished = sorted((a for a in approvals if not a.pending),
                      key=lambda a: (a.answered_ns or a.requested_ns, a.approval_id))
    old = [a.approval_id for a in finished if (a.answered_ns or a.requested_ns) + keep_ns < now_ns]
    gone = set(old)
    kept = [a for a in finished if a.approval_id not in gone]
    excess = [a.approval_id for a in kept[: max(0, len(kept) - keep_max)]]
    return [*old, *excess]


def deny_orphan(approval: Approval, now_ns: int, why: str) -> Approval | None:
    """After a restart, a pending approval no live interaction waits for is denied, with the reason."""
    if approval.pending:
        return replace(approval, status="denied", answered_ns=now_ns, answered_by="authority", reason=why)
    return None


class Refusal(Exception):
    """Internal: carries the approval record to persist with its refusal noted."""

    def __init__(self, record: Approval) -> None:
        super().__init__(record.refusals[-1] if record.refusals else "refused")
        self.record = record
