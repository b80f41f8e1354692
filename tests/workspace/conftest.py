"""Shared fixtures of the workspace tests."""

from __future__ import annotations

import pytest

from ouroactors.authorities.workspace.leases import LeaseTable

from .support import fake_random


@pytest.fixture
def table() -> LeaseTable:
    return LeaseTable(random_bytes=fake_random())
