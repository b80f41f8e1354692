"""What a caller outside the system sends a supervisor or an authority, and the plain positive answer.

Kept apart from :mod:`.protocol` (every message between supervisors and children): a process that only asks
a running system — ``ouroactors status``, ``tree``, the thin client of :mod:`ouroactors.system.client` —
pickles and unpickles these three and nothing else, and a module of frozen dataclasses costs its import
time per class. :mod:`.protocol` re-exports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .specs import ChildSpec


@dataclass(frozen=True)
class AdminCall:
    """A caller → a supervisor: one call of the OTP admin API."""

    op: str
    child_id: str | None = None
    spec: ChildSpec | None = None
    extra_args: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Stamped:
    """A request to an authority, stamped with the generation the sender was bound to."""

    generation: int | None
    payload: Any


@dataclass(frozen=True)
class Ok:
    """A positive answer with no value (so an answer is never ``None``, thespian's "no answer")."""

    value: Any = None
