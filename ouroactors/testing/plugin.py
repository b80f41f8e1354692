"""The ouroactors pytest plugin (registered through the ``pytest11`` entry point).

Fixtures:

* ``actor_system`` — a real multiproc system (one process per actor) in a temp data dir;
* ``simple_system`` — an in-process simpleSystemBase system, fast;
* ``simulated_system`` — the same on virtual time: deterministic to the byte, timers cost no real time;
* ``actor_system_factory`` — ``factory(base="multiproc", **kwargs)`` for several systems per test;
* ``tree_system``, ``armed_plan``, ``invariants`` — a system running your tree file, a fault plan
  armed on it (disarmed after the test), the invariant checkers (see :mod:`ouroactors.testing.fixtures`);
* ``fault_world``, ``fault_bench``, ``track_fault_processes`` — the observable external world and
  workload benches for crash enumeration and chaos (see :mod:`ouroactors.testing.enumeration`).

Marker: ``@pytest.mark.crash_enumeration(tree=..., config=..., points=..., max_sites=...)`` runs the
workload under crash enumeration and fails the test on any violated invariant, naming each site and
the plan that reproduces it; the report is the ``crash_report`` fixture (see
:mod:`ouroactors.testing.marker`).

Every system a fixture starts is shut down after the test, and the test fails if any of its
processes or its admin port outlive the shutdown.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ..core import faults
from ..system.handle import ActorSystem
from .enumeration import fault_bench, fault_world, track_fault_processes  # noqa: F401  (fixtures)
from .fixtures import armed_plan, invariants, tree_system  # noqa: F401  (fixtures)
from .leaks import assert_nothing_left
from .marker import (  # noqa: F401  (the crash_enumeration marker: hooks and fixtures)
    _crash_enumeration_marker,
    crash_report,
    pytest_collection_modifyitems,
    pytest_runtest_call,
)
from .marker import pytest_configure as _configure_marker


def pytest_configure(config: pytest.Config) -> None:
    _configure_marker(config)
    for directory in project_dirs(config):
        if directory not in sys.path:
            sys.path.append(directory)  # after site-packages: an installed package still wins


def project_dirs(config: pytest.Config) -> list[str]:
    """Where a test's ``myapp.module:Class`` actors are looked for, besides what is installed.

    Plain ``pytest`` (unlike ``python -m pytest``) does not put the project on the import path, so a tree naming
    the project's own actors failed with ``No module named 'myapp'`` unless the project was installed or
    ``PYTHONPATH=.`` was set. As ``ouroactors run`` does for a tree file, the rootdir and the directory pytest
    was started in join the path; actor processes are forked from this one and inherit it.
    """
    return list(dict.fromkeys([str(config.invocation_params.dir), str(config.rootpath)]))


@pytest.fixture
def actor_system_factory(tmp_path: Path) -> Iterator[Callable[..., ActorSystem]]:
    """Start systems: ``actor_system_factory(base="multiproc", **ActorSystem.start_kwargs)``.

    Each system gets its own data dir under ``tmp_path`` (unless ``data_dir`` is given); all are shut down
    after the test, newest first, and the test fails if any left a process or a listening port behind. No fault
    plan stays armed in this process after it (an in-process system's actors arm theirs here).
    """
    started: list[ActorSystem] = []

    def factory(base: str = "multiproc", **kwargs: Any) -> ActorSystem:
        kwargs.setdefault("data_dir", tmp_path / f"system-{len(started)}")
        system = ActorSystem.start(base, **kwargs)
        started.append(system)
        return system

    yield factory
    problems = []
    try:
        for system in reversed(started):
            system.shutdown()
            try:
                assert_nothing_left(system)
            except AssertionError as exc:
                problems.append(str(exc))
    finally:
        if started:  # an in-process system's actors armed in this process: nothing armed outlives the test
            faults.disarm()
    if problems:
        pytest.fail("; ".join(problems))


@pytest.fixture
def actor_system(actor_system_factory: Callable[..., ActorSystem]) -> ActorSystem:
    """A running multiproc system (one OS process per actor, loopback only), shut down after the test."""
    return actor_system_factory("multiproc")


@pytest.fixture
def simple_system(actor_system_factory: Callable[..., ActorSystem]) -> ActorSystem:
    """A running in-process system (thespian's simple base, one thread): fast, for logic not processes. Messages
    travel pickled, as between processes (``pickle_messages``): what could not cross to another process fails here."""
    return actor_system_factory("simple", pickle_messages=True)


@pytest.fixture
def simulated_system(actor_system_factory: Callable[..., ActorSystem]) -> ActorSystem:
    """The simple base on virtual time: timers fire by the system's clock, which moves only while the
    system runs (``system.run_for(seconds)`` passes time at once); the same asks give the same events."""
    return actor_system_factory("simple", simulated=True, pickle_messages=True)
