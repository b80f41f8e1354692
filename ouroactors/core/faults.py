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
"""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
import importlib
import logging
import os
import random
import signal
import threading
from collections.abc import Callable, Iterable
from dataclasses import MISSING, dataclass, field, fields
from enum import Enum
from typing import Any

from . import clock
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
    "register_point",
    "validate_plan",
    "with_kill_target",
]

log = logging.getLogger(__name__)
_GLOB_CHARS = frozenset("*?[")


class FaultAction(str, Enum):
    """What a firing rule does.

    ``raise`` an exception; ``exit`` the process at once; ``delay`` and go on; ``kill`` — SIGKILL
    the actor named by ``target`` (its pid is resolved when the plan is armed) or, without a
    target, this process; ``drop`` / ``duplicate`` the message being delivered (at ``message.*``
    points, which answer the action to the caller); and the storage actions ``commit_rejected``,
    ``commit_unknown`` and ``map_full`` (raised as :class:`InjectedCommitRejected`, … for the
    storage commit contract to turn into its outcomes).
    """

    RAISE = "raise"
    EXIT = "exit"
    DELAY = "delay"
    KILL = "kill"
    DROP = "drop"
    DUPLICATE = "duplicate"
    COMMIT_REJECTED = "commit_rejected"
    COMMIT_UNKNOWN = "commit_unknown"
    MAP_FULL = "map_full"


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


def _resolve_exception(path: str) -> type[Exception]:
    """Import ``"module:Qual.Name"``, ``"module.Name"`` or a bare builtin name like ``"KeyError"``."""
    if ":" in path:
        module_name, _, attr = path.partition(":")
    elif "." in path:
        module_name, _, attr = path.rpartition(".")
    else:
        module_name, attr = "builtins", path
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ValueError(f"exception: cannot import {path!r}: {exc}")
    if not (isinstance(obj, type) and issubclass(obj, Exception)):
        raise ValueError(f"exception: {path!r} is not an Exception subclass")
    try:
        obj("probe")
    except Exception as exc:
        raise ValueError(f"exception: {path!r} cannot be constructed from a message: {exc}")
    return obj


@dataclass(frozen=True)
class FaultRule:
    """One rule of a plan. ``point`` is an exact name or an fnmatch glob (``"ledger.*"``).

    Trigger: at most one of ``nth`` (only the nth matching hit, 1-based), ``every`` (every n-th
    hit) and ``probability`` (with optional ``seed``); with none of them every hit fires.
    ``after_s`` keeps the rule dormant until that many seconds after the plan was armed (on the
    system's clock: virtual time in a simulation); hits before then do not count, so
    ``after_s=2, nth=1`` is "the first hit after two seconds". ``times`` caps the number of
    firings. ``delay_s`` is for DELAY, ``exit_code`` for EXIT
    (``os._exit``: no ``finally``, no atexit, no flush), ``exception`` for RAISE.
    """

    point: str
    action: FaultAction
    nth: int | None = None
    every: int | None = None
    probability: float | None = None
    seed: int | None = None
    after_s: float | None = None
    times: int | None = None
    delay_s: float = 0.0
    exit_code: int = 70
    exception: str | None = None
    target: str | None = None  # kill: the tree path of the actor to SIGKILL
    target_pid: int | None = None  # kill: resolved from ``target`` when the plan is armed
    # kill: the target process's start time (see with_kill_target); a target that has been
    # restarted since (a new process, perhaps reusing the pid) is then never killed by mistake
    target_start: int | None = None

    def __post_init__(self) -> None:
        def fail(name: str, why: str) -> ValueError:
            return ValueError(f"{name}: {why}, got {getattr(self, name)!r}")

        def number(v: object) -> bool:
            return isinstance(v, int | float) and not isinstance(v, bool)

        if not isinstance(self.point, str) or not self.point:
            raise fail("point", "must be a non-empty string")
        try:
            object.__setattr__(self, "action", FaultAction(self.action))
        except ValueError:
            allowed = ", ".join(repr(a.value) for a in FaultAction)
            raise ValueError(f"action: invalid value {self.action!r}; allowed: {allowed}")
        for name in ("nth", "every", "times"):
            v = getattr(self, name)
            if v is not None and (type(v) is not int or v < 1):
                raise fail(name, "must be an int >= 1")
        if type(self.exit_code) is not int or not 0 <= self.exit_code <= 255:
            raise fail("exit_code", "must be an int in [0, 255]")
        if self.seed is not None and type(self.seed) is not int:
            raise fail("seed", "must be an int")
        p = self.probability
        if p is not None and not (number(p) and 0 <= p <= 1):
            raise fail("probability", "must be a number in [0, 1]")
        if self.after_s is not None and not (number(self.after_s) and self.after_s >= 0):
            raise fail("after_s", "must be a number of seconds >= 0")
        if not (number(self.delay_s) and self.delay_s >= 0):
            raise fail("delay_s", "must be a number >= 0")
        triggers = [n for n in ("nth", "every", "probability") if getattr(self, n) is not None]
        if len(triggers) > 1:
            given = ", ".join(f"{n}={getattr(self, n)!r}" for n in triggers)
            raise ValueError(f"nth/every/probability: at most one may be given, got {given}")
        if self.seed is not None and p is None:
            raise fail("seed", "only meaningful together with probability")
        if self.delay_s and self.action is not FaultAction.DELAY:
            raise fail("delay_s", "only meaningful for action 'delay'")
        if (self.target is not None or self.target_pid is not None or self.target_start is not None) \
                and self.action is not FaultAction.KILL:
            raise fail("target", "only meaningful for action 'kill'")
        if self.target is not None and (not isinstance(self.target, str) or not self.target):
            raise fail("target", "must be a tree path such as 'agent/ledger'")
        if self.exception is not None:
            if self.action is not FaultAction.RAISE or not isinstance(self.exception, str):
                raise fail("exception", "must be an import path string, and only with action 'raise'")
            _resolve_exception(self.exception)


_RULE_KEYS = tuple(f.name for f in fields(FaultRule))
_REQUIRED_KEYS = tuple(f.name for f in fields(FaultRule) if f.default is MISSING)


def _unknown_key(where: str, key: object, allowed: tuple[str, ...]) -> ValueError:
    close = difflib.get_close_matches(str(key), allowed, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else f" (allowed: {', '.join(allowed)})"
    return ValueError(f"{where}unknown key {key!r}{hint}")


@dataclass(frozen=True)
class FaultPlan:
    """An ordered tuple of rules; picklable, and round-trips through :meth:`to_dict`.

    ``forks``: how many children forked by the armed process inherit the plan (None: all). The process disarms
    itself right after that many forks, in the parent's half of the fork: a plan armed in a supervisor for "the
    next child it starts" reaches exactly that child, never the restarts or replacements that follow it, however
    soon they come (a harness that disarms by asking would race them).
    """

    rules: tuple[FaultRule, ...] = field(default_factory=tuple)
    forks: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "rules", tuple(self.rules))
        if self.forks is not None and (not isinstance(self.forks, int) or isinstance(self.forks, bool)
                                       or self.forks < 1):
            raise ValueError(f"forks: a positive int or None, got {self.forks!r}")
        for i, rule in enumerate(self.rules):
            if not isinstance(rule, FaultRule):
                raise ValueError(f"rules[{i}]: expected a FaultRule, got {type(rule).__name__}")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FaultPlan:
        """Build from ``{"rules": [{"point": ..., "action": ..., ...}]}``; errors name the rule."""
        if not isinstance(data, dict):
            raise ValueError(f"plan: expected a dict, got {type(data).__name__}")
        for key in data:
            if key not in ("rules", "forks"):
                raise _unknown_key("plan: ", key, ("rules", "forks"))
        raw = data.get("rules", [])
        if not isinstance(raw, list | tuple):
            raise ValueError(f"rules: expected a list, got {type(raw).__name__}")
        rules = []
        for i, item in enumerate(raw):
            if not isinstance(item, dict):
                raise ValueError(f"rules[{i}]: expected a dict, got {type(item).__name__}")
            for key in item:
                if key not in _RULE_KEYS:
                    raise _unknown_key(f"rules[{i}]: ", key, _RULE_KEYS)
            for key in _REQUIRED_KEYS:
                if key not in item:
                    raise ValueError(f"rules[{i}]: missing required key {key!r}")
            try:
                rules.append(FaultRule(**item))
            except ValueError as exc:
                raise ValueError(f"rules[{i}]: {exc}")
        return cls(tuple(rules), forks=data.get("forks"))

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form; fields left at their default are omitted."""
        out = []
        for rule in self.rules:
            d: dict[str, Any] = {"point": rule.point, "action": rule.action.value}
            for f in fields(FaultRule):
                value = getattr(rule, f.name)
                if f.name not in d and value != f.default:
                    d[f.name] = value
            out.append(d)
        return {"rules": out} if self.forks is None else {"rules": out, "forks": self.forks}


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


_ARMED: _Armed | None = None  # the fast-path flag: None means point() returns at once
_LAST: _Armed | None = None  # last armed state, kept after disarm() so firings() stays readable
_KNOWN_POINTS: dict[str, str] = {}
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
    for state in (_ARMED, _LAST):
        if state is not None:
            state.lock = threading.Lock()


def _count_fork_in_parent() -> None:
    """A plan armed for a number of forks (:attr:`FaultPlan.forks`) disarms this process after the last one."""
    global _ARMED
    state = _ARMED
    if state is None or state.forks_left is None:
        return
    state.forks_left -= 1
    if state.forks_left <= 0:
        _ARMED = None


def _reset_in_child() -> None:
    _reset_lock_in_child()
    if _ARMED is not None:  # the child's own forks count afresh
        _ARMED.forks_left = _ARMED.plan.forks


os.register_at_fork(after_in_child=_reset_in_child, after_in_parent=_count_fork_in_parent)


def arm(plan: FaultPlan, *, on_fire: Callable[[FaultFiring], None] | None = None) -> None:
    """Arm ``plan`` in this process, replacing any previous plan and resetting all counters."""
    global _ARMED, _LAST
    if not isinstance(plan, FaultPlan):
        raise TypeError(f"arm() expects a FaultPlan, got {type(plan).__name__}")
    state = _Armed(plan, on_fire)
    _LAST = state
    _ARMED = state


def disarm() -> None:
    """Disarm; ``point()`` is a no-op again. ``firings()`` keeps the last arming's record."""
    global _ARMED
    _ARMED = None


def armed() -> FaultPlan | None:
    """The plan armed in this process, or None."""
    state = _ARMED
    return None if state is None else state.plan


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
    if _ARMED is None:
        return None
    return _armed_point(name)


def _armed_point(name: str) -> FaultAction | None:
    state = _ARMED
    if state is None:  # disarmed between the check in point() and here
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
        if state.on_fire is not None:
            try:
                state.on_fire(firing)
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
            victim = c.rule.target_pid or os.getpid()
            if c.rule.target_start is not None and process_start_ticks(victim) != c.rule.target_start:
                log.warning("fault at %r: kill target %s (pid %d) is no longer that process; not killing",
                            name, c.rule.target, victim)
                continue
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


def with_kill_target(rule: FaultRule, pid: int) -> FaultRule:
    """``rule`` aimed at process ``pid`` as it is now (its start time pins the incarnation)."""
    return dataclasses.replace(rule, target_pid=pid, target_start=process_start_ticks(pid))


def register_point(name: str, doc: str = "") -> str:
    """Declare a point name (for ``validate_plan`` and tooling); returns ``name``.

    Idempotent, so module reloads are harmless; a later non-empty ``doc`` replaces the old one.
    """
    if not isinstance(name, str) or not name or not _GLOB_CHARS.isdisjoint(name):
        raise ValueError(f"name: must be a non-empty string without glob characters, got {name!r}")
    if doc or name not in _KNOWN_POINTS:
        _KNOWN_POINTS[name] = doc
    return name


def known_points() -> dict[str, str]:
    """Registered point names and their docs, sorted by name (a copy)."""
    return dict(sorted(_KNOWN_POINTS.items()))


def validate_plan(plan: FaultPlan, extra_points: Iterable[str] = ()) -> list[str]:
    """Warnings for rules whose pattern matches no registered point nor one of ``extra_points``
    (for example ``message.<path>`` of the running actors): likely typos."""
    known = sorted(set(_KNOWN_POINTS) | set(extra_points))
    listing = ", ".join(known) if known else "(none registered)"
    warnings = []
    for i, rule in enumerate(plan.rules):
        if any(k == rule.point or fnmatch.fnmatchcase(k, rule.point) for k in known):
            continue
        close = difflib.get_close_matches(rule.point, known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        warnings.append(f"rules[{i}]: point {rule.point!r} matches no registered point{hint}; "
                        f"known points: {listing}")
    return warnings


def load_plan(path: str | os.PathLike[str]) -> FaultPlan:
    """Read a plan from TOML (``[[rules]]`` tables); errors name the file and the rule."""
    import tomllib

    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read fault plan: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: malformed TOML: {exc}") from None
    try:
        return FaultPlan.from_dict(data)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
