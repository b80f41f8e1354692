"""``ouroactors journal export|import``: a session's journal moved as one file, checked before it lands.

The corpus journals are the exports; a round trip must give them back byte for byte. An import is checked in a
scratch environment first: a broken chain, a file that is no archive, an id already used here write nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgpack
import pytest
from click.testing import CliRunner

from ouroactors.authorities.storage.env import StorageConfig, close_env, open_env
from ouroactors.cli import main
from ouroactors.runtime.coordinator.store import SessionStore
from ouroactors.runtime.execution import reading
from ouroactors.runtime.execution.archive import read_archive

from ..coordinator.support import new_record

CORPUS = Path(__file__).resolve().parents[1] / "data" / "journals"


@pytest.fixture
def dirs(tmp_path) -> Iterator[tuple[Path, Path]]:
    """A data dir holding the corpus' ``tools`` journal, and an empty one to import into (both closed after)."""
    source, target = tmp_path / "source", tmp_path / "audit"
    read_archive(open_env(StorageConfig.under(source)), CORPUS / "tools.journal")
    try:
        yield source, target
    finally:
        close_env(StorageConfig.under(source))
        close_env(StorageConfig.under(target))


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["journal", *args])
    return result.exit_code, result.output


def test_export_then_import_elsewhere_gives_the_same_bytes_and_head(dirs, tmp_path):
    source, audit = dirs
    exported = tmp_path / "tools.journal"
    code, out = run("export", "tools", "--data-dir", str(source), "-o", str(exported))
    assert code == 0 and "20 records" in out and "chain ok" in out, out
    assert exported.read_bytes() == (CORPUS / "tools.journal").read_bytes()  # byte for byte
    head = reading.head(open_env(StorageConfig.under(source)), "tools")
    assert head is not None and head.head_hash.hex() in out  # what an auditor compares out of band
    assert not list(tmp_path.glob(".partial-*"))

    code, out = run("import", str(exported), "--data-dir", str(audit), "--as", "evidence")
    assert code == 0 and f"hash {head.head_hash.hex()}" in out, out
    assert run("verify", "evidence", "--data-dir", str(audit))[0] == 0
    code, out = run("replay", "evidence", "--data-dir", str(audit))
    assert code == 0 and "replay ok" in out, out
    again = tmp_path / "again.journal"
    assert run("export", "evidence", "--data-dir", str(audit), "-o", str(again))[0] == 0
    doc, original = (msgpack.unpackb(p.read_bytes(), raw=False, strict_map_key=False) for p in (again, exported))
    assert doc["records"] == original["records"] and doc["head"] == original["head"]  # only the name differs

    code, out = run("import", str(exported), "--data-dir", str(audit), "--as", "evidence")
    assert code == 2 and "already has a journal" in out, out
    code, out = run("export", "tools", "--data-dir", str(source), "-o", str(exported))
    assert code == 2 and "exists already" in out, out  # never overwritten
    assert exported.read_bytes() == (CORPUS / "tools.journal").read_bytes()


def test_a_broken_archive_is_refused_whole_unless_kept_to_inspect(dirs, tmp_path):
    _, audit = dirs
    doc = msgpack.unpackb((CORPUS / "tools.journal").read_bytes(), raw=False, strict_map_key=False)
    record = bytearray(doc["records"][11])
    record[-1] ^= 0x20
    doc["records"][11] = bytes(record)
    broken = tmp_path / "broken.journal"
    broken.write_bytes(msgpack.packb(doc, use_bin_type=True))

    code, out = run("import", str(broken), "--data-dir", str(audit))
    assert code == 1 and "BROKEN at seq 11" in out and "nothing imported" in out, out
    assert reading.sessions(open_env(StorageConfig.under(audit))) == []  # not a record of it

    code, out = run("import", str(broken), "--data-dir", str(audit), "--keep-broken")
    assert code == 0 and "BROKEN at seq 11" in out, out
    code, out = run("verify", "tools", "--data-dir", str(audit))
    assert code == 1 and "BROKEN at seq 11" in out and "verified through 10" in out

    junk = tmp_path / "junk.journal"
    junk.write_bytes(b"\x93\x01\x02")
    code, out = run("import", str(junk), "--data-dir", str(audit), "--as", "junk")
    assert code == 2 and "not a journal archive" in out, out
    code, out = run("import", str(CORPUS / "tools.journal"), "--data-dir", str(audit), "--as", "bad/id")
    assert code == 2 and "session id" in out, out
    assert reading.sessions(open_env(StorageConfig.under(audit))) == ["tools"]


def test_an_id_a_session_has_here_is_refused(dirs):
    _, audit = dirs
    SessionStore(open_env(StorageConfig.under(audit))).create(new_record("s1"))
    code, out = run("import", str(CORPUS / "tools.journal"), "--data-dir", str(audit), "--as", "s1")
    assert code == 2 and "a session 's1' exists" in out, out
    assert reading.head(open_env(StorageConfig.under(audit)), "s1") is None


def test_write_new_file_never_replaces_and_leaves_no_temporary(tmp_path):
    import click

    from ouroactors.cli.common import write_new_file

    target = tmp_path / "out.bin"
    write_new_file(target, b"first")
    with pytest.raises(click.BadParameter, match="exists already"):
        write_new_file(target, b"second")  # the link fails: no window between a check and the write
    assert target.read_bytes() == b"first" and [p.name for p in tmp_path.iterdir()] == ["out.bin"]


def test_an_output_path_that_is_a_symlink_is_not_written_through(tmp_path):
    """``-o`` naming a symlink (dangling, to a file elsewhere) is an existing name: refused, nothing written where
    it points; a file that is written is the owner's only (0600: a session's history is evidence)."""
    import click

    from ouroactors.cli.common import write_new_file

    (tmp_path / "out.json").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(click.BadParameter, match="exists already"):
        write_new_file(tmp_path / "out.json", b"history")
    assert not (tmp_path / "elsewhere").exists()
    write_new_file(tmp_path / "mine.json", b"history")
    assert (tmp_path / "mine.json").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("bad", ["x" * 201, "a/b", "../up", "", "nul\x00id"])
def test_import_refuses_an_id_that_is_no_session_id(dirs, tmp_path, bad):
    _, audit = dirs
    code, out = run("import", str(CORPUS / "tools.journal"), "--data-dir", str(audit), "--as", bad)
    assert code == 2 and "session id" in out, out
    assert reading.sessions(open_env(StorageConfig.under(audit))) == []


@pytest.mark.parametrize("given", [None, 123, "x" * 500, "a/b"])
def test_export_refuses_what_is_no_session_id_with_a_typed_error(tmp_path, given):
    from ouroactors.runtime.coordinator.export import export_session

    config = StorageConfig.under(tmp_path / "data")
    try:
        with pytest.raises(ValueError, match="session_id"):
            export_session(open_env(config), given)  # type: ignore[arg-type]
    finally:
        close_env(config)
