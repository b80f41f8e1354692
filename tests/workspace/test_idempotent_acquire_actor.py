"""Idempotent acquisition on real processes: the lease commits, its answer is lost, the retry (same
``request_id``) gets the grant of its own request — never a conflict with its own lease."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import msgpack
import pytest

from ouroactors import supervisor, worker
from ouroactors.authorities.asking import ask_authority
from ouroactors.authorities.storage.actor import storage_config
from ouroactors.authorities.storage.env import close_env, db, encode_u64, meta_db, open_env
from ouroactors.authorities.workspace.actor import NEXT_TOKEN_KEY, Acquire, CheckFence, Granted, Reclaim, Release
from ouroactors.authorities.workspace.leases import (
    IdempotencyConflict,
    LeaseConflict,
    NotReservationOwner,
    StaleFence,
    request_digest,
)
from ouroactors.core.errors import OuroactorsError
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule
from ouroactors.faults._asking import isolated

pytestmark = pytest.mark.multiproc

ECHO = "ouroactors.examples.workers:Echo"
KEY = "k-5d1c0b9a8e7f6a5b4c3d"  # the session's idempotency key for this lease (unguessable in real use)


def tree(allowed: str):
    return supervisor("agent", strategy="rest_for_one", intensity=10, children=[
        worker("storage", "ouroactors.authorities.storage.actor:Storage"),
        worker("workspace", "ouroactors.authorities.workspace.actor:Workspace",
               kwargs={"allowed_roots": [allowed], "heartbeat_s": 60.0, "owner_lost_after_s": 120.0}),
        supervisor("sessions", [worker("s1", ECHO), worker("s2", ECHO)], intensity=10),
    ])


def lost_ask(system: Any, message: Any, timeout: float) -> Any:
    """Ask through a private endpoint (a late answer cannot reach a later ask); the answer may be lost."""
    with isolated(system) as view:
        try:
            return ask_authority(view, "agent/workspace", message, timeout=timeout)
        except OuroactorsError as exc:
            return exc


def ask_until_answered(system: Any, message: Any, deadline_s: float = 15.0) -> Any:
    """Retry ``message`` (the same request) until the restarted authority answers it."""
    deadline = time.monotonic() + deadline_s
    while True:
        answer = lost_ask(system, message, timeout=2.0)
        if not isinstance(answer, OuroactorsError) or isinstance(answer, IdempotencyConflict | LeaseConflict):
            return answer
        if time.monotonic() > deadline:
            raise AssertionError(f"no answer to {message!r} within {deadline_s}s: {answer!r}")
        time.sleep(0.01)  # bounded poll while the workspace restarts


def test_a_kill_right_after_the_commit_then_a_retry_gets_the_lease_of_the_same_request(actor_system, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    actor_system.start_tree(tree(str(tmp_path)))
    owner = actor_system.resolve("agent/sessions/s1")
    before = actor_system.child_info("agent/workspace")
    actor_system.arm_faults("agent/workspace",
                            FaultPlan((FaultRule("storage.after_commit", FaultAction.KILL, nth=1),)))
    acquire = Acquire(str(project), "exclusive", "session-1", owner=owner, request_id=KEY)
    mark = actor_system.mark()

    first = lost_ask(actor_system, acquire, timeout=1.0)  # committed, then SIGKILLed before answering
    assert not isinstance(first, Granted), first
    actor_system.wait_for("started", "agent/workspace", after=mark)
    assert actor_system.child_info("agent/workspace").pid != before.pid  # a real kill, a new process
    killed = [e for e in actor_system.events.all()[mark:] if e.kind == "exited" and e.path == "agent/workspace"]
    assert killed and (killed[0].reason or {}).get("kind") == "killed"

    [committed] = ask_authority(actor_system, "agent/workspace",
                                "leases")  # the lost grant is durable, now a reservation
    assert committed.status == "reserved" and committed.request_sha256 == request_digest("session-1", KEY)

    retry = ask_until_answered(actor_system, acquire)  # before: LeaseConflict with its own lease
    assert isinstance(retry, Granted) and retry.replayed
    assert retry.lease.session_id == "session-1" and retry.lease.root == str(project)
    assert retry.lease.fencing_token > committed.fencing_token  # reclaimed: a zombie's token stays fenced
    assert [x.lease_id for x in ask_authority(actor_system, "agent/workspace", "leases")] == [retry.lease.lease_id]
    with pytest.raises(StaleFence):
        ask_authority(actor_system, "agent/workspace", CheckFence(str(project / "f"), committed.fencing_token))
    assert ask_authority(actor_system, "agent/workspace", CheckFence(str(project / "f"), retry.lease.fencing_token))

    again = ask_until_answered(actor_system, acquire)  # that answer lost as well: the very same grant
    assert again.replayed and (again.lease, again.capability) == (retry.lease, retry.capability)

    with pytest.raises(IdempotencyConflict):  # the key reused for something else: refused, nothing changed
        ask_authority(actor_system, "agent/workspace", Acquire(str(project), "shared_read", "session-1", owner=owner,
                                                    request_id=KEY))
    assert ask_authority(actor_system, "agent/workspace", "leases") == [retry.lease]
    released = ask_authority(actor_system, "agent/workspace",
                             Release(retry.lease.lease_id, capability=again.capability))
    assert released.status == "released"


def test_an_answer_lost_to_a_timeout_is_answered_again_with_the_same_lease_token_and_capability(
        actor_system, tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    actor_system.start_tree(tree(str(tmp_path)))
    owner = actor_system.resolve("agent/sessions/s1")
    slow = FaultRule("workspace.lease_recorded", FaultAction.DELAY, nth=1, delay_s=1.5)
    actor_system.arm_faults("agent/workspace", FaultPlan((slow,)))
    acquire = Acquire(str(project), "exclusive", "session-1", owner=owner, request_id=KEY)

    first = lost_ask(actor_system, acquire, timeout=0.3)  # the driver gives up; the lease is committed
    assert not isinstance(first, Granted), first
    retry = ask_until_answered(actor_system, acquire)
    assert isinstance(retry, Granted) and retry.replayed
    [held] = ask_authority(actor_system, "agent/workspace", "leases")
    assert retry.lease == held and held.status == "active" and held.fencing_token == 1  # the first request's
    again = ask_until_answered(actor_system, acquire)
    assert (again.lease, again.capability) == (retry.lease, retry.capability)
    other = actor_system.resolve("agent/sessions/s2")
    with pytest.raises(LeaseConflict):  # another session, even with the same key, is not that request
        ask_authority(actor_system, "agent/workspace", Acquire(str(project), "exclusive", "session-2", owner=other,
                                                    request_id=KEY))
    assert ask_authority(actor_system, "agent/workspace", Release(held.lease_id, capability=retry.capability)).status \
        == "released"


def test_a_keyed_reclaim_is_idempotent_too(actor_system, tmp_path):
    project = tmp_path / "r"
    project.mkdir()
    actor_system.start_tree(tree(str(tmp_path)))
    owner = actor_system.resolve("agent/sessions/s1")
    granted = ask_authority(actor_system, "agent/workspace",
                            Acquire(str(project), "exclusive", "session-1", owner=owner,
                                                          request_id=KEY))
    mark = actor_system.mark()
    actor_system.kill("agent/workspace")  # restarted: the lease is now a reservation
    actor_system.wait_for("started", "agent/sessions/s2", after=mark)
    owner = actor_system.resolve("agent/sessions/s1")
    reclaim = Reclaim("session-1", str(project), "exclusive", granted.capability, owner=owner, request_id=KEY)
    first = ask_authority(actor_system, "agent/workspace", reclaim)
    assert not first.replayed and first.lease.fencing_token > granted.lease.fencing_token
    again = ask_authority(actor_system, "agent/workspace", reclaim)  # the first answer lost: the same grant, no change
    assert again.replayed and (again.lease, again.capability) == (first.lease, first.capability)
    assert ask_authority(actor_system, "agent/workspace", "leases") == [first.lease]
    with pytest.raises(NotReservationOwner):  # without the key, the spent capability proves nothing
        ask_authority(actor_system, "agent/workspace",
                      Reclaim("session-1", str(project), "exclusive", granted.capability,
                                                    owner=owner))


def test_a_lease_record_written_before_request_ids_still_loads(actor_system, tmp_path):
    """The durable format only grew optional fields: an older record boots as it always did."""
    project = Path(os.path.realpath(tmp_path / "old"))
    project.mkdir()
    actor_system.start_tree(tree(str(tmp_path)))
    actor_system.terminate_child("agent", "workspace")
    old = {"lease_id": "lease-0000000000000007", "root": str(project), "mode": "exclusive", "session_id": "session-9",
           "owner": "gone", "fencing_token": 7, "acquired_ns": 1, "capability_sha256": "00" * 32, "status": "active"}
    config = storage_config(str(actor_system.data_dir))
    env = open_env(config)
    try:
        with env.begin(write=True) as txn:
            txn.put(f"lease/{old['lease_id']}".encode(), msgpack.packb(old), db=db(env, b"workspace"))
            txn.put(NEXT_TOKEN_KEY, encode_u64(8), db=meta_db(env))
    finally:
        close_env(config)
    actor_system.restart_child("agent", "workspace")
    [lease] = ask_authority(actor_system, "agent/workspace", "leases")
    assert (lease.lease_id, lease.fencing_token, lease.status) == (old["lease_id"], 7, "reserved")  # as ever
    assert lease.request_sha256 == "" and lease.capability_sealed == ""
    owner = actor_system.resolve("agent/sessions/s1")
    with pytest.raises(LeaseConflict):  # it still holds its root against others
        ask_authority(actor_system, "agent/workspace", Acquire(str(project), "exclusive", "session-1", owner=owner,
                                                    request_id=KEY))
