"""``storage quarantine list`` on a stopped data dir: a data dir others may look into is warned about (naming its
mode and the fix), and the listing opens the environment the one safe way (LMDB's locks, never ``lock=False``)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from ouroactors.authorities.storage import env as storage_env
from ouroactors.authorities.storage.env import StorageConfig, close_env, ensure_schema, open_env


def _stopped_data_dir(path: Path, mode: int) -> Path:
    path.mkdir()
    os.chmod(path, 0o700)
    config = StorageConfig.under(path)
    ensure_schema(open_env(config), config.path)
    close_env(config)
    os.chmod(path, mode)
    return path


@pytest.fixture(autouse=True)
def _fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(storage_env, "_warned_shared", set())


def test_listing_a_shared_data_dir_warns_naming_its_mode(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from ouroactors.cli import main

    data = _stopped_data_dir(tmp_path / "data", 0o755)
    caplog.set_level(logging.WARNING, logger="ouroactors.storage")
    result = CliRunner().invoke(main, ["storage", "quarantine", "list", "--json", "--data-dir", str(data)])
    assert result.exit_code == 0, result.output
    assert [r.getMessage() for r in caplog.records] == [
        f"data dir {data}: mode 0755 lets other users look into it (a system's data dir is private, 0700); "
        "chmod 700 it"]


def test_a_private_data_dir_is_not_warned_about(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    data = _stopped_data_dir(tmp_path / "data", 0o700)
    caplog.set_level(logging.WARNING, logger="ouroactors.storage")
    config = StorageConfig.under(data)
    open_env(config)
    close_env(config)
    assert caplog.records == []
