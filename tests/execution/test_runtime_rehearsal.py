"""A runtime nobody has opened rehearses its open (:mod:`ouroactors.runtime.execution.warming`) and, still idle, a whole
turn on a scratch data dir (:mod:`ouroactors.runtime.execution.rehearsal_turn`) — and changes nothing.

A spare runtime (kept by the session directory) idles until a message needs it; the open's process-wide work — a
sandbox plan, a grants decision on the node's policy, a configuration parsed, a record encoded — is done then,
off the message's way. The rehearsal must write nothing durable (no journal, ledger, grants record: the
environment's last transaction id is unchanged) and leave the runtime as good as new for the session that opens it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest

from ouroactors.runtime.execution.messages import OpenSession, RuntimeStatusRequest, SendText

from ..journal_support import journal_verdict
from .test_runtime_actor import CAPABILITIES, Reader, agent_tree

pytestmark = pytest.mark.multiproc


def last_txnid(data_dir: Any) -> int:
    """The environment's last committed write transaction (read in a child process: see ..journal_support)."""
    code = ("import json; from ouroactors.authorities.storage.env import StorageConfig, open_env; "
            f"env = open_env(StorageConfig.under({str(data_dir)!r})); print(json.dumps(env.info()['last_txnid']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return int(json.loads(out.stdout))


def rehearsals(system: Any, path: str, kind: str = "runtime_rehearsed") -> list[Any]:
    system.events.poll()
    return [e for e in system.events.all() if e.kind == kind and e.path == path]


def test_an_unopened_runtime_rehearses_its_open_writing_nothing_then_serves_a_session(actor_system, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "NOTES.md").write_text("# notes\n- [ ] try the demo\n")
    actor_system.start_tree(agent_tree(str(tmp_path)))
    before = last_txnid(actor_system.data_dir)
    path = f"agent/execution/{actor_system.start_child('agent/execution', ()).id}"
    deadline = time.monotonic() + 30
    while not rehearsals(actor_system, path, "runtime_rehearsed_turn"):  # the open's rehearsal comes first
        assert time.monotonic() < deadline, "the unopened runtime did not rehearse a turn"
        time.sleep(0.02)  # polling the event log with a deadline
    [rehearsed] = rehearsals(actor_system, path)
    [turn] = rehearsals(actor_system, path, "runtime_rehearsed_turn")
    assert rehearsed.fields["ms"] >= 0 and turn.fields["status"] == "completed", turn.fields
    assert rehearsed.time_ns <= turn.time_ns
    # nothing durable written to the node: no journal, ledger or grants record (the turn ran on a scratch data dir)
    assert last_txnid(actor_system.data_dir) == before
    assert actor_system.ask(path, RuntimeStatusRequest(), timeout=10).session_id is None

    # and the rehearsed runtime serves a session as any other: its turn runs every call and journals it
    from ouroactors.authorities.asking import ask_authority
    from ouroactors.authorities.workspace.messages import Acquire

    granted = ask_authority(actor_system, "agent/workspace",
                            Acquire(str(ws), "exclusive", "s1", owner=actor_system.resolve(path)))
    CAPABILITIES[granted.lease.lease_id] = granted.capability
    actor_system.ask(path, OpenSession("s1", {"workspace": str(ws), "sandbox": {"mode": "none"}},
                                       granted.lease.lease_id))
    actor_system.ask(path, SendText("please"))
    events = Reader(actor_system, path).until("turn_settled")
    assert events[-1].data["status"] == "completed"
    assert "- [x] try the demo" in (ws / "NOTES.md").read_text()
    assert journal_verdict(actor_system.data_dir, "s1") == ["ok", "turn_settled"]
    assert len(rehearsals(actor_system, path)) == 1  # once, before its open
    assert len(rehearsals(actor_system, path, "runtime_rehearsed_turn")) == 1


