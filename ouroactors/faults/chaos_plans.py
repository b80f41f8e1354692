"""The plans of seeded chaos: drawn from a seed, written as plan files, checked against known points.

* :func:`plan_for_seed` — 1 to ``max_rules`` rules of kill, storage fault or delay (or ``raise``) drawn from
  ``random.Random(seed)`` over sorted points and targets: a pure function of its arguments (no
  system, no clock, no global state), so the same seed, points and targets give the same plan.
* :func:`plan_to_toml` — a plan as a TOML plan file (``ouroactors faults arm FILE`` arms it).
* :func:`check_plan` — warnings for rules that name no known point (likely typos).

How a campaign gathers the candidate points and runs a seed's plan is :mod:`.chaos`, which
re-exports everything here.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..core.faults import FaultAction, FaultPlan, FaultRule

# Where a seeded plan may make a write fail without killing anybody: a whole commit (refused, of unknown outcome, a
# full map), or only a journal's puts inside one (the ledger's transaction still commits: the journal's gap path).
STORAGE_POINTS = ("storage.before_commit", "storage.after_commit", "journal.put")
MAX_RULES = 3


def parse_seed(value: Any) -> int:
    """A seed is an integer (``"42"`` is accepted); anything else is a clear error."""
    if isinstance(value, bool):
        raise ValueError(f"seed: must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text, 10)
        except ValueError:
            pass
    raise ValueError(f"seed: must be an integer, got {value!r}")


def _weight(point: str) -> int:
    if point.startswith("storage."):
        return 4
    if point.startswith("message.") or point.startswith("workspace."):
        return 2
    return 1


def plan_for_seed(seed: int | str, known_points: Iterable[str] | Mapping[str, str], *,
                  kill_targets: Sequence[str] = (), kills: bool = True, max_rules: int = MAX_RULES,
                  hits: Mapping[str, int] | None = None, deaths: int = 0, raises: bool = False) -> FaultPlan:
    """The fault plan of ``seed``: 1 to ``max_rules`` rules of kill, storage fault or delay (and ``raise``).

    Deterministic: the same seed, points and targets give the same plan (points and targets are
    sorted first, so their order does not matter). ``kills=False`` draws no kill (both bases kill:
    the simple base's simulation ends one actor as a SIGKILL ends its process).

    ``hits`` (point → how many times a crash-free run reaches it) aims kills where they land: a
    kill's point is drawn among the points reached and its ``nth`` among their hits, instead of
    1–8 blindly. Only a deterministic recording may be passed (the simulated base's): on
    multiproc the counts of timer-driven points vary between runs, and the plan must not.

    ``deaths`` (needs ``hits``) appends that many more kills, each at a crash site drawn uniformly
    among every hit of the recording — the death of whichever actor reaches it — from a stream of
    its own: the rules before them are exactly the plan without deaths. The simulated base draws
    one per seed: a death costs it no process, and deaths are the faults restart bugs hide behind.

    ``raises`` adds a fourth kind of rule: an exception raised at a point (aimed as a kill is), in whatever
    code reaches it — the error handling, ``on_stop`` and unwinding a SIGKILL never runs. Off by default, and
    only then is every seed's plan what it always was (a seed printed by an earlier campaign replays as it ran);
    on, it changes every seed's draws: a campaign of its own (``ouroactors chaos --raises``).
    """
    seed = parse_seed(seed)
    points = sorted(set(known_points))
    if not points:
        raise ValueError("known_points: no fault point to draw from")
    if type(max_rules) is not int or max_rules < 1:
        raise ValueError(f"max_rules: must be an int >= 1, got {max_rules!r}")
    targets = sorted(set(kill_targets))
    storage = [p for p in points if p in STORAGE_POINTS]
    kinds = (["kill"] if kills else []) + (["storage"] if storage else []) + ["delay"] + (["raise"] if raises else [])
    kind_weights = {"kill": 4, "storage": 4, "delay": 2, "raise": 3}
    point_weights = [_weight(p) for p in points]
    reached = [p for p in points if hits is not None and hits.get(p, 0) > 0]
    rng = random.Random(seed)
    rules = []
    for _ in range(rng.randint(1, max_rules)):
        kind = rng.choices(kinds, weights=[kind_weights[k] for k in kinds])[0]
        if kind == "raise":  # where the code that reaches the point runs: no target
            if hits is not None and reached:
                point = rng.choices(reached, weights=[_weight(p) for p in reached])[0]
                nth = rng.randint(1, hits[point])
            else:
                point = rng.choices(points, weights=point_weights)[0]
                nth = rng.randint(1, 8)
            rules.append(FaultRule(point, FaultAction.RAISE, nth=nth, times=1))
        elif kind == "kill" and hits is not None and reached:
            point = rng.choices(reached, weights=[_weight(p) for p in reached])[0]
            target = rng.choice([None, None, *targets]) if targets else None
            rules.append(FaultRule(point, FaultAction.KILL, nth=rng.randint(1, hits[point]), times=1, target=target))
        elif kind == "kill":
            point = rng.choices(points, weights=point_weights)[0]
            target = rng.choice([None, None, *targets]) if targets else None
            rules.append(FaultRule(point, FaultAction.KILL, nth=rng.randint(1, 8), times=1, target=target))
        elif kind == "storage":
            point = rng.choice(storage)
            action = (FaultAction.COMMIT_UNKNOWN if point == "storage.after_commit" else
                      rng.choice([FaultAction.COMMIT_REJECTED, FaultAction.COMMIT_UNKNOWN, FaultAction.MAP_FULL]))
            if rng.random() < 0.5:
                rules.append(FaultRule(point, action, nth=rng.randint(1, 10)))
            else:
                rules.append(FaultRule(point, action, probability=round(rng.uniform(0.05, 0.3), 3),
                                       seed=rng.randrange(2**31), times=rng.randint(1, 3)))
        else:
            point = rng.choices(points, weights=point_weights)[0]
            rules.append(FaultRule(point, FaultAction.DELAY, probability=round(rng.uniform(0.1, 0.5), 3),
                                   seed=rng.randrange(2**31), delay_s=round(rng.uniform(0.001, 0.03), 4)))
    if deaths:
        if not reached or hits is None:
            raise ValueError("deaths: need the hits of a recording that reached some point")
        fate = random.Random(f"{seed}:deaths")  # its own stream: the plan's other draws stay as they are
        for _ in range(deaths):
            point = fate.choices(reached, weights=[hits[p] for p in reached])[0]
            rules.append(FaultRule(point, FaultAction.KILL, nth=fate.randint(1, hits[point]), times=1))
    return FaultPlan(tuple(rules))


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string: the same escapes
    raise ValueError(f"cannot write {value!r} to a plan file")


def plan_to_toml(plan: FaultPlan, comments: Sequence[str] = ()) -> str:
    """The plan as a TOML plan file (``[[rules]]``), loadable by ``load_plan``/``faults arm``."""
    lines = [f"# {c}" for c in comments]
    for rule in plan.to_dict()["rules"]:
        lines.append("[[rules]]")
        for key, value in rule.items():
            if key in ("target_pid", "target_start") or value is None:
                continue  # resolved when armed
            lines.append(f"{key} = {_toml_value(getattr(value, 'value', value))}")
        lines.append("")
    return "\n".join(lines)


def check_plan(plan: FaultPlan, known_points: Iterable[str]) -> list[str]:
    """Warnings for rules whose point matches none of ``known_points``, listing the known ones.

    Invalid actions, probabilities and other values never get this far: a :class:`FaultRule`
    (and :func:`~ouroactors.core.faults.load_plan`) refuses them with an error naming the rule.
    """
    import fnmatch

    known = sorted(set(known_points))
    listing = ", ".join(known) if known else "(none)"
    warnings = []
    for i, rule in enumerate(plan.rules):
        if not isinstance(rule.action, FaultAction):
            raise ValueError(f"rules[{i}]: invalid action {rule.action!r}")
        if any(k == rule.point or fnmatch.fnmatchcase(k, rule.point) for k in known):
            continue
        warnings.append(f"rules[{i}]: point {rule.point!r} is not a known point; known points: {listing}")
    return warnings


__all__ = ["MAX_RULES", "STORAGE_POINTS", "check_plan", "parse_seed", "plan_for_seed", "plan_to_toml"]
