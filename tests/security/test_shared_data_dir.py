"""A data dir another local user owns, or may write in, is refused before anything is written to it.

Before: such a data dir was refused only once the start had written into it (the start lock, or more), and `run`
printed the refusal as a traceback (exit 1)."""

from __future__ import annotations

import os

import pytest

from ouroactors import ActorSystem
from ouroactors.core.trusted_files import UntrustedFile

from ..e2e.cli_helpers import SIMPLE_TREE, cli, write_tree


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702, 0o1777])
def test_a_data_dir_others_may_write_is_refused_and_nothing_is_written(tmp_path, mode):
    data = tmp_path / "d"
    data.mkdir()
    os.chmod(data, mode)
    with pytest.raises(UntrustedFile) as refused:
        ActorSystem.start("simple", data)
    assert f"is writable by group or others (mode {mode & 0o7777:04o})" in str(refused.value)
    assert os.listdir(data) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_a_data_dir_another_user_owns_is_refused(tmp_path):
    data = tmp_path / "d"
    data.mkdir(mode=0o700)
    os.chown(data, 65534, 65534)
    with pytest.raises(UntrustedFile, match="is owned by uid 65534, not by uid 0"):
        ActorSystem.start("simple", data)
    assert os.listdir(data) == []


def test_a_private_or_readable_data_dir_is_used_as_its_owner_made_it(tmp_path):
    for mode in (0o700, 0o755):
        data = tmp_path / f"d{mode:o}"
        data.mkdir()
        os.chmod(data, mode)
        with ActorSystem.start("simple", data) as system:
            assert system.trees() == []
        assert os.stat(data).st_mode & 0o777 == mode


def test_run_refuses_it_with_exit_2(tmp_path):
    tree = write_tree(tmp_path / "t.toml", SIMPLE_TREE)
    data = tmp_path / "shared"
    data.mkdir()
    os.chmod(data, 0o777)
    done = cli("run", str(tree), "--detach", "--data-dir", str(data), cwd=tmp_path)
    said = " ".join(done.stderr.split())
    assert done.returncode == 2 and "is writable by group or others" in said and "Traceback" not in said, said
    assert os.listdir(data) == []
