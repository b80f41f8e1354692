"""Session posture: the first layer of a grant decision, and the one that only ever narrows.

The posture is durable session state (a resumed session comes back in the posture it left; the
grants actor stores it). It is judged by **effect class**, never by tool name, so asking to write
or execute through another tool (``Bash``, ``Write``, ``Edit``, ``shell``, an MCP tool …) cannot
slip past it:

* ``default`` — no restriction; the rules decide.
* ``plan`` — planning: ``write`` and ``execute`` are denied ("plan mode"); ``read`` and ``network``
  pass through to the rules.
* ``read_only`` — stricter: only ``read`` passes; ``write``, ``execute`` and ``network`` are denied
  ("read-only mode").

:func:`evaluate` applies the posture first and consults the rules only for what the posture lets
through, so no rule — not even a node-scope allow — can turn a posture deny into an allow. An
effect the posture does not know is refused by ``plan``/``read_only`` (they list what *passes*,
not what is refused). A posture value that is not a :class:`Posture` (a corrupt durable record)
fails closed: it is treated as ``read_only``, and the verdict says so. Anything raised while
evaluating is answered as ask ("engine error: …"), never allow.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

from .rules import Decision, Effect, Request, Rule, Verdict, safe_decide


class Posture(str, Enum):
    DEFAULT = "default"
    PLAN = "plan"
    READ_ONLY = "read_only"


PLAN_MODE = "plan mode"
READ_ONLY_MODE = "read-only mode"
_PASSES: dict[Posture, frozenset[Effect] | None] = {
    Posture.DEFAULT: None,  # everything passes to the rules
    Posture.PLAN: frozenset({Effect.READ, Effect.NETWORK}),
    Posture.READ_ONLY: frozenset({Effect.READ}),
}
_REASONS = {Posture.PLAN: PLAN_MODE, Posture.READ_ONLY: READ_ONLY_MODE}


def coerce_posture(value: Posture | str) -> tuple[Posture, str | None]:
    """``(posture, note)``: an unknown value becomes ``read_only`` with a note saying why."""
    try:
        return Posture(value), None
    except ValueError:
        return Posture.READ_ONLY, f"unknown posture {value!r} treated as read_only"


def apply_posture(posture: Posture | str, effect: Effect | str) -> Verdict | None:
    """A deny when the posture refuses ``effect``; None when the rules should decide."""
    posture, note = coerce_posture(posture)
    passes = _PASSES[posture]
    if passes is None:
        return None
    try:
        if Effect(effect) in passes:  # (a str enum hashes by name: coerce before the lookup)
            return None
    except ValueError:
        pass  # an effect this posture does not list is refused
    reason = _REASONS[posture] if note is None else f"{_REASONS[posture]} ({note})"
    return Verdict(Decision.DENY, reason, None)


def evaluate(request: Request, posture: Posture | str, rules: Sequence[Rule], protected: tuple[str, ...] = (),
             *, root: str | None = None) -> Verdict:
    """Posture first, then the rules — narrowing only; never raises, never allows on an error.

    ``root`` is the session's workspace root: relative paths (of the request and of the files its
    command writes) are resolved on disk against it, and relative globs cover only what really lies
    inside it. Without a root a relative path cannot be resolved, so it asks."""
    try:
        refused = apply_posture(posture, request.effect)
        if refused is not None:
            return refused
        return safe_decide(request, rules, protected=protected, root=root)
    except Exception as e:
        return Verdict(Decision.ASK, f"engine error: {type(e).__name__}: {e}", None)


__all__ = ["PLAN_MODE", "READ_ONLY_MODE", "Posture", "apply_posture", "coerce_posture", "evaluate"]
