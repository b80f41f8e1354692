"""Fault-injection tests: every actor system and world process they start must be gone after them."""

from __future__ import annotations

import pytest

from ouroactors.testing.enumeration import fault_bench, fault_world, track_fault_processes

__all__ = ["fault_bench", "fault_world", "track_fault_processes"]


@pytest.fixture(autouse=True)
def _no_fault_process_left(track_fault_processes):
    """Autouse: systems and world services started anywhere in the test are checked after it."""
    yield
