"""Files in the data directory are private, and ones another user could have written are refused.

Before: LMDB created ``data.mdb``/``lock.mdb`` 0644 (any local user read approvals and the
ledger), and a ``node.epoch`` or ``data.mdb`` that another user owned or could write was used as
is. Now the environment is created 0600 in a 0700 directory whatever the umask, and an existing
file that is not the user's own or that group/others may write is refused with an error naming
it, without anything being opened or changed.
"""

from __future__ import annotations

import os
import pwd
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from ouroactors import ActorSystem
from ouroactors.authorities.storage.env import StorageConfig, close_env, open_env
from ouroactors.core.trusted_files import UntrustedFile, check_trusted
from ouroactors.supervision.generations import EPOCH_FILE, bump_node_epoch


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def loose_umask() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def _nobody() -> int:
    if os.geteuid() != 0:
        pytest.skip("needs root to give a file to another user")
    try:
        return pwd.getpwnam("nobody").pw_uid
    except KeyError:
        pytest.skip("no 'nobody' user on this machine")


def _fresh(tmp_path: Path) -> StorageConfig:
    config = StorageConfig(path=str(tmp_path / "lmdb"), map_size=1 << 30)
    env = open_env(config)
    with env.begin(write=True) as txn:
        txn.put(b"k", b"v")
    close_env(config)
    return config


def test_lmdb_files_are_created_private_whatever_the_umask(tmp_path: Path, loose_umask: None) -> None:
    config = _fresh(tmp_path)
    directory = Path(config.path)
    assert _mode(directory) == 0o700
    for name in ("data.mdb", "lock.mdb"):
        assert _mode(directory / name) == 0o600, name


def test_an_old_world_readable_data_file_is_made_private(tmp_path: Path) -> None:
    config = _fresh(tmp_path)
    data = Path(config.path) / "data.mdb"
    os.chmod(data, 0o644)  # as LMDB created it before
    close_env(config)
    open_env(config)
    close_env(config)
    assert _mode(data) == 0o600


@pytest.mark.parametrize("name", ["data.mdb", "lock.mdb"])
def test_an_lmdb_file_others_may_write_is_refused_and_left_alone(tmp_path: Path, name: str) -> None:
    config = _fresh(tmp_path)
    target = Path(config.path) / name
    os.chmod(target, 0o666)
    before = target.read_bytes()
    with pytest.raises(UntrustedFile) as caught:
        open_env(config)
    assert caught.value.path == str(target) and "writable by group or others" in str(caught.value)
    assert _mode(target) == 0o666 and target.read_bytes() == before


@pytest.mark.parametrize("name", ["data.mdb", "lock.mdb"])
def test_an_lmdb_file_another_user_owns_is_refused(tmp_path: Path, name: str) -> None:
    uid = _nobody()
    config = _fresh(tmp_path)
    target = Path(config.path) / name
    os.chown(target, uid, -1)
    with pytest.raises(UntrustedFile, match=f"owned by uid {uid}"):
        open_env(config)


def test_a_data_file_replaced_by_a_symlink_is_refused(tmp_path: Path) -> None:
    config = _fresh(tmp_path)
    data = Path(config.path) / "data.mdb"
    elsewhere = tmp_path / "elsewhere.mdb"
    data.rename(elsewhere)
    data.symlink_to(elsewhere)
    with pytest.raises(UntrustedFile, match="symbolic link"):
        open_env(config)


def test_a_group_writable_environment_directory_is_refused(tmp_path: Path) -> None:
    config = _fresh(tmp_path)
    os.chmod(config.path, 0o770)
    with pytest.raises(UntrustedFile, match="writable by group or others"):
        open_env(config)


def test_the_node_epoch_is_private_and_a_tampered_one_is_refused(tmp_path: Path, loose_umask: None) -> None:
    assert bump_node_epoch(tmp_path / "d") == 1
    epoch = tmp_path / "d" / EPOCH_FILE
    assert _mode(epoch) == 0o600
    os.chmod(epoch, 0o646)
    with pytest.raises(UntrustedFile, match="writable by group or others"):
        bump_node_epoch(tmp_path / "d")
    assert epoch.read_text() == "1\n"


def test_a_node_epoch_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    uid = _nobody()
    bump_node_epoch(tmp_path)
    os.chown(tmp_path / EPOCH_FILE, uid, -1)
    with pytest.raises(UntrustedFile, match=f"owned by uid {uid}"):
        bump_node_epoch(tmp_path)


def test_a_system_will_not_start_on_a_data_dir_others_may_write(tmp_path: Path) -> None:
    data_dir = tmp_path / "shared"
    data_dir.mkdir()
    os.chmod(data_dir, 0o777)
    with pytest.raises(UntrustedFile) as caught:
        ActorSystem.start("simple", data_dir=data_dir)
    assert str(data_dir) in str(caught.value)
    assert not (data_dir / EPOCH_FILE).exists()


def test_a_missing_file_is_nothing_to_trust_yet(tmp_path: Path) -> None:
    assert check_trusted(tmp_path / "absent") is False
    assert check_trusted(tmp_path) is True


def test_the_event_log_is_private(simple_system: ActorSystem, loose_umask: None) -> None:
    events = Path(simple_system.data_dir) / "events.jsonl"
    simple_system.mark()
    assert events.exists() and _mode(events) == 0o600
