"""Fixtures for a user's own tree: a system running a tree file, an armed fault plan, the checkers.

* ``tree_system`` — ``factory(tree, base=None)``: a system (shut down and checked for leftovers
  after the test) running ``tree``, a TOML tree file or a :class:`ChildSpec`. The file's
  ``[system] base`` applies unless ``base`` is given; ``simulated=True`` runs the simple base on
  virtual time.
* ``armed_plan`` — ``arm(system, plan, at=None)``: arms a :class:`FaultPlan` (or a TOML plan file)
  in every running actor (or the one at ``at``) and returns the paths armed; every plan is
  disarmed after the test, so a failing test cannot leave faults firing in a shared system.
* ``invariants`` — the invariant checkers (:mod:`ouroactors.faults.checks`) as one object:
  ``check(observation)`` returns the violations, ``assert_holds(run)`` fails the test listing them
  (with the plan that reproduces them) for a :class:`RunResult` or an :class:`Observation`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest

from ..core.errors import OuroactorsError
from ..core.faults import FaultPlan, load_plan
from ..supervision.specs import ChildSpec
from ..system.config import load_tree
from ..system.handle import ActorSystem


@pytest.fixture
def tree_system(actor_system_factory: Callable[..., ActorSystem]) -> Callable[..., ActorSystem]:
    """Start a tree: ``tree_system(TREE_FILE_OR_SPEC, base=None, **system_kwargs) -> ActorSystem``.

    A TOML path is loaded and validated like ``ouroactors check`` (its ``[system] base`` is used unless
    ``base`` is given); a ``ChildSpec`` starts on multiproc. The system gets its own data dir under
    ``tmp_path`` and is shut down after the test, which fails if a process or port was left behind.
    """
    def start(tree: str | os.PathLike[str] | ChildSpec, base: str | None = None, **kwargs: Any) -> ActorSystem:
        if isinstance(tree, ChildSpec):
            spec, file_base = tree, "multiproc"
        else:
            loaded = load_tree(os.fspath(tree))  # a SpecError names the file, the place and the problem
            spec, file_base = loaded.tree, loaded.system.base
        chosen = base or file_base
        if chosen == "simple":  # messages travel pickled, as between processes (see simple_system)
            kwargs.setdefault("pickle_messages", True)
        system = actor_system_factory(chosen, **kwargs)
        system.start_tree(spec)
        return system

    return start


@pytest.fixture
def armed_plan() -> Iterator[Callable[..., list[str]]]:
    """Arm a fault plan: ``armed_plan(system, PLAN_OR_TOML_PATH, at=None) -> [paths armed]``.

    ``at`` is a tree path (None: every running actor). Every plan armed through it is disarmed after the
    test, so a plan never leaks into the next one.
    """
    armed: list[tuple[ActorSystem, str | None]] = []

    def arm(system: ActorSystem, plan: FaultPlan | str | os.PathLike[str], at: str | None = None) -> list[str]:
        if not isinstance(plan, FaultPlan):
            plan = load_plan(plan)  # a ValueError names the file and the rule
        paths = system.arm_faults(at, plan)
        armed.append((system, at))
        return paths

    yield arm
    for system, at in reversed(armed):
        if not system._closed:
            with contextlib.suppress(OuroactorsError):  # an actor that has gone has no plan left to disarm
                system.arm_faults(at, None)


class Invariants:
    """The invariant checkers of :mod:`ouroactors.faults.checks`, for assertions in tests."""

    @property
    def names(self) -> list[str]:
        from ..faults.checks import CHECKS

        return list(CHECKS)

    def check(self, observation: Any, checks: Iterable[str] | None = None) -> list[Any]:
        from ..faults.checks import check_all

        return check_all(observation, checks)

    def assert_holds(self, run: Any, checks: Iterable[str] | None = None) -> None:
        """Fail the test if ``run`` (a RunResult or an Observation) breaks an invariant."""
        from ..faults.chaos import plan_to_toml
        from ..faults.runner import RunResult

        observation = run.observation if isinstance(run, RunResult) else run
        violations = self.check(observation, checks)
        if violations:
            lines = [f"{len(violations)} invariant violation(s) in run {observation.run_id}:"]
            lines += [f"  {v}" for v in violations]
            plan = run.plan if isinstance(run, RunResult) else None
            if plan is not None:
                lines += ["reproduce with this plan:", plan_to_toml(plan)]
            pytest.fail("\n".join(lines))


@pytest.fixture
def invariants() -> Invariants:
    """The invariant checkers (``names``, ``check(observation)``, ``assert_holds(run)``): a failing
    ``assert_holds`` lists every violation and the fault plan that reproduces the run."""
    return Invariants()


__all__ = ["Invariants", "armed_plan", "invariants", "tree_system"]
