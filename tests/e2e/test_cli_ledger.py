"""An operator's view of the ledger: list ambiguous effects, settle one by hand, back up storage."""

from __future__ import annotations

import json
import signal
import stat
from pathlib import Path

import lmdb
import pytest

from ouroactors import ActorSystem
from ouroactors.authorities.asking import ask_authority
from ouroactors.authorities.grants.operators import read_credentials
from ouroactors.authorities.ledger.actor import RecordSettled, RecordStarted
from ouroactors.authorities.ledger.domain import StartRequest, fingerprint
from ouroactors.core.generation_text import format_generation

from .cli_helpers import Served, cli, events, wait_event

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.multiproc


def request(i: int, grants: int | None) -> StartRequest:
    """An effect admitted by the grants generation ``grants`` (the snapshot must name it)."""
    return StartRequest(effect_id=f"pr-{i}", kind="http_request", idempotency_key=f"pr-{i}",
                        fingerprint=fingerprint("http_request", {"open": i}), principal="session-1",
                        session_id="session-1", authority={} if grants is None else {"grants": grants})


@pytest.mark.slow  # ~8 s: the agent tree, a ledger restart and ten CLI processes
def test_operator_lists_ambiguous_settles_and_backs_up(tmp_path):
    served = Served(tmp_path, str(REPO / "supervision_trees" / "agent.toml"))
    data = tmp_path / ".ouroactors"
    try:
        client = ActorSystem.connect(data)
        grants = client.child_info("agent/grants").generation
        ask_authority(client, "agent/ledger", RecordStarted(request(1, grants)))
        ask_authority(client, "agent/ledger", RecordSettled("pr-1", "ok"))
        ask_authority(client, "agent/ledger", RecordStarted(request(2, grants)))  # it "ran", then the runtime died
        mark = len(events(data))
        assert cli("kill", "agent/ledger", cwd=tmp_path).returncode == 0
        wait_event(data, "started", "agent/ledger", mark)

        listed = cli("ledger", "list", "--status", "ambiguous", "--json", cwd=tmp_path)
        assert listed.returncode == 0, listed.stderr
        [entry] = [json.loads(line) for line in listed.stdout.splitlines()]
        assert entry["effect_id"] == "pr-2" and entry["reason"] == "runtime restarted before settlement"

        refused = cli("ledger", "settle", "pr-2", "maybe", "--reason", "x", cwd=tmp_path)
        assert refused.returncode == 2  # not in the vocabulary: click refuses before anything is sent
        claimed = cli("ledger", "settle", "pr-2", "ok", "--reason", "x", "--operator", "mallory", cwd=tmp_path)
        assert claimed.returncode != 0 and "mallory" in claimed.stderr  # a name typed proves nothing
        operator, _token = read_credentials(data)
        settled = cli("ledger", "settle", "pr-2", "ok", "--reason", "found the PR by its marker", cwd=tmp_path)
        assert settled.returncode == 0, settled.stderr
        shown = json.loads(cli("ledger", "show", "pr-2", cwd=tmp_path).stdout)
        assert shown["status"] == "ok" and shown["settled_by"] == f"operator:{operator}"
        assert shown["reason"] == "found the PR by its marker"
        again = cli("ledger", "settle", "pr-2", "failed", "--reason", "changed my mind", cwd=tmp_path)
        assert again.returncode == 2 and "already ok" in again.stderr
        # the same settlement again: nothing changes, and the answer says who settled it — it claimed the operator
        # had just settled an effect its runtime had settled long before
        same = cli("ledger", "settle", "pr-1", "ok", "--reason", "looked again", cwd=tmp_path)
        assert same.returncode == 0 and "pr-1: already ok (settled by runner); nothing changed" in same.stdout

        status = cli("storage", "status", cwd=tmp_path)
        assert status.returncode == 0, status.stderr
        [shown_generation] = [line.split(": ", 1)[1] for line in status.stdout.splitlines()
                              if line.strip().startswith("generation:")]
        storage = client.child_info("agent/storage").generation
        assert shown_generation == format_generation(storage)  # as the tree shows it, not the raw integer

        backup = tmp_path / "backup"
        assert cli("storage", "backup", str(backup), cwd=tmp_path).returncode == 0
        # the copy is the data dir's whole content: only its owner may read it, as in the data dir (it was 0644 in
        # a 0755 directory, readable by every local user)
        assert stat.S_IMODE(backup.stat().st_mode) == 0o700
        assert [p.name for p in backup.iterdir()] == ["data.mdb"]
        assert stat.S_IMODE((backup / "data.mdb").stat().st_mode) == 0o600
        shared = tmp_path / "shared"  # a directory that already exists, open to all: the file still is not
        shared.mkdir(mode=0o755)
        assert cli("storage", "backup", str(shared), cwd=tmp_path).returncode == 0
        assert stat.S_IMODE((shared / "data.mdb").stat().st_mode) == 0o600 and len(list(shared.iterdir())) == 1
        env = lmdb.open(str(backup), readonly=True, max_dbs=32, lock=False)
        try:
            with env.begin() as txn:
                assert txn.get(b"pr-2", db=env.open_db(b"ledger", txn=txn)) is not None
        finally:
            env.close()
        served.proc.send_signal(signal.SIGTERM)
        assert served.finish()[0] == 0
    finally:
        served.kill()
