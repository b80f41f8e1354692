"""Fixtures for the sandbox tests."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator

import pytest

from .helpers import marker, pids_with


@pytest.fixture
def new_mark() -> Iterator[Callable[[], str]]:
    """Unique ``sleep`` markers; any process still running one at teardown is killed (and the test fails)."""
    made: list[str] = []

    def make() -> str:
        made.append(marker())
        return made[-1]

    yield make
    leaked = [pid for mark in made for pid in pids_with(mark)]
    for pid in leaked:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert not leaked, f"processes left behind: {leaked}"
