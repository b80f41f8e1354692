"""Fixtures for storage and ledger tests: a real LMDB environment in a temp dir (no thespian)."""

from __future__ import annotations

from collections.abc import Iterator

import lmdb
import pytest

from ouroactors.authorities.storage.env import StorageConfig, close_env, ensure_schema, open_env
from ouroactors.core import faults


@pytest.fixture(autouse=True)
def _no_fault_plan() -> Iterator[None]:
    """Whatever a test armed, the next one starts disarmed."""
    faults.disarm()
    yield
    faults.disarm()


@pytest.fixture
def config(tmp_path) -> StorageConfig:
    return StorageConfig.under(tmp_path)


@pytest.fixture
def env(config: StorageConfig) -> Iterator[lmdb.Environment]:
    handle = open_env(config)
    ensure_schema(handle, config.path)
    try:
        yield handle
    finally:
        close_env(config)
