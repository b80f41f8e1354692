"""A backup goes into a directory of its own outside the data dir it copies; an odd target is refused, naming it,
and nothing is created.

Refused: a target inside (or the same as, or above) the live data dir, through a symlink too; an empty target; a
target that is itself a symbolic link (a dangling one was followed and its missing parents created); a target whose
parent does not exist (parents were created)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from ouroactors import supervisor, worker
from ouroactors.authorities.asking import ask_authority
from ouroactors.authorities.storage.actor import Backup
from ouroactors.core.errors import BadRequest

STORAGE = "ouroactors.authorities.storage.actor:Storage"


@pytest.fixture
def storage(simple_system):
    simple_system.start_tree(supervisor("agent", [worker("storage", STORAGE)]))
    return simple_system


def _refused(system, target: str) -> BadRequest:
    with pytest.raises(BadRequest) as caught:
        ask_authority(system, "agent/storage", Backup(target))
    assert caught.value.field == "target"
    return caught.value


def _tree(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*")}


def test_a_target_inside_the_data_dir_is_refused_and_nothing_is_created(storage) -> None:
    data = storage.data_dir
    before = _tree(data)
    for target in (data / "newsub", data / "lmdb" / "copy", data, data.parent):
        refused = _refused(storage, str(target))
        assert "live data dir" in str(refused) and str(data.resolve()) in str(refused), refused
    assert _tree(data) == before


def test_a_symlink_into_the_data_dir_and_a_symlinked_target_are_refused(storage, tmp_path: Path) -> None:
    data = storage.data_dir
    before = _tree(data)
    link = tmp_path / "to-data"
    link.symlink_to(data)
    assert "live data dir" in str(_refused(storage, str(link / "newsub")))  # its real path is inside
    outside = tmp_path / "real-dir"
    outside.mkdir()
    named = tmp_path / "named"
    named.symlink_to(outside)
    assert "symbolic link" in str(_refused(storage, str(named)))
    assert list(outside.iterdir()) == [] and _tree(data) == before


def test_a_dangling_symlink_is_not_followed_and_no_parent_is_created(storage, tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent"
    dangling = tmp_path / "x" / "dangling"
    dangling.parent.mkdir()
    dangling.symlink_to(missing / "zzz")
    refused = _refused(storage, str(dangling))
    assert "symbolic link" in str(refused) and str(missing / "zzz") in str(refused)
    assert not missing.exists()


def test_a_target_whose_parent_does_not_exist_is_refused(storage, tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "backup"
    refused = _refused(storage, str(target))
    assert "no parent directory" in str(refused) and str(target.parent) in str(refused)
    assert not (tmp_path / "no").exists()


def test_an_empty_or_relative_target_is_refused(storage) -> None:
    assert "(got '')" in str(_refused(storage, ""))  # never taken as the current directory
    assert "absolute" in str(_refused(storage, "relative/dir"))


def test_a_good_target_outside_the_data_dir_still_gets_the_backup(storage, tmp_path: Path) -> None:
    target = tmp_path / "backup"
    assert ask_authority(storage, "agent/storage", Backup(str(target)), timeout=10.0) == str(target)
    assert [path.name for path in target.iterdir()] == ["data.mdb"]
    assert os.stat(target).st_mode & 0o777 == 0o700


TREE = '[tree]\nid = "agent"\n\n[[tree.children]]\nid = "storage"\nactor = "' + STORAGE + '"\n'


@pytest.mark.multiproc
def test_the_cli_refuses_odd_targets_with_exit_2_and_creates_nothing(tmp_path: Path) -> None:
    from tests.e2e.cli_helpers import Served, cli

    (tmp_path / "tree.toml").write_text(TREE)
    served = Served(tmp_path, "tree.toml")
    data = tmp_path / ".ouroactors"
    try:
        before = _tree(data)
        (tmp_path / "to-data").symlink_to(data)
        (tmp_path / "x").mkdir()
        (tmp_path / "x" / "dangling").symlink_to(tmp_path / "nonexistent" / "zzz")
        for target, says in ((data / "newsub", "live data dir"), (tmp_path / "to-data" / "newsub", "live data dir"),
                             (tmp_path / "x" / "dangling", "link")):
            done = cli("storage", "backup", str(target), "--data-dir", str(data), cwd=tmp_path)
            assert done.returncode == 2 and "Backup.target" in done.stderr and says in done.stderr, done.stderr
        assert not (tmp_path / "nonexistent").exists()
        empty = cli("storage", "backup", "", "--data-dir", str(data), cwd=tmp_path)
        assert empty.returncode == 2 and "is empty" in " ".join(empty.stderr.split()), empty.stderr
        nowhere = cli("storage", "backup", str(tmp_path / "b2"), "--at", "nope", "--data-dir", str(data), cwd=tmp_path)
        said = " ".join(nowhere.stderr.split())
        assert nowhere.returncode == 2 and "no actor at 'nope': no tree of that name (trees: " in said, said
        assert not (data / "newsub").exists() and {p for p in _tree(data) - before if "backup" in p} == set()
        good = cli("storage", "backup", str(tmp_path / "backup"), "--data-dir", str(data), cwd=tmp_path)
        assert good.returncode == 0, good.stderr
        served.proc.send_signal(signal.SIGTERM)
        assert served.finish()[0] == 0
    finally:
        served.kill()
