"""What the session directory checks itself before it creates a session or routes a command (small, one owner each).

* :func:`workspace_refusal` — a session's workspace is checked by the workspace authority when the session is
  *created*, with the rules a lease will apply (canonical path, an existing directory under an allowed root). A root
  the lease would refuse is bad input: refused then, naming it, with nothing stored — not found by the session's
  first message, whose turn could never start.
* :func:`already_cancelled` — a cancel of a cancelled session, from its owner, is done already: a retry after a
  lost answer or a timeout must not read as a failure. The session's coordinator has stopped, so the directory
  answers it.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import Any

from ...authorities.workspace.messages import CheckRoot
from ...core.errors import BadRequest
from ...supervision.protocol import Stamped
from .calls import Ask, TimedOut
from .messages import ControlSession, Done
from .principals import PrincipalCheck, Unverified
from .record import SessionRecord
from .views import view_of
from .workflow import State

CHECK_TIMEOUT_S = 10.0


def workspace_refusal(authorities: Mapping[str, Any], root: str) -> Generator[Ask, Any, str | None]:
    """Why the workspace authority would refuse to lease ``root`` (None: it would not; or the tree has no workspace
    authority, whose absence the lease reports). Not answered in time: refused too, so that nothing unchecked is
    stored (the creation can be retried)."""
    entry = authorities.get("workspace")
    if entry is None:
        return None
    answer = yield Ask(entry.address, Stamped(entry.generation, CheckRoot(root)), CHECK_TIMEOUT_S)
    if isinstance(answer, TimedOut):
        return f"the workspace authority did not answer within {CHECK_TIMEOUT_S:g} s; nothing was created, try again"
    if isinstance(answer, BadRequest):  # the workspace's door refused the root: what is wrong, not its message's name
        return answer.problem
    if isinstance(answer, BaseException):
        return str(answer)
    return None


def already_cancelled(request: Any, record: SessionRecord, principals: PrincipalCheck) -> Done | None:
    """``request`` is a cancel of the cancelled session ``record`` by its verified owner: done already. Anyone else,
    or a session that ended another way, gets None (the caller's error)."""
    if not (isinstance(request, ControlSession) and request.action == "cancel" and record.state is State.CANCELLED):
        return None
    verified = principals.verify(request.principal, request.token)
    if isinstance(verified, Unverified) or verified.name != record.principal:
        return None
    return Done(view_of(record, 0), f"cancelled already ({record.reason or 'no reason recorded'})")


__all__ = ["already_cancelled", "workspace_refusal"]
