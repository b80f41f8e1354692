"""The storage commit contract (``storage.commit.write``) on a real LMDB environment.

Every write answers exactly one of Committed / Rejected / Unknown; a Committed value is on disk
(read back after a reopen), a Rejected one is not, and an Unknown one must be reconciled by reading.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import lmdb
import pytest

from ouroactors.authorities.storage.commit import (
    AFTER_COMMIT,
    BEFORE_COMMIT,
    Committed,
    EnvironmentDead,
    Rejected,
    Unknown,
    write,
)
from ouroactors.authorities.storage.env import (
    GENERATION_KEY,
    StorageConfig,
    close_env,
    db,
    encode_u64,
    ensure_schema,
    env_panicked,
    meta_db,
    open_env,
)
from ouroactors.core import faults
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule

COMMIT = "ouroactors.authorities.storage.commit"


def put(env: lmdb.Environment, key: bytes, value: bytes, returns: object = None):
    """A writer's function: one put into the ``grants`` database, answering ``returns``."""

    def fn(txn: lmdb.Transaction) -> object:
        txn.put(key, value, db=db(env, b"grants"))
        return returns

    return fn


def read(env: lmdb.Environment, key: bytes) -> bytes | None:
    with env.begin(db=db(env, b"grants")) as txn:
        return txn.get(key)


def reopen(config: StorageConfig) -> lmdb.Environment:
    close_env(config)
    return open_env(config)


def set_generation(env: lmdb.Environment, generation: int) -> None:
    outcome = write(env, lambda txn: txn.put(GENERATION_KEY, encode_u64(generation), db=meta_db(env)))
    assert isinstance(outcome, Committed)


def arm_raise(point: str, exception: str) -> None:
    faults.arm(FaultPlan((FaultRule(point, FaultAction.RAISE, exception=f"{COMMIT}:{exception}"),)))


# -- committed / fn raising ------------------------------------------------------------------------


def test_committed_returns_fn_value_and_is_durable_across_reopen(env, config):
    outcome = write(env, put(env, b"k", b"v", returns={"answer": 42}))
    assert outcome == Committed({"answer": 42})
    assert outcome.kind == "committed"

    env = reopen(config)
    assert read(env, b"k") == b"v"


def test_fn_raising_writes_nothing_and_the_exception_propagates(env, config):
    class Refused(Exception):
        pass

    def fn(txn: lmdb.Transaction) -> None:
        txn.put(b"partial", b"x", db=db(env, b"grants"))
        raise Refused("domain says no")

    with pytest.raises(Refused, match="domain says no"):
        write(env, fn)
    assert read(env, b"partial") is None
    # the write lock was released: the next writer commits
    assert isinstance(write(env, put(env, b"after", b"y")), Committed)
    env = reopen(config)
    assert read(env, b"partial") is None
    assert read(env, b"after") == b"y"


# -- fencing --------------------------------------------------------------------------------------


def test_fence_matching_generation_commits(env):
    set_generation(env, 7)
    assert write(env, put(env, b"k", b"v", returns="ok"), fence=7) == Committed("ok")
    assert read(env, b"k") == b"v"


def test_fence_other_generation_is_rejected_naming_both(env):
    set_generation(env, 8)
    outcome = write(env, put(env, b"k", b"v"), fence=7)
    assert isinstance(outcome, Rejected)
    assert outcome.kind == "rejected"
    assert "7" in outcome.reason and "8" in outcome.reason
    assert "stale storage generation" in outcome.reason
    assert read(env, b"k") is None


def test_fence_with_no_generation_recorded_is_rejected(env):
    outcome = write(env, put(env, b"k", b"v"), fence=1)
    assert isinstance(outcome, Rejected)
    assert "None" in outcome.reason and "1" in outcome.reason
    assert read(env, b"k") is None


def test_fence_is_checked_inside_the_transaction_not_cached(env):
    set_generation(env, 1)
    assert isinstance(write(env, put(env, b"a", b"1"), fence=1), Committed)
    set_generation(env, 2)
    assert isinstance(write(env, put(env, b"b", b"2"), fence=1), Rejected)
    assert read(env, b"b") is None


# -- injected faults ------------------------------------------------------------------------------


@pytest.mark.parametrize(("exception", "kind", "reason_start"), [
    ("InjectedRejected", Rejected, "injected: commit rejected"),
    ("InjectedMapFull", Rejected, "map full"),
    ("InjectedUnknown", Unknown, "injected: commit outcome unknown"),
])
def test_injected_fault_before_commit_writes_nothing(env, config, exception, kind, reason_start):
    arm_raise(BEFORE_COMMIT, exception)
    outcome = write(env, put(env, b"k", b"v"))
    assert type(outcome) is kind
    assert outcome.reason.startswith(reason_start)
    assert [f.point for f in faults.firings()] == [BEFORE_COMMIT]
    faults.disarm()
    env = reopen(config)
    assert read(env, b"k") is None


def test_injected_unknown_after_commit_is_unknown_but_the_data_is_written(env, config):
    arm_raise(AFTER_COMMIT, "InjectedUnknown")
    outcome = write(env, put(env, b"k", b"v", returns="value"))
    assert isinstance(outcome, Unknown)
    assert outcome.kind == "commit_outcome_unknown"
    assert "after commit" in outcome.reason
    faults.disarm()
    env = reopen(config)  # reconcile: read back after the storage restarts
    assert read(env, b"k") == b"v"


def test_injected_unknown_after_commit_does_not_fire_when_the_fn_raised(env):
    arm_raise(AFTER_COMMIT, "InjectedUnknown")

    def fn(txn: lmdb.Transaction) -> None:
        raise KeyError("bug")

    with pytest.raises(KeyError):
        write(env, fn)
    assert faults.firings() == []


# -- map full (real) ------------------------------------------------------------------------------


def test_real_map_full_is_rejected_and_the_environment_stays_usable(tmp_path):
    config = StorageConfig.under(tmp_path, map_size=256 << 10)
    env = open_env(config)
    try:
        ensure_schema(env, config.path)
        assert isinstance(write(env, put(env, b"before", b"1")), Committed)

        def fill(txn: lmdb.Transaction) -> None:
            for i in range(1000):
                txn.put(b"big%04d" % i, b"x" * 1500, db=db(env, b"grants"))

        outcome = write(env, fill)
        assert isinstance(outcome, Rejected)
        assert outcome.reason.startswith("map full")
        assert not env_panicked(env)
        assert read(env, b"big0000") is None
        assert isinstance(write(env, put(env, b"after", b"2")), Committed)
        env = reopen(config)
        assert read(env, b"before") == b"1"
        assert read(env, b"after") == b"2"
        assert read(env, b"big0000") is None
    finally:
        close_env(config)


# -- disk full (real ENOSPC on a size-limited tmpfs) ----------------------------------------------


def _mount_small_tmpfs(target: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("ENOSPC test needs root to mount a size-limited tmpfs")
    if shutil.which("mount") is None:
        pytest.skip("ENOSPC test needs the mount command")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(target)],
                          capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        pytest.skip(f"mounting a size-limited tmpfs is not permitted here: {proc.stderr.strip()}")


def test_real_disk_full_is_rejected_or_unknown_never_committed(tmp_path, record_property):
    mnt = tmp_path / "small"
    mnt.mkdir()
    _mount_small_tmpfs(mnt)
    try:
        config = StorageConfig.under(mnt)
        env = open_env(config)
        committed: dict[bytes, bytes] = {}
        rejected: list[bytes] = []
        failures: list[Rejected | Unknown] = []
        try:
            ensure_schema(env, config.path)
            for i in range(3000):  # 3000 × 6 KB ≫ 2 MB: the disk must fill
                keys = [b"rec%05d-%d" % (i, j) for j in range(4)]
                value = bytes([i % 251]) * 1500

                def fn(txn: lmdb.Transaction, keys=keys, value=value) -> int:
                    for key in keys:
                        txn.put(key, value, db=db(env, b"grants"))
                    return len(keys)

                outcome = write(env, fn)  # never raises: that is part of what is tested
                if isinstance(outcome, Committed):
                    assert outcome.value == 4
                    committed.update(dict.fromkeys(keys, value))
                    continue
                assert isinstance(outcome, Rejected | Unknown), outcome
                failures.append(outcome)
                if isinstance(outcome, Rejected):
                    rejected.extend(keys)
                if isinstance(outcome, Unknown) or len(failures) >= 3:
                    break
            assert failures, "the 2 MB tmpfs never filled up: ENOSPC was not exercised"
            record_property("enospc_outcomes", [repr(failure) for failure in failures])
            assert committed, "nothing committed before the disk filled"
            if isinstance(failures[-1], Rejected):
                assert not env_panicked(env)
                assert read(env, next(iter(committed))) is not None  # still readable in place
        finally:
            close_env(config)

        env = open_env(config)  # a fresh process would do the same: reopen and read back
        try:
            with env.begin(db=db(env, b"grants")) as txn:
                for key, value in committed.items():
                    assert txn.get(key) == value, key
                for key in rejected:
                    assert txn.get(key) is None, f"{key!r} was reported rejected but is on disk"
        finally:
            close_env(config)
    finally:
        subprocess.run(["umount", str(mnt)], check=False, capture_output=True, timeout=30)


# -- classification of commit errors (the meta-page failure cannot be provoked for real) -------


class _FailingCommitTxn:
    def put(self, *args: object, **kwargs: object) -> bool:
        return True

    def abort(self) -> None:
        pass

    def commit(self) -> None:
        raise lmdb.Error("mdb_txn_commit: Input/output error")


class _Env:
    """Stands in for an environment whose commit fails; ``panicked`` says whether LMDB then panics."""

    def __init__(self, panicked: bool) -> None:
        self.panicked = panicked
        self.write_txns = 0

    def begin(self, write: bool = False, **kwargs: object) -> object:
        if self.panicked and (not write or self.write_txns):
            raise lmdb.PanicError("mdb_txn_begin", "MDB_PANIC: Update of meta page failed")
        if write:
            self.write_txns += 1
            return _FailingCommitTxn()
        return _ReadTxn()


class _ReadTxn:
    def abort(self) -> None:
        pass


def test_commit_error_with_a_panicked_environment_is_unknown_and_then_dead():
    fake = _Env(panicked=True)
    outcome = write(fake, lambda txn: "value")  # type: ignore[arg-type]
    assert isinstance(outcome, Unknown)
    assert "panicked" in outcome.reason
    with pytest.raises(EnvironmentDead):
        write(fake, lambda txn: "value")  # type: ignore[arg-type]


def test_commit_error_without_panic_is_rejected():
    outcome = write(_Env(panicked=False), lambda txn: "value")  # type: ignore[arg-type]
    assert isinstance(outcome, Rejected)
    assert "nothing written" in outcome.reason


def test_healthy_environment_is_not_panicked(env):
    assert env_panicked(env) is False
    assert isinstance(write(env, put(env, b"k", b"v")), Committed)
    assert env_panicked(env) is False
