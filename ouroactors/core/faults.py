"""Fault points: named places where a test plan can make this process fail on purpose.

Code at a durable boundary calls ``point("ledger.after_start")``. Disarmed, that costs one
module-global load and an ``is None`` check (no dict lookup, lock or allocation), so points stay
in production code. ``arm(plan)`` installs a :class:`FaultPlan` in *this* process only; plans
are frozen dataclasses, so they pickle and can be sent to the processes that should arm them.

Armed semantics (per process): every rule whose pattern matches counts a hit (exact compare
first, ``fnmatchcase`` only for patterns with glob characters, decided at arm time). All hit
counters of one call advance under one lock; the firing rules then act *outside* the lock in
rule order: DELAY sleeps and goes on, the first RAISE/EXIT that fires ends the call. Later rules
still count that hit but cannot fire on it, so ``nth`` always means "the nth time this point was
reached", whatever other rules did. A probability rule draws from its own ``Random(seed)`` on
every matching hit (even with its ``times`` spent): its sequence depends on seed and hits only.
A forked child inherits the armed plan and counters; its lock is replaced after fork.

Where several actors share one process (the simple base), ``arm(plan, actor=path)`` arms a plan for the actor at
``path`` and the actors below it only: a point applies the arming of the actor running it (named by
:func:`acting_as`, which the worker shell calls as each message is handled), or of its nearest armed ancestor, else
the process-wide one. Such an arming lasts while its ``alive`` says so (the system that made it runs).

A ``kill`` rule signals only this process, or the process that was its ``target`` actor when the plan was armed (pid
and start time resolved then, the start time checked as it fires; see :func:`_kill_victim`).

What a plan is (its rules and actions, checked when built, read from TOML) is
:mod:`.fault_plans`; its names are re-exported here, where callers have always found them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import logging
import os
import random
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from . import clock
from .fault_plans import (
    _GLOB_CHARS,
    FaultAction,
    FaultPlan,
    FaultRule,
    _resolve_exception,
    known_points,
    register_point,
)
from .fault_plans import _KNOWN_POINTS as _KNOWN_POINTS  # re-exported, as are the names below: their home
from .fault_plans import load_plan as load_plan
from .fault_plans import validate_plan as validate_plan
from .procs import process_start_ticks

__all__ = [
    "FaultAction",
    "FaultFiring",
    "FaultInjected",
    "FaultPlan",
    "FaultRule",
    "acting_as",
    "arm",
    "armed",
    "disarm",
    "firings",
    "known_points",
    "point",
    "quiet",
    "register_point",
    "validate_plan",
    "with_kill_target",
]

log = logging.getLogger(__name__)


class InjectedCommitRejected(Exception):
    """A fault plan says: the commit is rejected (nothing written)."""


class InjectedCommitUnknown(Exception):
    """A fault plan says: the commit outcome is unknown."""


class InjectedMapFull(Exception):
    """A fault plan says: the map is full (nothing written)."""


_STORAGE_EXCEPTIONS: dict[FaultAction, type[Exception]] = {
    FaultAction.COMMIT_REJECTED: InjectedCommitRejected,
    FaultAction.COMMIT_UNKNOWN: InjectedCommitUnknown,
    FaultAction.MAP_FULL: InjectedMapFull,
}
_ANSWERED = (FaultAction.DROP, FaultAction.DUPLICATE)  # returned to the caller, which acts


class FaultInjected(Exception):
    """Default exception of the RAISE action; names the point and the rule that fired."""

    def __init__(self, point: str, rule_index: int) -> None:
        super().__init__(f"fault injected at point {point!r} (rule {rule_index})")
        self.point = point
        self.rule_index = rule_index

    def __reduce__(self) -> tuple[Any, ...]:  # keep it picklable across processes
        return (type(self), (self.point, self.rule_index))


@dataclass(frozen=True)
class FaultFiring:
    """Record of one firing: which point, which rule, its matching-hit number, where and when.

    ``actor`` is the tree path of the actor whose message was being handled (see
    :func:`acting_as`), which is what tells actors apart when several share a process.
    """

    point: str
    rule_index: int
    action: FaultAction
    hit: int
    pid: int
    at_ns: int
    actor: str | None = None


class _Compiled:
    """Mutable per-arming state of one rule (counters, rng, resolved exception class)."""

    __slots__ = ("active_from", "exc_cls", "fired", "hits", "index", "is_glob", "pattern", "rng", "rule")

    def __init__(self, index: int, rule: FaultRule) -> None:
        self.index, self.rule, self.pattern = index, rule, rule.point
        self.is_glob = not _GLOB_CHARS.isdisjoint(rule.point)
        self.hits = self.fired = 0
        self.rng = random.Random(rule.seed) if rule.probability is not None else None
        self.exc_cls = _resolve_exception(rule.exception) if rule.exception else None
        self.active_from = None if rule.after_s is None else clock.monotonic() + rule.after_s

    def decide(self) -> bool:
        """Count a matching hit; True if this hit fires (trigger satisfied and budget left)."""
        if self.active_from is not None:
            if clock.monotonic() < self.active_from:
                return False  # dormant: the hit does not count
            self.active_from = None
        self.hits += 1
        rule = self.rule
        if self.rng is not None:
            hit = self.rng.random() < rule.probability  # type: ignore[operator]
        elif rule.nth is not None:
            hit = self.hits == rule.nth
        elif rule.every is not None:
            hit = self.hits % rule.every == 0
        else:
            hit = True
        return hit and (rule.times is None or self.fired < rule.times)


class _Armed:
    def __init__(self, plan: FaultPlan, on_fire: Callable[[FaultFiring], None] | None) -> None:
        self.plan, self.on_fire = plan, on_fire
        self.rules = [_Compiled(i, r) for i, r in enumerate(plan.rules)]
        self.lock = threading.Lock()
        self.firings: list[FaultFiring] = []
        self.forks_left = plan.forks  # see FaultPlan.forks
        self.skips_left = plan.skip_forks  # see FaultPlan.skip_forks


_ARMED: _Armed | None = None  # armed for the whole process; with _SCOPED the fast-path flags: None returns at once
# armed for one actor (and the actors below it) where several share this process: path -> (arming, on_fire, alive)
_SCOPED: dict[str, tuple[_Armed, Callable[[FaultFiring], None] | None, Callable[[], bool] | None]] | None = None
_LAST: _Armed | None = None  # last armed state, kept after disarm() so firings() stays readable
_ACTOR: str | None = None  # the actor handling a message in this thread of control (see acting_as)
# How a kill rule kills in this process; None: SIGKILL. A simulated system (one process for every
# actor) installs one that ends the actor instead (ouroactors.system._simulation).
_KILLER: Callable[[FaultRule], None] | None = None


def set_killer(killer: Callable[[FaultRule], None] | None) -> Callable[[FaultRule], None] | None:
    """Install how ``kill`` rules kill in this process (None: SIGKILL); returns the previous one."""
    global _KILLER
    previous, _KILLER = _KILLER, killer
    return previous


def acting_as(path: str | None) -> None:
    """Name the actor whose message is being handled now; firings record it.

    The worker shell calls this per message. In a process per actor it never changes; on the
    simple base, where every actor shares one process and one thread, it is what attributes a
    firing to the right actor.
    """
    global _ACTOR
    _ACTOR = path


def _reset_lock_in_child() -> None:
    for state in (_ARMED, _LAST, *(entry[0] for entry in (_SCOPED or {}).values())):
        if state is not None:
            state.lock = threading.Lock()


def _count_fork_in_parent() -> None:
    """A plan armed for a number of forks (:attr:`FaultPlan.forks`) disarms this process after the last one; the
    forks it skips first (:attr:`FaultPlan.skip_forks`) do not count."""
    global _ARMED
    state = _ARMED
    if state is None:
        return
    if state.skips_left > 0:
        state.skips_left -= 1
        return
    if state.forks_left is None:
        return
    state.forks_left -= 1
    if state.forks_left <= 0:
        _ARMED = None


def _reset_in_child() -> None:
    global _ARMED
    _reset_lock_in_child()
    if _ARMED is not None and _ARMED.skips_left > 0:  # a skipped fork: this child runs free
        _ARMED = None
    elif _ARMED is not None:  # the child's own forks count afresh
        _ARMED.forks_left = _ARMED.plan.forks
        _ARMED.skips_left = _ARMED.plan.skip_forks


os.register_at_fork(after_in_child=_reset_in_child, after_in_parent=_count_fork_in_parent)


def arm(plan: FaultPlan, *, on_fire: Callable[[FaultFiring], None] | None = None, actor: str | None = None,
        alive: Callable[[], bool] | None = None) -> None:
    """Arm ``plan`` in this process, replacing any previous plan and resetting all counters.

    ``actor``: only for the actor at that tree path and the actors below it (a process several actors share: the
    simple base), told apart by :func:`acting_as`; this replaces only that actor's plan. Actors armed with an equal
    plan (and the same ``alive``) share one arming — one set of hit counters, as a process-wide arming has — and
    each arming of it resets them. ``alive``: the arming lasts while it says True (the system that made it still
    runs): once False, the arming is dropped at the next point or :func:`armed`.
    """
    global _ARMED, _LAST, _SCOPED
    if not isinstance(plan, FaultPlan):
        raise TypeError(f"arm() expects a FaultPlan, got {type(plan).__name__}")
    if actor is None:
        _LAST = _ARMED = _Armed(plan, on_fire)
        return
    scoped = dict(_SCOPED or {})
    scoped.pop(actor, None)
    state = _LAST = _Armed(plan, None)
    for path, (other, fire, other_alive) in scoped.items():
        if other.plan == plan and other_alive == alive:  # one arming: re-armed, its counters reset for all
            scoped[path] = (state, fire, other_alive)
    scoped[actor] = (state, on_fire, alive)
    _SCOPED = scoped


def disarm(actor: str | None = None) -> None:
    """Disarm (``actor``: only the plan armed for that actor); ``point()`` is a no-op again. ``firings()`` keeps the
    last arming's record."""
    global _ARMED, _SCOPED
    if actor is None:
        _ARMED = _SCOPED = None
    elif _SCOPED is not None and actor in _SCOPED:
        scoped = {path: entry for path, entry in _SCOPED.items() if path != actor}
        _SCOPED = scoped or None


def armed() -> FaultPlan | None:
    """The plan armed for the code running now: the running actor's (see :func:`arm`'s ``actor``), else the
    process's; or None."""
    state, _ = _state_here()
    return None if state is None else state.plan


def _state_here() -> tuple[_Armed | None, Callable[[FaultFiring], None] | None]:
    """The arming that applies where a point is reached: the running actor's, or its nearest armed ancestor's (an
    arming whose system has gone is dropped), else the process-wide one."""
    scoped, path = _SCOPED, _ACTOR
    while scoped is not None and path:
        entry = scoped.get(path)
        if entry is not None:
            state, on_fire, alive = entry
            if alive is None or alive():
                return state, on_fire
            _drop_dead()
            scoped = _SCOPED
        path = path.rpartition("/")[0]
    everywhere = _ARMED
    return everywhere, None if everywhere is None else everywhere.on_fire


def _drop_dead() -> None:
    global _SCOPED
    _SCOPED = {path: entry for path, entry in (_SCOPED or {}).items() if entry[2] is None or entry[2]()} or None


def firings() -> list[FaultFiring]:
    """Firings in this process since the last ``arm()``, in order (a copy)."""
    state = _LAST
    if state is None:
        return []
    with state.lock:
        return list(state.firings)


def point(name: str) -> FaultAction | None:
    """Fault point ``name``: no-op unless a plan is armed; otherwise act on matching rules.

    Returns ``drop`` or ``duplicate`` when such a rule fired (the caller does it), else None.
    """
    if (_ARMED is None and _SCOPED is None) or getattr(_QUIET, "on", False):
        return None
    return _armed_point(name)


_QUIET = threading.local()


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """No fault point fires, or counts a hit, in this thread while the block runs: for work that is not the system's
    (a spare runtime's rehearsal turn on a scratch data dir), whose points a plan must neither hit nor be shifted by."""
    _QUIET.on = True
    try:
        yield
    finally:
        _QUIET.on = False


def _armed_point(name: str) -> FaultAction | None:
    state, on_fire = _state_here()
    if state is None:  # disarmed between the check in point() and here, or armed for other actors only
        return None
    due: list[tuple[_Compiled, FaultFiring]] = []
    with state.lock:
        terminal = False
        for c in state.rules:
            if c.pattern != name and not (c.is_glob and fnmatch.fnmatchcase(name, c.pattern)):
                continue
            if c.decide() and not terminal:
                c.fired += 1
                firing = FaultFiring(name, c.index, c.rule.action, c.hits, os.getpid(), clock.time_ns(), _ACTOR)
                state.firings.append(firing)
                due.append((c, firing))
                terminal = c.rule.action is not FaultAction.DELAY
    for c, firing in due:
        if on_fire is not None:
            try:
                on_fire(firing)
            except Exception:
                log.exception("fault on_fire callback failed for %r", firing)
        action = c.rule.action
        if action is FaultAction.DELAY:
            clock.sleep(c.rule.delay_s)  # virtual time in a simulation: time passes, nothing waits
        elif action is FaultAction.EXIT:
            os._exit(c.rule.exit_code)
        elif action is FaultAction.KILL:
            if _KILLER is not None:
                _KILLER(c.rule)  # a simulated death: raises when the victim is the actor running here
                continue
            victim = _kill_victim(c.rule, name)
            if victim is not None:
                os.kill(victim, signal.SIGKILL)
        elif action in _ANSWERED:
            return action
        elif action in _STORAGE_EXCEPTIONS:
            raise _STORAGE_EXCEPTIONS[action](f"fault injected at point {name!r} (rule {c.index})")
        elif c.exc_cls is not None:
            raise c.exc_cls(f"fault injected at point {name!r} (rule {c.index})")
        else:
            raise FaultInjected(name, c.index)
    return None


def _kill_victim(rule: FaultRule, name: str) -> int | None:
    """The pid a kill rule firing at ``name`` may SIGKILL (None, warned: it cannot prove whom). No target: this
    process; a target: only the process that was that actor when armed (pid and start time resolved then by
    :func:`with_kill_target`, the start time checked now), never a pid without its start time, nor pid <= 1."""
    if rule.target is None:
        if rule.target_pid is None:
            return os.getpid()
        problem = "names a pid but no target actor"
    elif rule.target_pid is None or rule.target_start is None:
        problem = "was never resolved to the target's process (a plan is armed through the system, which resolves it)"
    elif rule.target_pid <= 1:
        problem = f"names pid {rule.target_pid}, which is no actor's"
    elif process_start_ticks(rule.target_pid) != rule.target_start:
        problem = f"(pid {rule.target_pid}) is no longer that process"
    else:
        return rule.target_pid
    log.warning("fault at %r: kill target %s %s; not killing", name, rule.target, problem)
    return None


def with_kill_target(rule: FaultRule, pid: int) -> FaultRule:
    """``rule`` aimed at process ``pid`` as it is now (its start time pins the incarnation)."""
    return dataclasses.replace(rule, target_pid=pid, target_start=process_start_ticks(pid))
