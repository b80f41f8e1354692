"""The operator's repair of quarantined records: listed with what became of the original, discarded offline
(grants and workspace records only, the copy kept as evidence, who and when recorded), and the authority boots
clean afterwards. Unit tests on a real LMDB environment; one end to end through the CLI on real processes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ouroactors.authorities.asking import ask_authority
from ouroactors.authorities.storage.env import StorageConfig, close_env, db, open_env
from ouroactors.authorities.storage.quarantine import QuarantineError, discard, listing

from .test_grants_actor import GARBAGE, _plant, _restart_grants, tree

CLI = [sys.executable, "-c", "from ouroactors.cli import main; main()"]


@pytest.fixture
def env(tmp_path):
    config = StorageConfig.under(tmp_path / "data")
    environment = open_env(config)
    with environment.begin(write=True) as txn:
        for name, key in ((b"grants", b"approval/a1"), (b"workspace", b"lease/r1"), (b"sessions", b"s1"),
                          (b"grants", b"posture/s2")):
            txn.put(key, GARBAGE, db=db(environment, name))
            txn.put(name + b"/" + key, GARBAGE, db=db(environment, b"quarantine"))
        txn.put(b"posture/s2", b"\x91\xa4plan", db=db(environment, b"grants"))  # set again since: changed
    yield environment
    close_env(config)


def states(environment) -> dict[str, str]:
    return {item.key: item.state for item in listing(environment)}


def test_a_discard_removes_the_original_once_keeps_the_copy_and_says_who(env) -> None:
    assert states(env) == {"grants/approval/a1": "in place", "grants/posture/s2": "changed",
                           "sessions/s1": "in place", "workspace/lease/r1": "in place"}
    done = discard(env, "grants/approval/a1", "operator:me", now_ns=7)
    assert (done.state, done.discarded_by, done.discarded_ns) == ("discarded", "operator:me", 7)
    discard(env, "workspace/lease/r1", "operator:me")
    with env.begin() as txn:
        assert txn.get(b"approval/a1", db=db(env, b"grants")) is None
        assert txn.get(b"lease/r1", db=db(env, b"workspace")) is None
        assert txn.get(b"grants/approval/a1", db=db(env, b"quarantine")) == GARBAGE  # the evidence stays
    assert states(env)["grants/approval/a1"] == "discarded"


@pytest.mark.parametrize(("key", "why"), [
    ("sessions/s1", "a session's records are its history"),  # never here
    ("grants/posture/s2", "is changed"),  # rewritten since: the copy does not describe it
    ("grants/nothing", "not a quarantined record"),
    ("discarded/grants/approval/a1", "not a quarantined record"),
    ("grants/../sessions/s1", "not a quarantined record"),  # a key is a key: no path walks out of its database
    ("grants/" + "x" * 600, "not a quarantined record"),  # longer than LMDB takes: refused, typed
    ("grants/\udcff", "not a quarantined record"),  # undecodable bytes from a command line
    ("", "not a quarantined record"),
])
def test_a_discard_that_is_not_safe_is_refused_and_changes_nothing(env, key, why) -> None:
    before = states(env)
    with pytest.raises(QuarantineError, match=why):
        discard(env, key, "operator:me")
    assert states(env) == before
    with env.begin() as txn:
        assert txn.get(b"s1", db=db(env, b"sessions")) == GARBAGE


def test_a_discarded_record_is_not_discarded_twice(env) -> None:
    discard(env, "grants/approval/a1", "operator:me")
    with pytest.raises(QuarantineError, match="is discarded"):
        discard(env, "grants/approval/a1", "operator:me")


@pytest.mark.multiproc
def test_the_cli_repairs_a_corrupt_approval_offline_and_grants_boots_clean(actor_system_factory, tmp_path) -> None:
    data = tmp_path / "node"
    system = actor_system_factory(data_dir=data)
    system.start_tree(tree())
    _plant(system.data_dir, {b"approval/a1": GARBAGE})
    _restart_grants(system)
    assert set(ask_authority(system, "agent/grants", "status")["quarantined"]) == {"approval/a1"}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*CLI, "storage", "quarantine", *args, "--data-dir", str(data)], capture_output=True,
                              text=True, timeout=60)

    live = cli("discard", "grants/approval/a1")
    assert live.returncode != 0 and "stop it first" in live.stderr  # its authorities hold what they loaded
    system.shutdown()

    listed = [json.loads(line) for line in cli("list", "--json").stdout.splitlines()]
    assert [(i["key"], i["state"]) for i in listed] == [("grants/approval/a1", "in place")]
    done = cli("discard", "grants/approval/a1")
    assert done.returncode == 0 and "discarded by operator:" in done.stdout, done.stderr
    refused = cli("discard", "sessions/nope")
    assert refused.returncode != 0 and "not a quarantined record" in refused.stderr

    again = actor_system_factory(data_dir=data)
    again.start_tree(tree())
    assert ask_authority(again, "agent/grants", "status")["quarantined"] == {}  # boots clean
