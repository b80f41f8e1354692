"""What a process plans or warms before a session needs it, and that doing so changes nothing.

* :func:`ouroactors.core.codec.prepare` plans a record's encoding (and every model its fields may hold) ahead of
  its first use; the bytes encoded are the same with or without it (they are hashed and chained).
* :func:`~ouroactors.runtime.execution.warming.preload` (the execution supervisor, before it forks runtimes) and
  the coordinator's ``on_preload`` leave every record type their children write planned.
* :func:`~ouroactors.runtime.execution.warming.rehearse_writes` (an unopened runtime) runs a turn's write
  transaction dry on the real databases and aborts it: no transaction id moves, no byte changes, the writer lock
  is free afterwards — also when a record there does not decode.
"""

from __future__ import annotations

import subprocess
import sys

import lmdb
import pytest

from ouroactors.authorities.storage.env import KNOWN_DBS, db
from ouroactors.core import codec
from ouroactors.runtime.coordinator.record import (
    PendingWait,
    PinnedVersions,
    RuntimeAttachment,
    SessionRecord,
    WorkspaceLease,
)
from ouroactors.runtime.coordinator.store import SessionStore
from ouroactors.runtime.execution import warming
from ouroactors.runtime.execution.journal import Journal

from ..coordinator.support import new_record


def _forget(*classes: type) -> None:
    for cls in classes:
        for cache in (codec._FIELDS, codec._PLANS, codec._HEADS):
            cache.pop(cls, None)


def test_prepare_plans_a_record_and_every_model_its_fields_hold_without_changing_a_byte():
    record = new_record(runtime=RuntimeAttachment(runtime_id="rt", generation=3),
                        workspace=WorkspaceLease(lease_id="l1", root="/w", fencing_token=2))
    before = codec.encode(record)
    nested = (SessionRecord, PinnedVersions, RuntimeAttachment, WorkspaceLease, PendingWait)
    _forget(*nested)
    codec.prepare(SessionRecord)
    assert all(cls in codec._FIELDS and cls in codec._PLANS for cls in nested)
    assert SessionRecord in codec._HEADS
    assert codec.encode(record) == before
    assert codec.decode(before, SessionRecord) == record
    codec.prepare(SessionRecord, int, str)  # prepared again, and what is not a model: nothing happens


def _planned_in_child(code: str) -> list[str]:
    """Class names whose encoding a fresh interpreter has planned after running ``code``."""
    script = f"{code}\nfrom ouroactors.core import codec\nprint(' '.join(sorted(c.__name__ for c in codec._FIELDS)))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_the_execution_supervisors_preload_plans_every_record_a_runtime_writes():
    planned = _planned_in_child("from ouroactors.runtime.execution import warming; warming.preload()")
    for cls in warming.written_records():
        assert cls.__name__ in planned
    assert {"RuntimeAttachment", "WorkspaceLease"} <= set(planned)  # held by the session record a runtime carries


def test_the_coordinators_preload_plans_its_records():
    planned = _planned_in_child("from ouroactors.runtime.coordinator.actor import Coordinator; "
                                "Coordinator.on_preload()")
    assert {"SessionRecord", "PublishedEvent", "AcceptedEvent", "RejectedEvent", "Recoverable", "Entry"} <= set(planned)


def _everything(env: lmdb.Environment) -> dict[bytes, list[tuple[bytes, bytes]]]:
    with env.begin() as txn:
        return {name: [(bytes(k), bytes(v)) for k, v in txn.cursor(db=db(env, name))] for name in KNOWN_DBS}


def _filled(env: lmdb.Environment) -> None:
    store = SessionStore(env)
    store.create(new_record("s1"))
    journal = Journal(env, "s1")
    for n in range(3):
        assert journal.append("prompt", {"text": f"p{n}"}, turn=0, at=n).committed


def test_rehearse_writes_aborts_a_turns_write_transaction_leaving_every_byte(env):
    _filled(env)
    before, txnid = _everything(env), env.info()["last_txnid"]
    assert before[b"sessions"] and before[b"journal"]  # there is something to rehearse on
    warming.rehearse_writes(env)
    assert env.info()["last_txnid"] == txnid
    assert _everything(env) == before
    with env.begin(write=True) as txn:  # the writer lock was given back
        txn.put(b"after", b"1", db=db(env, b"ledger_runs"))


def test_rehearse_writes_on_an_empty_environment_does_nothing(env):
    txnid = env.info()["last_txnid"]
    warming.rehearse_writes(env)
    assert env.info()["last_txnid"] == txnid


def test_a_record_that_does_not_decode_fails_the_rehearsal_and_leaves_the_lock_free(env):
    _filled(env)
    with env.begin(write=True) as txn:
        txn.put(b"zz-corrupt", b"\xc1not msgpack", db=db(env, b"sessions"))  # the newest key: the one decoded
    before, txnid = _everything(env), env.info()["last_txnid"]
    with pytest.raises(codec.CodecError):
        warming.rehearse_writes(env)
    assert env.info()["last_txnid"] == txnid and _everything(env) == before
    with env.begin(write=True) as txn:
        txn.put(b"after", b"1", db=db(env, b"ledger_runs"))


def test_the_execution_supervisors_preload_rehearses_a_turn_last(monkeypatch):
    """The turn runs after every other warm-up (it uses their caches) and once: a spy stands in for it here, the real
    one runs in the next test."""
    from ouroactors.runtime.execution import rehearsal_turn

    calls: list[str] = []
    monkeypatch.setattr(rehearsal_turn, "rehearse_turn", lambda: calls.append("turn") or "completed")
    monkeypatch.setattr(warming.codec, "prepare", lambda *classes: calls.append("prepare"))
    warming.preload()
    assert calls == ["prepare", "turn"]


def test_after_the_preloads_turn_nothing_that_must_not_cross_a_fork_is_left_and_a_forked_child_runs_turns():
    """The supervisor forks every runtime after its preload: no LMDB environment may be open then (py-lmdb's registry
    and the reader table would cross the fork) and no thread of the turn left running. A child forked after it runs
    a turn of its own on a new scratch environment."""
    code = ("import os, threading\n"
            "from ouroactors.runtime.execution import warming, rehearsal_turn\n"
            "from ouroactors.authorities.storage import env\n"
            "warming.preload()\n"
            "print(len(env._open), threading.active_count())\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    os._exit(0 if rehearsal_turn.rehearse_turn() == 'completed' else 1)\n"
            "print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "1", "0"], out.stdout
