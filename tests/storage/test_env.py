"""Opening the environment: schema stamp and refusal, one handle per process, never across fork."""

from __future__ import annotations

import dataclasses
import multiprocessing

import pytest

from ouroactors.authorities.storage.commit import Committed, write
from ouroactors.authorities.storage.env import (
    SCHEMA_KEY,
    SCHEMA_VERSION,
    SchemaTooNew,
    StorageConfig,
    StorageError,
    close_env,
    db,
    decode_u64,
    encode_u64,
    ensure_schema,
    meta_db,
    open_env,
    read_generation,
)

from .workers import open_in_child

CHILD_TIMEOUT_S = 60


def test_ensure_schema_stamps_version_1_on_a_new_environment(config):
    env = open_env(config)
    try:
        assert SCHEMA_VERSION == 1
        assert ensure_schema(env, config.path) == 1
        with env.begin(db=meta_db(env)) as txn:
            assert decode_u64(txn.get(SCHEMA_KEY)) == 1
        assert ensure_schema(env, config.path) == 1  # idempotent
    finally:
        close_env(config)
    env = open_env(config)
    try:
        with env.begin(db=meta_db(env)) as txn:
            assert decode_u64(txn.get(SCHEMA_KEY)) == 1
    finally:
        close_env(config)


def test_a_newer_schema_is_refused_naming_both_versions(env, config):
    assert isinstance(write(env, lambda txn: txn.put(SCHEMA_KEY, encode_u64(99), db=meta_db(env))), Committed)
    with pytest.raises(SchemaTooNew) as raised:
        ensure_schema(env, config.path)
    assert raised.value.found == 99 and raised.value.supported == 1
    message = str(raised.value)
    assert "99" in message and "up to 1" in message and config.path in message
    assert isinstance(raised.value, StorageError)
    with env.begin(db=meta_db(env)) as txn:  # refusing does not rewrite the stamp
        assert decode_u64(txn.get(SCHEMA_KEY)) == 99


def test_read_generation_is_none_until_written(env):
    assert read_generation(env) is None


# -- one handle per process -----------------------------------------------------------------------


def test_open_env_twice_returns_the_same_handle(env, config):
    assert open_env(config) is env
    assert open_env(StorageConfig.under(config.path[: -len("/lmdb")])) is env


def test_open_env_with_the_same_path_spelled_differently_returns_the_same_handle(env, config):
    assert open_env(dataclasses.replace(config, path=config.path + "/")) is env
    assert open_env(dataclasses.replace(config, path=config.path + "/../lmdb")) is env


def test_open_env_with_other_settings_is_refused(env, config):
    with pytest.raises(StorageError, match="other settings"):
        open_env(dataclasses.replace(config, map_size=config.map_size * 2))
    with pytest.raises(StorageError, match="other settings"):
        open_env(dataclasses.replace(config, max_readers=7))
    assert open_env(config) is env  # the refusal did not disturb the open handle


def test_close_env_then_open_env_gives_a_working_new_handle(env, config):
    assert isinstance(write(env, lambda txn: txn.put(b"k", b"v", db=db(env, b"grants"))), Committed)
    close_env(config)
    again = open_env(config)
    assert again is not env
    with again.begin(db=db(again, b"grants")) as txn:
        assert txn.get(b"k") == b"v"


def test_unknown_database_name_is_refused(env):
    with pytest.raises(StorageError, match="KNOWN_DBS"):
        db(env, b"nope")


# -- across processes -----------------------------------------------------------------------------


def _run_child(context_name: str, config: StorageConfig) -> tuple[str, str]:
    ctx = multiprocessing.get_context(context_name)
    results = ctx.Queue()
    child = ctx.Process(target=open_in_child, args=(config, results))
    child.start()
    try:
        answer = results.get(timeout=CHILD_TIMEOUT_S)
    finally:
        child.join(CHILD_TIMEOUT_S)
        if child.is_alive():
            child.kill()
            child.join()
    assert child.exitcode == 0
    return answer


def test_a_forked_child_never_reuses_the_parents_handle(env, config):
    kind, message = _run_child("fork", config)
    assert kind == "StorageError", message
    assert "fork" in message and config.path in message
    # the child did not close the parent's handle: it still reads and writes
    assert isinstance(write(env, lambda txn: txn.put(b"parent", b"ok", db=db(env, b"grants"))), Committed)
    with env.begin(db=db(env, b"grants")) as txn:
        assert txn.get(b"parent") == b"ok"
        assert txn.get(b"from-child") is None


def test_a_spawned_child_opens_and_writes(env, config):
    assert _run_child("spawn", config) == ("opened", "Committed")
    with env.begin(db=db(env, b"grants")) as txn:
        assert txn.get(b"from-child") == b"hello"
