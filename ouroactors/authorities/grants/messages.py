"""The grants authority's protocol: every request it takes, with the bounds checked at its door.

The annotations are the validation (see :mod:`ouroactors.core.boundary`): the worker checks and
rebuilds each of these before a handler runs, and answers a bad one with
:class:`~ouroactors.core.errors.BadRequest`. Every request must be stamped with the grants
generation except :class:`ListApprovals` (a read).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from ...core.boundary import Data, Name, Seconds, SessionId, Size, Text, Version
from ...core.errors import BadRequest, OuroactorsError
from .rules import Request, Verdict

Tool = Annotated[str, Size(1, 64)]
Digest = Annotated[str, Size(64, 64)]
RuleText = Annotated[str, Size(1, 1000)]
Root = Annotated[str, Size(1, 4096)]
MAX_ARGUMENTS_BYTES = 2000  # the canonical arguments are stored with the approval and shown to the operator
PRINCIPAL_BYTES = 200  # the principal becomes the session id of the decision's ledger entry


@dataclass(frozen=True)
class Decide:
    """Judge one request. ``root`` is the session's workspace root (what relative paths mean);
    without it the authority uses the root of the session's lease, if the workspace holds one."""

    request: Request
    root: Root | None = None

    def check(self) -> None:
        if len(self.request.principal.encode()) > PRINCIPAL_BYTES or not self.request.principal:
            raise BadRequest("Decide", "request.principal", f"must be 1 to {PRINCIPAL_BYTES} bytes",
                             f"{len(self.request.principal)} characters")
        if len(self.request.tool) > 64 or not self.request.tool:
            raise BadRequest("Decide", "request.tool", "must be 1 to 64 characters", repr(self.request.tool[:40]))


class UnknownSession(OuroactorsError):
    """A posture or session rule for a session that does not exist: refused, nothing stored (see :class:`SetPosture`).
    Worded as the session commands word it."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f"no session {session_id!r} (a posture or session rule is kept only for a session that "
                         "exists: nothing was stored)")


@dataclass(frozen=True)
class SetPosture:
    """Set a session's posture. ``session_must_exist``: refuse (:class:`UnknownSession`) unless a coordinator keeps
    a durable record of the session — what an operator names must exist, or a typo would protect nothing and a
    session created later under that id would inherit it (records are never deleted, so one that exists now is the
    session it names). False for a bare runtime's principal, which has no record."""

    session_id: SessionId
    posture: Annotated[str, Size(1, 32)]
    session_must_exist: bool = False


@dataclass(frozen=True)
class AddRules:
    """Add rules to a scope; ``session`` rules need the ``session_id`` they apply to (and only to it), and with
    ``session_must_exist`` that session must exist (as for :class:`SetPosture`)."""

    scope: Annotated[str, Size(1, 16)]
    rules: Annotated[tuple[RuleText, ...], Size(0, 64)]
    session_id: SessionId | None = None
    session_must_exist: bool = False

    def check(self) -> None:
        _check_session_scope("AddRules", self.scope, self.session_id)


@dataclass(frozen=True)
class RevokeRules:
    scope: Annotated[str, Size(1, 16)]
    rules: Annotated[tuple[RuleText, ...], Size(0, 64)]
    session_id: SessionId | None = None

    def check(self) -> None:
        _check_session_scope("RevokeRules", self.scope, self.session_id)


def _check_session_scope(message: str, scope: str, session_id: str | None) -> None:
    if scope == "session" and session_id is None:
        raise BadRequest(message, "session_id", "session rules apply to one session: name it")
    if scope != "session" and session_id is not None:
        raise BadRequest(message, "session_id", f"only session rules name a session (scope is {scope!r})")


@dataclass(frozen=True)
class RequestApproval:
    """Ask an operator. Who may answer is the authority's policy, never the requester's choice."""

    session_id: Name
    tool: Tool
    arguments: Annotated[Any, Data(MAX_ARGUMENTS_BYTES)]
    state_version: Version
    timeout_s: Seconds = 300.0


@dataclass(frozen=True)
class WaitApproval:
    approval_id: Name


@dataclass(frozen=True)
class AnswerApproval:
    approval_id: Name
    approve: bool
    operator: Name
    token: Annotated[str, Size(1, 256)]
    call_digest: Digest
    state_version: Version
    reason: Text | None = None


@dataclass(frozen=True)
class ConsumeApproval:
    approval_id: Name
    session_id: Name
    call_digest: Digest
    state_version: Version


@dataclass(frozen=True)
class ReviewApprovals:
    """Judge a session's pending approvals again (:mod:`.orphans`): deny those its durable session no longer waits
    on (asked by a coordinator cancelling its session). It can only deny what no durable session waits for."""

    session_id: Name


@dataclass(frozen=True)
class ListApprovals:
    status: Annotated[str, Size(1, 16)] | None = None
    session_id: Name | None = None


PROTOCOL: tuple[type, ...] = (Decide, SetPosture, AddRules, RevokeRules, RequestApproval, WaitApproval,
                              AnswerApproval, ConsumeApproval, ReviewApprovals, ListApprovals)
READS: tuple[type, ...] = (ListApprovals,)


@dataclass(frozen=True)
class Judged(Verdict):
    """The answer to :class:`Decide`: a verdict, whether it is in the ledger, and who decided.

    Every decision is offered to the ledger before it is answered. ``recorded`` says whether that
    commit succeeded: an allow that could not be recorded is answered ``ask`` (never allow); a
    deny or an ask that could not be recorded is still a deny or an ask, answered with
    ``recorded=False`` and the reason saying why it is not in the ledger.
    """

    recorded: bool = True
    generation: int | None = None  # the grants generation that decided
