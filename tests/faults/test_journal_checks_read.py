"""What the fault harness reads of a session's journal after a run (``session_dump --journals``, in a child process):
whether the chain verifies and where a replay diverged or stopped — on the committed replay corpus, a tampered
copy of it, and bad input (no environment, a session id that is none), which is refused without creating anything."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ouroactors.authorities.storage.env import StorageConfig, close_env, db, open_env
from ouroactors.faults.session_read import DurableReadError, read_journal_checks
from ouroactors.runtime.execution.archive import read_archive
from ouroactors.runtime.execution.journal import JOURNAL_DB, record_key

CORPUS = Path(__file__).resolve().parents[1] / "data" / "journals"


@pytest.fixture
def corpus_dir(tmp_path: Path) -> Iterator[Path]:
    config = StorageConfig.under(tmp_path)
    env = open_env(config)
    for name in ("tools", "text-turns"):
        read_archive(env, CORPUS / f"{name}.journal")
    close_env(config)
    yield tmp_path


def test_the_corpus_verifies_and_replays_and_a_session_without_a_journal_has_nothing_to_judge(corpus_dir: Path):
    checks = read_journal_checks(str(corpus_dir), ["tools", "text-turns", "nosuch"])
    for name in ("tools", "text-turns"):
        assert checks[name]["verified"] and checks[name]["divergence"] is None, checks[name]
        assert checks[name]["boundary"] is None and checks[name]["verified_turns"] >= 1, checks[name]
    assert checks["nosuch"] == {}


def test_a_flipped_byte_is_named_at_its_seq(corpus_dir: Path):
    config = StorageConfig.under(corpus_dir)
    env = open_env(config)
    with env.begin(write=True, db=db(env, JOURNAL_DB)) as txn:
        value = bytes(txn.get(record_key(b"tools", 11)))
        txn.put(record_key(b"tools", 11), value[:-1] + bytes([value[-1] ^ 0x20]))
    close_env(config)
    check = read_journal_checks(str(corpus_dir), ["tools"])["tools"]
    assert not check["verified"] and check["broken_seq"] == 11, check


def test_bad_input_is_refused_naming_it_and_creates_nothing(tmp_path: Path, corpus_dir: Path):
    missing = tmp_path / "no-such-dir"
    with pytest.raises(DurableReadError, match="holds no LMDB environment"):
        read_journal_checks(str(missing), ["s1"])
    assert not missing.exists()  # a reader never creates the environment it was sent to read
    with pytest.raises(DurableReadError, match="'a/b'"):
        read_journal_checks(str(corpus_dir), ["a/b"])
