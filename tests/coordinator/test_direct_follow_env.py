"""A subscriber reading the log itself holds the node's environment only while it follows.

A multiproc actor system forks; a forked child may neither use nor reopen an environment its parent holds. So a
process that followed a session and then starts a system on the same data dir (a test restarting its system, a
program that follows and then boots) must hold no handle by then. The follower opens the environment for its
follows and closes it after the last one — but never a handle another part of the process opened or took too.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from ouroactors.authorities.storage.env import StorageConfig, close_env, ensure_schema, is_open, open_env
from ouroactors.runtime.coordinator import direct_follow
from ouroactors.runtime.coordinator.store import SessionStore
from ouroactors.runtime.coordinator.workflow import State
from ouroactors.sessions import Sessions

from .support import new_record


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A data dir holding one completed session, and no handle on it in this process."""
    config = StorageConfig.under(tmp_path)
    env = open_env(config)
    ensure_schema(env, config.path)
    SessionStore(env).create(new_record("s1", state=State.COMPLETED))
    close_env(config)
    return tmp_path


def _child_opens(config: StorageConfig) -> int:
    """Fork; the child opens the environment the way an actor would. Its exit code: 0 if it could."""
    pid = os.fork()
    if pid == 0:  # the child: as little as possible, then out without running the parent's cleanup
        code = 1
        try:
            open_env(config)
            code = 0 if not direct_follow._borrowed else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_after_a_follow_the_environment_is_closed_and_a_forked_child_can_open_it(data_dir: Path):
    config = StorageConfig.under(data_dir)
    assert list(direct_follow.follow(data_dir, "s1", follow=False)) == []
    assert not is_open(config)
    assert _child_opens(config) == 0


def test_a_follow_left_unfinished_gives_the_environment_back_when_it_is_closed(data_dir: Path):
    config = StorageConfig.under(data_dir)
    following = direct_follow.follow(data_dir, "s1", follow=True, idle_timeout=30)
    with pytest.raises(StopIteration):  # a terminal session with nothing to read: over at once
        next(following)
    assert not is_open(config)
    other = direct_follow.follow(data_dir, "s1", follow=True, idle_timeout=30)
    key, _ = direct_follow._acquire(data_dir)  # a second follow running meanwhile keeps it open
    try:
        assert list(other) == [] and is_open(config)
    finally:
        direct_follow._release(key)
    assert not is_open(config)


def test_a_handle_someone_else_opened_first_is_left_open(data_dir: Path):
    config = StorageConfig.under(data_dir)
    env = open_env(config)  # a writer of this process, say
    try:
        assert list(direct_follow.follow(data_dir, "s1", follow=False)) == []
        assert is_open(config) and env.stat() is not None  # still theirs, still usable
    finally:
        close_env(config)


def test_a_handle_someone_else_took_while_following_is_left_open(data_dir: Path):
    config = StorageConfig.under(data_dir)
    key, _ = direct_follow._acquire(data_dir)
    env = open_env(config)  # taken by another part of the process while the follow ran
    direct_follow._release(key)
    try:
        assert is_open(config) and env.stat() is not None
    finally:
        close_env(config)


def test_a_fork_during_a_follow_is_named_and_the_child_holds_no_follow(data_dir: Path,
                                                                        caplog: pytest.LogCaptureFixture):
    config = StorageConfig.under(data_dir)
    key, _ = direct_follow._acquire(data_dir)
    try:
        with caplog.at_level(logging.WARNING, logger="ouroactors.coordinator"):
            code = _child_opens(config)
        assert code != 0  # the parent's handle is inherited: the child may not open the environment
        assert any("forking while 1 follow(s) read" in r.getMessage() for r in caplog.records)
    finally:
        direct_follow._release(key)
    assert _child_opens(config) == 0


@pytest.mark.parametrize(("base", "make_lmdb", "asked", "direct"), [
    ("multiproc", True, None, True),  # the default where this process may read the data dir
    ("multiproc", False, None, False),  # no environment there (a data dir of another machine, say)
    ("multiproc", True, False, False),  # asked for the directory's follow
    ("simple", True, None, False),  # one process: the actors' own handle is the directory's business
    ("simple", True, True, False),
])
def test_sessions_follow_directly_by_default_where_they_can(tmp_path: Path, base: str, make_lmdb: bool,
                                                           asked: bool | None, direct: bool):
    if make_lmdb:
        (tmp_path / "lmdb").mkdir()
    system = SimpleNamespace(base=base, data_dir=str(tmp_path))
    assert Sessions(system, follow_direct=asked).follow_direct is direct
