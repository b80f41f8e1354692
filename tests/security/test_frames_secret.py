"""The per-system secret: created private, reused, and refused when others could read or swap it."""

from __future__ import annotations

import os
import pwd

import pytest

from ouroactors import ActorSystem, ActorSystemError
from ouroactors.system import _secret

from .conftest import other_user


def _write(path, text: str, mode: int = 0o600):
    path.write_text(text)
    path.chmod(mode)
    return path


def test_created_0600_and_reused_by_the_next_start(tmp_path):
    first = _secret.load_or_create(tmp_path)
    assert (tmp_path / "secret").stat().st_mode & 0o777 == 0o600
    assert len(first) == 32
    assert _secret.load_or_create(tmp_path) == first


@pytest.mark.parametrize(("mode", "problem"), [(0o644, "lets other users read"), (0o620, "lets other users read")])
def test_a_secret_others_can_read_or_write_is_refused(tmp_path, mode, problem):
    path = _write(tmp_path / "s", "ab" * 32, mode)
    with pytest.raises(ActorSystemError, match=problem):
        _secret.read_secret_file(path)


def test_a_symlinked_short_or_garbled_secret_is_refused(tmp_path):
    real = _write(tmp_path / "real", "ab" * 32)
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(ActorSystemError, match="symlink is refused"):
        _secret.read_secret_file(tmp_path / "link")
    with pytest.raises(ActorSystemError, match="too short"):
        _secret.read_secret_file(_write(tmp_path / "short", "abcd"))
    with pytest.raises(ActorSystemError, match="expected hex digits"):
        _secret.read_secret_file(_write(tmp_path / "garbled", "not a secret at all, clearly"))
    with pytest.raises(ActorSystemError, match="does not exist"):
        _secret.read_secret_file(tmp_path / "absent")


def test_a_secret_owned_by_another_user_is_refused(tmp_path):
    if other_user() is None:
        pytest.skip("needs root and a second local user (nobody)")
    path = _write(tmp_path / "theirs", "ab" * 32)
    entry = pwd.getpwnam("nobody")
    os.chown(path, entry.pw_uid, entry.pw_gid)
    with pytest.raises(ActorSystemError, match="not by this user"):
        _secret.read_secret_file(path)


def test_a_system_refuses_to_start_on_a_data_dir_whose_secret_others_can_read(tmp_path):
    _write(tmp_path / "secret", "ab" * 32, 0o644)
    with pytest.raises(ActorSystemError, match="chmod 600"):
        ActorSystem.start("multiproc", tmp_path)
    assert not (tmp_path / "node.epoch").exists()  # refused before anything durable changed
