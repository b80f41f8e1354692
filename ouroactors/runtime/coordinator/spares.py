"""Spare runtimes: a process started before a message needs it, and the checks before a coordinator uses one (pure).

A session's runtime is a new process for every message (a suspended session holds none), and starting it — the
execution supervisor forks, the child reports its start — is the largest single part of a message's way to its
turn (~20-25 ms measured, of ~60 ms before the turn runs). So the session directory may keep ``spare_runtimes``
runtimes started ahead (a tree kwarg of ``agent/sessions``; ``supervision_trees/agent.toml`` keeps one) and offer
one with each command that may start a runtime (:data:`STARTS_A_RUNTIME`: a message, an approval's answer, a job's
completion, a resume; :class:`~.messages.ForSession`'s ``spare``) — and to the session's coordinator when it resumes
a turn itself (a timer due, an approval found answered, its recovery), on its asking
(:class:`~.messages.SpareWanted`, answered :class:`~.messages.SpareOffer`). It starts the next one right after that
forward, as a job of its own (nothing on the command's way waits for it) — or, when it had none to offer, once
the coordinator says it started the command's runtime itself (:class:`~.messages.RuntimeStarted`; at most
:data:`REFILL_COLD_S` later) — and only after such a command: an idle node keeps at most what it had. A spare nobody
opens ends itself (``Runtime``'s ``unopened_limit_s``, 300 s by default), so none outlives a crashed directory for
long, and the directory offers none older than :data:`SPARE_MAX_AGE_S` (a tree that sets the limit lower gets
offers that may be gone: the open's watch finds that and starts another runtime, seconds later).

**Whose offer is taken as it is.** A coordinator is started by its directory, which passes its own address
(``start_child``'s arguments come from the supervisor, not from a message anybody could send). A spare offered by
that sender came from the execution supervisor's own answer, and is used at once — only its generation is checked:
a runtime's generation must be above every one the session had, so a spare older than the session's last runtime
is not used. **Any other offer** (a coordinator whose directory has restarted since, or whoever holds the system's
secret sending a ``ForSession`` naming any address) is checked before the coordinator names it in its record: the
execution supervisor must say that child key is running as that generation at that address
(:func:`child_refusal`), and the runtime that it serves no session yet (:func:`status_refusal`). A refusal falls
back to starting a runtime as before; an offered runtime is never stopped for it.

A spare that died before it is opened is found by the open's own watch (:meth:`~.runtimes.RuntimeLink._open`), and
the turn starts another runtime. Two coordinators offered the same spare (a forged copy of an offer) can both
pass the checks; the runtime opens only the first session and answers the second ``AlreadyOpen``, on which that
coordinator releases its lease, leaves the runtime alone and starts another (:class:`~.runtimes.RuntimeTaken`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .messages import ApprovalAnswered, CompleteJob, ControlSession, SendMessage
from .workflow import State

# With no spare to offer, the coordinator starts a runtime itself, and the refill waits for its word that it has
# (:class:`~.messages.RuntimeStarted`), so that the spare is started after that one: a spare is usable by a session
# only while it is newer than the session's last runtime (generations only grow), so a spare started first would be
# refused by that very session at its next command. A coordinator that never says so (it died first) is waited for
# this long at most.
REFILL_COLD_S = 2.0
SPARE_MAX_AGE_S = 240.0  # the directory offers no spare older than this: below Runtime's default unopened limit


@dataclass(frozen=True)
class SpareChild:
    """What a coordinator knows of a spare its own directory offered (the fields of ``which_child`` it uses)."""

    id: str
    status: str
    generation: int
    address: Any


# The commands after which a session in these states runs a turn on a runtime of its own (none runs while it waits
# or is suspended): with these, the directory offers a spare. A command that turns out to start nothing (a duplicate,
# a stale version, "nothing to resume") leaves it unused, and the coordinator stops it.
STARTS_A_RUNTIME: dict[tuple[type, str | None], frozenset[State]] = {
    (SendMessage, None): frozenset({State.SUSPENDED}),
    (ApprovalAnswered, None): frozenset({State.WAITING_APPROVAL}),
    (CompleteJob, None): frozenset({State.WAITING_JOB}),
    (ControlSession, "resume"): frozenset({State.SUSPENDED, State.PARKED}),  # an interrupted turn; a retried recovery
}


def may_start_a_runtime(request: Any, state: State) -> bool:
    """Whether ``request`` for a session in ``state`` may start a runtime (:data:`STARTS_A_RUNTIME`)."""
    action = getattr(request, "action", None) if isinstance(request, ControlSession) else None
    return state in STARTS_A_RUNTIME.get((type(request), action), frozenset())


def take_fresh(spares: list[tuple[Any, float]], now: float) -> Any:
    """Pop and answer the oldest of ``spares`` (``(spare, started_at)``, oldest first) started less than
    :data:`SPARE_MAX_AGE_S` before ``now``; older ones, ending by themselves soon, are dropped. None if none is left."""
    while spares:
        spare, started = spares.pop(0)
        if now - started < SPARE_MAX_AGE_S:
            return spare
    return None


def child_refusal(spare: Any, child: Any, last_generation: int) -> str | None:
    """Why the offered ``spare`` must not be used, judged from the execution supervisor's answer to
    ``which_child(spare.key)`` (``child``) and the newest runtime generation the session has had; or None."""
    if getattr(child, "status", None) != "running":
        return f"child {spare.key!r} of the execution supervisor is not running ({getattr(child, 'status', child)!r})"
    if getattr(child, "generation", None) != spare.generation:
        return f"child {spare.key!r} is generation {getattr(child, 'generation', None)}, not {spare.generation}"
    if getattr(child, "address", None) != spare.address:
        return f"child {spare.key!r} is not at the address offered"
    if spare.generation <= last_generation:
        return f"generation {spare.generation} is not above the session's last runtime ({last_generation})"
    return None


def status_refusal(spare: Any, status: Any) -> str | None:
    """Why the offered ``spare`` must not be used, judged from the runtime's own ``RuntimeStatus``; or None."""
    if status is None:
        return "the runtime did not say what it serves"
    if getattr(status, "generation", None) != spare.generation:
        return f"the runtime says it is generation {getattr(status, 'generation', None)}, not {spare.generation}"
    if getattr(status, "session_id", "?") is not None:
        return f"the runtime already serves session {getattr(status, 'session_id', '?')!r}"
    return None


__all__ = [
    "REFILL_COLD_S", "SPARE_MAX_AGE_S", "STARTS_A_RUNTIME", "SpareChild", "child_refusal",
    "may_start_a_runtime", "status_refusal", "take_fresh",
]
