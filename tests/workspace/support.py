"""Helpers shared by the workspace tests."""

from __future__ import annotations

import itertools
from collections.abc import Callable


def fake_random() -> Callable[[int], bytes]:
    """Deterministic 'random' bytes: capabilities and ids differ, and tests can predict them."""
    counter = itertools.count(1)
    return lambda n: next(counter).to_bytes(n, "big")
