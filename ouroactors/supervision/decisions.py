"""Supervision decisions as small tables: pure functions, no state, no I/O.

Each function is one rule of OTP's ``supervisor.erl`` written as data, so the rule can be read
and tested on its own:

* :func:`after_exit` — ``do_restart/3``: restart type × exit reason.
* :class:`RestartWindow` — ``add_restart``: the only owner of the intensity policy.
* :func:`auto_shutdown_due` — ``do_auto_shutdown/2``.
* :func:`restart_group` — which children a strategy restarts together.
* :func:`backoff_delay` — beyond OTP: how long to wait before a restart.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

from .reasons import ExitReason
from .specs import AutoShutdown, Backoff, RestartType, Strategy


class AfterExit(str, Enum):
    """What happens to a child that exited by itself."""

    RESTART = "restart"  # restart it (counts against intensity)
    KEEP = "keep"  # keep the spec, leave it not running (transient exiting normally)
    DELETE = "delete"  # forget the spec (temporary)


# do_restart/3: rows are restart types, columns are "exit was normal/shutdown" vs "abnormal".
_AFTER_EXIT: dict[tuple[RestartType, bool], AfterExit] = {
    (RestartType.PERMANENT, True): AfterExit.RESTART,
    (RestartType.PERMANENT, False): AfterExit.RESTART,
    (RestartType.TRANSIENT, True): AfterExit.KEEP,
    (RestartType.TRANSIENT, False): AfterExit.RESTART,
    (RestartType.TEMPORARY, True): AfterExit.DELETE,
    (RestartType.TEMPORARY, False): AfterExit.DELETE,
}


def after_exit(restart: RestartType, reason: ExitReason) -> AfterExit:
    """OTP's decision for a child that exited on its own (not terminated by its supervisor)."""
    return _AFTER_EXIT[(restart, reason.is_normal_exit)]


def is_abnormal(reason: ExitReason) -> bool:
    """Whether OTP would write a ``child_terminated`` report for this exit."""
    return not reason.is_normal_exit


@dataclass
class RestartWindow:
    """The sliding window of recent restarts (OTP's ``add_restart``).

    ``intensity`` restarts are allowed within any ``period`` seconds; the restart that would be
    the (intensity+1)-th inside the window is refused, and the supervisor must shut down. A group
    restart is one call. Each retry of a failed restart is another call. Timestamps are monotonic
    seconds supplied by the caller, so the policy is deterministic under test.
    """

    intensity: int
    period: float
    _stamps: deque[float] = field(default_factory=deque)

    def add(self, now: float) -> bool:
        """Record a restart at ``now``; False means the limit is exceeded (shut down)."""
        stamps = self._stamps
        while stamps and now - stamps[0] > self.period:
            stamps.popleft()
        stamps.append(now)
        return len(stamps) <= self.intensity

    @property
    def recent(self) -> int:
        return len(self._stamps)


def auto_shutdown_due(
    policy: AutoShutdown, exited_significant: bool, significant_still_running: bool
) -> bool:
    """``do_auto_shutdown/2``: only called for a child that exited by itself and is not restarted."""
    if policy is AutoShutdown.NEVER or not exited_significant:
        return False
    if policy is AutoShutdown.ANY_SIGNIFICANT:
        return True
    return not significant_still_running  # all_significant


def restart_group(strategy: Strategy, order: Sequence[str], failed: str) -> tuple[list[str], list[str]]:
    """Which children a restart of ``failed`` touches, given ids in start order.

    Returns ``(terminate, start)``: the running siblings to terminate first (in the order given,
    which the caller reverses for newest-first termination) and the children to start again, in
    start order. one_for_one and simple_one_for_one touch only the failed child.
    """
    if strategy is Strategy.ONE_FOR_ALL:
        return [c for c in order if c != failed], list(order)
    if strategy is Strategy.REST_FOR_ONE:
        after = list(order[order.index(failed) + 1 :])
        return after, [failed, *after]
    return [], [failed]


def backoff_delay(backoff: Backoff, consecutive: int, unit_random: float) -> float:
    """Seconds to wait before restart number ``consecutive`` (0-based) of a child.

    Exponential from ``min_s``, capped at ``max_s``, spread by ``jitter`` (a fraction, applied
    symmetrically using ``unit_random`` in [0, 1) so the caller controls the randomness).
    """
    base = min(backoff.max_s, backoff.min_s * (2 ** min(consecutive, 62)))
    spread = backoff.jitter * (2.0 * unit_random - 1.0)
    return max(0.0, base * (1.0 + spread))


def backoff_reset_after(backoff: Backoff) -> float:
    """How long a child must have run for its backoff to start again from ``min_s``."""
    return backoff.reset_after_s if backoff.reset_after_s is not None else (backoff.min_s + backoff.max_s) / 2
