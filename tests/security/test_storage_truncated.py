"""A truncated ``data.mdb`` is refused, never mapped: a short file would SIGBUS whoever reads it.

The attack (or accident): the data file is cut short while a system runs, or before it starts.
LMDB would map it and the first read of a missing page is a SIGBUS. The storage checks the file
against its own meta pages at open and periodically while it runs: the storage crashes with a
reason naming the file and both sizes, its restarts are refused the same way, and the tree fails
closed within seconds.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ouroactors import ActorSystem, supervisor, worker
from ouroactors.authorities.storage.datafile import DATA_FILE, DataFileDamaged, check_data_file, parse_meta
from ouroactors.authorities.storage.env import StorageConfig, StorageError, close_env, open_env
from ouroactors.supervision.specs import ChildSpec
from tests.actor.helpers import ECHO
from tests.actor.ledger_support import STORAGE, STORAGE_PATH, agent_tree


def _filled(tmp_path: Path, records: int = 3000) -> StorageConfig:
    config = StorageConfig(path=str(tmp_path / "lmdb"), map_size=1 << 30)
    env = open_env(config)
    with env.begin(write=True) as txn:
        for i in range(records):
            txn.put(i.to_bytes(8, "big"), os.urandom(300))
    close_env(config)
    return config


def test_a_truncated_data_file_is_refused_at_open_naming_file_and_sizes(tmp_path: Path) -> None:
    config = _filled(tmp_path)
    data = Path(config.path) / DATA_FILE
    used = check_data_file(config.path)
    assert used is not None and data.stat().st_size >= used.used_bytes
    os.truncate(data, 4 * used.page_size)
    before = data.read_bytes()
    with pytest.raises(DataFileDamaged) as caught:
        open_env(config)
    error = caught.value
    assert isinstance(error, StorageError)
    assert error.path == str(data) and error.file_bytes == 4 * used.page_size
    assert error.used_bytes == used.used_bytes
    assert str(data) in str(error) and str(error.file_bytes) in str(error) and str(error.used_bytes) in str(error)
    assert data.read_bytes() == before  # nothing was written


def test_a_data_file_emptied_is_not_silently_replaced_by_a_new_environment(tmp_path: Path) -> None:
    config = _filled(tmp_path, records=10)
    data = Path(config.path) / DATA_FILE
    os.truncate(data, 0)
    with pytest.raises(DataFileDamaged, match="no valid LMDB meta pages"):
        open_env(config)
    assert data.stat().st_size == 0


def test_a_new_or_intact_environment_opens(tmp_path: Path) -> None:
    config = _filled(tmp_path)
    data = Path(config.path) / DATA_FILE
    with open(data, "ab") as handle:  # longer than used is normal: LMDB never shrinks the file
        handle.truncate(data.stat().st_size + 1 << 20)
    env = open_env(config)
    try:
        with env.begin() as txn:
            assert txn.get((2999).to_bytes(8, "big")) is not None
    finally:
        close_env(config)


def test_meta_pages_that_are_not_lmdb_are_not_trusted() -> None:
    assert parse_meta(b"\0" * 4096) is None
    assert parse_meta(b"short") is None


def _storage_tree() -> ChildSpec:
    """Storage and a consumer that never reads: only the storage's own check can notice."""
    return supervisor("agent", strategy="rest_for_one", intensity=3, children=[
        worker("storage", STORAGE), worker("consumer", ECHO),
    ])


def _truncate_running(system: ActorSystem) -> tuple[Path, int, int]:
    data = Path(system.data_dir) / "lmdb" / DATA_FILE
    meta = check_data_file(str(data.parent))
    assert meta is not None and meta.used_bytes > 2 * meta.page_size
    os.truncate(data, 2 * meta.page_size)
    return data, 2 * meta.page_size, meta.used_bytes


def _names_the_damage(reason: object, data: Path, size: int, used: int) -> bool:
    text = str(reason)
    return "DataFileDamaged" in text and str(data) in text and f"{size} bytes" in text and str(used) in text


@pytest.mark.multiproc
def test_truncated_under_a_running_storage_it_exits_and_the_tree_fails_closed(actor_system: ActorSystem) -> None:
    actor_system.start_tree(_storage_tree())
    mark = actor_system.mark()
    t0 = time.monotonic()
    data, size, used = _truncate_running(actor_system)

    exited = actor_system.wait_for("exited", STORAGE_PATH, after=mark, timeout=10.0)
    assert _names_the_damage(exited.reason, data, size, used), exited.reason
    refused = actor_system.wait_for("start_failed", STORAGE_PATH, after=mark, timeout=10.0)
    assert _names_the_damage(refused.reason, data, size, used), refused.reason
    ended = actor_system.wait_for("tree_ended", "agent", after=mark, timeout=10.0)
    assert "reached_max_restart_intensity" in str(ended.reason), ended.reason
    assert time.monotonic() - t0 < 10.0
    assert [t.status for t in actor_system.trees() if t.name == "agent"] == ["ended"]
    assert data.stat().st_size == size  # refused, never "repaired" into an empty environment


@pytest.mark.multiproc
def test_truncated_under_the_agent_tree_every_reader_is_stopped_and_the_tree_fails_closed(
        actor_system: ActorSystem) -> None:
    """With the ledger mapping the file too: whoever notices first (the storage's check, or a
    reader's SIGBUS, which kills it), the restarts are refused naming the damage and the tree ends."""
    actor_system.start_tree(agent_tree())
    mark = actor_system.mark()
    t0 = time.monotonic()
    data, size, used = _truncate_running(actor_system)

    refused = actor_system.wait_for("start_failed", after=mark, timeout=20.0)
    assert _names_the_damage(refused.reason, data, size, used), refused.reason
    ended = actor_system.wait_for("tree_ended", "agent", after=mark, timeout=20.0)
    assert "reached_max_restart_intensity" in str(ended.reason), ended.reason
    assert time.monotonic() - t0 < 20.0
    gone = actor_system.wait_for(None, STORAGE_PATH, after=mark, timeout=1.0,
                                 predicate=lambda e: e.kind in ("exited", "terminated"))
    assert gone is not None


_GROW = """
import os, sys, lmdb
env = lmdb.open(sys.argv[1], map_size=1 << 30, max_dbs=64, subdir=True)
with env.begin(write=True) as txn:
    for i in range(200):
        txn.put(b"grown-%06d" % i, os.urandom(3000))
env.close()
"""


def test_a_commit_of_another_process_during_the_check_is_no_truncation(tmp_path: Path, monkeypatch) -> None:
    """A system writes while another process opens the environment beside it (a follower): a commit that extends
    the file and writes a newer meta page between the check's two reads must not look like lost pages."""
    import subprocess
    import sys

    from ouroactors.authorities.storage import datafile

    config = _filled(tmp_path, records=10)
    real = datafile.newest_meta
    grown: list[int] = []

    def commit_in_between(first_page: bytes, read_at):  # a real commit by another process, at the worst moment
        subprocess.run([sys.executable, "-c", _GROW, config.path], check=True, timeout=60)
        grown.append((Path(config.path) / DATA_FILE).stat().st_size)
        return real(real_pread(fd_of[0], datafile._META_BYTES, 0), read_at)

    fd_of: list[int] = []
    real_pread = os.pread

    def pread(fd: int, n: int, offset: int) -> bytes:
        fd_of[:] = [fd]
        return real_pread(fd, n, offset)

    monkeypatch.setattr(datafile.os, "pread", pread)
    monkeypatch.setattr(datafile, "newest_meta", commit_in_between)
    meta = check_data_file(config.path)
    assert grown and meta is not None and meta.used_bytes > 10 * 4096 and grown[0] >= meta.used_bytes
