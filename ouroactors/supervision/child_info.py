"""One row of ``which_children``: what an operator or a test sees of a child.

Kept apart from :mod:`.children` (the supervisor's records, which need the pydantic specs): the rows travel
pickled to whoever asked, and unpickling them must not import the spec machinery — ``ouroactors status``
and ``tree`` read nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ChildInfo:
    """One row of ``which_children``: what an operator or a test needs to see."""

    id: str
    status: str
    pid: int | None
    generation: int | None
    type: str
    actor: str
    restarts: int
    last_exit: str | None
    address: Any = None
    retry_in: float | None = None  # seconds until the next restart attempt, while backing off
    node: str | None = None  # the node (admin address) whose process runs the child
    # down with the group of this sibling, whose restart is backing off and will start it again (rest_for_one,
    # one_for_all with backoff): its status stays OTP's "undefined"
    waits_for: str | None = None
