"""What a caller outside the system sends a supervisor or an authority, and the plain positive answer.

Kept apart from :mod:`.protocol` (every message between supervisors and children): a process that only asks
a running system — ``ouroactors status``, ``tree``, the thin client of :mod:`ouroactors.system.client` —
pickles and unpickles these few and nothing else, and a module of frozen dataclasses costs its import
time per class. :mod:`.protocol` re-exports them.

**Correlation.** A supervisor answers an :class:`AdminCall` with the bare value (OTP's reply), which says
nothing about which call it answers: an actor that gave up on a call (timed out) and asks the same supervisor
again could take the late answer of the first for the answer of the second. A caller that may do so sets
``ref`` (a str it chose, unique among its calls); the supervisor then answers :class:`AdminAnswer` with that
``ref``, so the caller keeps the answer of the call it waits for and drops any other. Without ``ref`` the
answer is the bare value, exactly as before. A ``ref`` that is not a str of 1 to :data:`MAX_REF_CHARS`
characters is refused (``BadRequest`` naming ``AdminCall.ref``, bare: the ref itself cannot be trusted).
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
    ref: str | None = None  # the caller's correlation id: set, the answer is AdminAnswer(ref, value)


MAX_REF_CHARS = 128


def ref_problem(ref: object) -> str | None:
    """What is wrong with ``ref`` as an :class:`AdminCall`'s ``ref`` (None: nothing; None itself is no ref)."""
    if ref is None:
        return None
    if type(ref) is not str:
        return f"must be a str or None, not {type(ref).__name__}"
    if not 1 <= len(ref) <= MAX_REF_CHARS:
        return f"must be 1 to {MAX_REF_CHARS} characters, not {len(ref)}"
    return None


@dataclass(frozen=True)
class AdminAnswer:
    """A supervisor → the caller of an :class:`AdminCall` that carried ``ref``: its answer, ``value`` (what the
    call without a ref is answered with: an :class:`Ok`, a value or an error)."""

    ref: str
    value: Any


@dataclass(frozen=True)
class Stamped:
    """A request to an authority, stamped with the generation the sender was bound to."""

    generation: int | None
    payload: Any


@dataclass(frozen=True)
class Ok:
    """A positive answer with no value (so an answer is never ``None``, thespian's "no answer")."""

    value: Any = None
