"""Fixtures for the coordinator's core: a real LMDB environment on disk (no thespian), and record builders."""

from __future__ import annotations

from collections.abc import Iterator

import lmdb
import pytest

from ouroactors.authorities.storage.env import StorageConfig, close_env, ensure_schema, open_env
from ouroactors.core import faults
from ouroactors.runtime.coordinator.store import SessionStore

from .support import new_record as new_record  # re-exported for tests


@pytest.fixture(autouse=True)
def _no_fault_plan() -> Iterator[None]:
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


@pytest.fixture
def store(env: lmdb.Environment) -> SessionStore:
    return SessionStore(env)
