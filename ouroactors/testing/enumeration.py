"""Pytest fixtures for fault-injection tests: the observable world and workload benches.

* ``fault_world`` — a :class:`~ouroactors.faults.world.World` service for the test; stopped after
  it, and the test fails if its process is still alive.
* ``fault_bench`` — ``factory(tree, config, **kwargs)`` starting a
  :class:`~ouroactors.faults.runner.Bench` (an actor system + the world, ready to drive workload
  runs, crash enumerations or chaos seeds); every bench is closed after the test, and the test
  fails if any process of its system or its admin port outlived the close.
* ``track_fault_processes`` — records every actor system and world process the faults package
  starts during the test (also those started inside ``enumerate_crashes`` or a ``Campaign``) and
  fails the test if any of them outlives it.

Register them by importing them into the plugin module (``ouroactors.testing.plugin``)::

    from .enumeration import fault_bench, fault_world, track_fault_processes  # noqa: F401
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ..core.procs import pid_alive as _pid_alive
from ..system.handle import ActorSystem
from .leaks import assert_nothing_left


@pytest.fixture
def track_fault_processes(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[Any]]]:
    """Every system and world process started during the test must be gone after it."""
    from ..faults.world import World

    seen: dict[str, list[Any]] = {"systems": [], "worlds": []}
    original_start = ActorSystem.start.__func__  # type: ignore[attr-defined]
    original_world_start = World.start

    def start_system(cls: type[ActorSystem], *args: Any, **kwargs: Any) -> ActorSystem:
        system = original_start(cls, *args, **kwargs)
        seen["systems"].append(system)
        return system

    def start_world(self: World) -> World:
        started = original_world_start(self)
        seen["worlds"].append(self.pid)
        return started

    monkeypatch.setattr(ActorSystem, "start", classmethod(start_system))
    monkeypatch.setattr(World, "start", start_world)
    yield seen
    problems = []
    for system in seen["systems"]:
        system.shutdown()  # a no-op for a system already shut down
        try:
            assert_nothing_left(system)
        except AssertionError as exc:
            problems.append(str(exc))
    for pid in seen["worlds"]:
        if pid is not None and _pid_alive(pid):
            problems.append(f"world service pid {pid} outlived the test")
    if problems:
        pytest.fail("; ".join(problems))


@pytest.fixture
def fault_world() -> Iterator[Any]:
    """The world service (a real HTTP server on 127.0.0.1 that applies effects by idempotency key),
    started for the test and stopped after it; the test fails if its process outlives it."""
    from ..faults.world import World

    world = World().start()
    pid = world.pid
    try:
        yield world
    finally:
        world.stop()
    if pid is not None and _pid_alive(pid):
        pytest.fail(f"world service pid {pid} outlived the test")


@pytest.fixture
def fault_bench(tmp_path: Any) -> Iterator[Callable[..., Any]]:
    """Start a fault bench: ``fault_bench(tree, WorkloadConfig, **kwargs) -> Bench`` (a system running
    ``tree`` plus the workload's world); closed after the test, which fails on leftovers."""
    from ..faults.runner import Bench

    benches: list[Any] = []

    def factory(tree: Any, config: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("data_dir", tmp_path / f"bench-{len(benches)}")
        bench = Bench(tree, config, **kwargs)
        benches.append(bench)
        return bench.start()

    yield factory
    problems = []
    for bench in reversed(benches):
        system = bench.system
        world_pid = bench.world.pid if bench._own_world else None
        bench.close()
        if system is not None:
            try:
                assert_nothing_left(system)
            except AssertionError as exc:
                problems.append(str(exc))
        if world_pid is not None and _pid_alive(world_pid):
            problems.append(f"world service pid {world_pid} outlived the test")
    if problems:
        pytest.fail("; ".join(problems))


__all__ = ["fault_bench", "fault_world", "track_fault_processes"]
