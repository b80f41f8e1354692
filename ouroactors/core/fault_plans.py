"""Fault plans: what a plan says, checked when it is built, and how it is read and written.

A :class:`FaultPlan` is an ordered tuple of :class:`FaultRule`; each rule names a point (exact or
an ``fnmatch`` glob), a :class:`FaultAction` and its trigger. Rules validate every field on
construction (errors name the field; :meth:`FaultPlan.from_dict` and :func:`load_plan` prefix the
rule and the file), so a plan that exists is one :func:`~ouroactors.core.faults.arm` can install.
Plans are frozen dataclasses: they pickle, and are sent to the processes that should arm them.

What an armed plan does at a point (counting hits, firing, acting) is :mod:`ouroactors.core.faults`,
which re-exports everything here.
"""

from __future__ import annotations

import difflib
import fnmatch
import importlib
import os
from collections.abc import Iterable
from dataclasses import MISSING, dataclass, field, fields
from enum import Enum
from typing import Any

__all__ = [
    "MAX_SECONDS", "FaultAction", "FaultPlan", "FaultRule", "known_points", "load_plan", "register_point",
    "validate_plan",
]

MAX_SECONDS = 24 * 24 * 3600  # a rule's delay_s and after_s at most: 24 days, as a tree's timers


class FaultAction(str, Enum):
    """What a firing rule does.

    ``raise`` an exception; ``exit`` the process at once; ``delay`` and go on; ``kill`` — SIGKILL
    the actor named by ``target`` (its pid is resolved when the plan is armed) or, without a
    target, this process; ``drop`` / ``duplicate`` the message being delivered (at ``message.*``
    points, which answer the action to the caller); and the storage actions ``commit_rejected``,
    ``commit_unknown`` and ``map_full`` (raised as
    :class:`~ouroactors.core.faults.InjectedCommitRejected`, … for the storage commit contract to
    turn into its outcomes).
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
    # Internal, never read from a plan (FaultPlan.from_dict refuses them): resolved from ``target`` when the plan is
    # armed. kill: the pid (an incarnation number on a simulated system) and the process's start time (see
    # with_kill_target); a target restarted since (a new process, perhaps reusing the pid) is never killed by mistake,
    # and a real process is never signalled without its start time (see faults._kill_victim).
    target_pid: int | None = None
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
        if not (number(self.delay_s) and self.delay_s >= 0):  # nan fails too
            raise fail("delay_s", "must be a number >= 0")
        for name in ("after_s", "delay_s"):  # inf too: a sleep that overflows, a rule dormant for ever
            if (getattr(self, name) or 0) > MAX_SECONDS:
                raise fail(name, f"must be at most {MAX_SECONDS} s (24 days)")
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
        if self.target_pid is not None and (type(self.target_pid) is not int or self.target_pid < 1
                                            or self.target is None):
            raise fail("target_pid", "is resolved from target when armed: an int >= 1, and only with target")
        if self.target_start is not None and (type(self.target_start) is not int or self.target_start < 0
                                              or self.target_pid is None):
            raise fail("target_start", "is resolved from target when armed: an int >= 0, and only with target_pid")
        if self.exception is not None:
            if self.action is not FaultAction.RAISE or not isinstance(self.exception, str):
                raise fail("exception", "must be an import path string, and only with action 'raise'")
            _resolve_exception(self.exception)


# Filled in when a plan is armed (from ``target``), never taken from a plan's text: a plan naming a pid could have any
# process on the machine killed.
_ARMING_KEYS = ("target_pid", "target_start")
_RULE_KEYS = tuple(f.name for f in fields(FaultRule) if f.name not in _ARMING_KEYS)
_REQUIRED_KEYS = tuple(f.name for f in fields(FaultRule) if f.default is MISSING)


def _unknown_key(where: str, key: object, allowed: tuple[str, ...]) -> ValueError:
    close = difflib.get_close_matches(str(key), allowed, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else f" (allowed: {', '.join(allowed)})"
    return ValueError(f"{where}unknown key {key!r}{hint}")


_PLAN_KEYS = ("rules", "forks", "skip_forks")


@dataclass(frozen=True)
class FaultPlan:
    """An ordered tuple of rules; picklable, and round-trips through :meth:`to_dict`.

    ``forks``: how many children forked by the armed process inherit the plan (None: all). The process disarms
    itself right after that many forks, in the parent's half of the fork: a plan armed in a supervisor for "the
    next child it starts" reaches exactly that child, never the restarts or replacements that follow it, however
    soon they come (a harness that disarms by asking would race them).

    ``skip_forks``: how many children forked first run free (the plan is not inherited by them, nor counted in
    ``forks``). Armed before anything starts, ``skip_forks=k-1, forks=1`` aims at the supervisor's k-th child from
    then on, whenever it comes, with nothing to watch and no window to race (a harness that armed "once child k-1
    exists" would race a child forked by somebody else meanwhile, a spare runtime for one).
    """

    rules: tuple[FaultRule, ...] = field(default_factory=tuple)
    forks: int | None = None
    skip_forks: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "rules", tuple(self.rules))
        if self.forks is not None and (not isinstance(self.forks, int) or isinstance(self.forks, bool)
                                       or self.forks < 1):
            raise ValueError(f"forks: a positive int or None, got {self.forks!r}")
        if not isinstance(self.skip_forks, int) or isinstance(self.skip_forks, bool) or self.skip_forks < 0:
            raise ValueError(f"skip_forks: an int ≥ 0, got {self.skip_forks!r}")
        for i, rule in enumerate(self.rules):
            if not isinstance(rule, FaultRule):
                raise ValueError(f"rules[{i}]: expected a FaultRule, got {type(rule).__name__}")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FaultPlan:
        """Build from ``{"rules": [{"point": ..., "action": ..., ...}]}``; errors name the rule."""
        if not isinstance(data, dict):
            raise ValueError(f"plan: expected a dict, got {type(data).__name__}")
        for key in data:
            if key not in _PLAN_KEYS:
                raise _unknown_key("plan: ", key, _PLAN_KEYS)
        raw = data.get("rules", [])
        if not isinstance(raw, list | tuple):
            raise ValueError(f"rules: expected a list, got {type(raw).__name__}")
        rules = []
        for i, item in enumerate(raw):
            if not isinstance(item, dict):
                raise ValueError(f"rules[{i}]: expected a dict, got {type(item).__name__}")
            for key in item:
                if key in _ARMING_KEYS:
                    raise ValueError(f"rules[{i}]: {key!r} may not be set by a plan: it is resolved when the plan "
                                     "is armed, from target = \"tree/path\" (the actor to kill)")
                if key not in _RULE_KEYS:
                    raise _unknown_key(f"rules[{i}]: ", key, _RULE_KEYS)
            for key in _REQUIRED_KEYS:
                if key not in item:
                    raise ValueError(f"rules[{i}]: missing required key {key!r}")
            try:
                rules.append(FaultRule(**item))
            except ValueError as exc:
                raise ValueError(f"rules[{i}]: {exc}")
        return cls(tuple(rules), forks=data.get("forks"), skip_forks=data.get("skip_forks", 0))

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form; fields left at their default are omitted (and so are the ones resolved when armed:
        ``target_pid``, ``target_start``, which :meth:`from_dict` refuses)."""
        out = []
        for rule in self.rules:
            d: dict[str, Any] = {"point": rule.point, "action": rule.action.value}
            for f in fields(FaultRule):
                value = getattr(rule, f.name)
                if f.name not in d and f.name not in _ARMING_KEYS and value != f.default:
                    d[f.name] = value
            out.append(d)
        plan: dict[str, Any] = {"rules": out}
        if self.forks is not None:
            plan["forks"] = self.forks
        if self.skip_forks:
            plan["skip_forks"] = self.skip_forks
        return plan


def load_plan(path: str | os.PathLike[str]) -> FaultPlan:
    """Read a plan from TOML (``[[rules]]`` tables); errors name the file and the rule."""
    import tomllib

    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read fault plan: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:  # tomllib decodes the bytes as UTF-8 first
        raise ValueError(f"{path}: not a UTF-8 text file (byte {exc.object[exc.start:exc.start + 1]!r} at offset "
                         f"{exc.start}): a fault plan is TOML, UTF-8 encoded") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: malformed TOML: {exc}") from None
    try:
        return FaultPlan.from_dict(data)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


_GLOB_CHARS = frozenset("*?[")
_KNOWN_POINTS: dict[str, str] = {}


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
        warnings.append(f"rules[{i}]: point {rule.point!r} matches no registered point{hint} — kept: it fires "
                        "wherever code reaches it (a point of your own is known here once declared, "
                        f"faults.register_point(name, doc), in a module the tree's actors import); "
                        f"known points: {listing}")
    return warnings
