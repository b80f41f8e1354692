"""A coordinator killed at ``coordinator.lease_kept`` during a recovery: the next one recovers, it does not park.

The runtime is SIGKILLed mid-turn, so its lease becomes a reservation and the coordinator's recovery reclaims it for
a replacement runtime and keeps the new lease beside the record (``put_lease``); the coordinator is SIGKILLed right
there (``coordinator.lease_kept``), before it opened the replacement and attached it in the record. The record still
names the lost runtime and its lease, while the kept lease is the new one. The next incarnation must recognise that
kept lease as the session's own (the workspace shows it, for this session, with the kept capability) and take it
over for its own replacement, not judge the reservation unreclaimable and park the session.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import pytest

from ouroactors.runtime.coordinator.messages import SessionView
from ouroactors.runtime.coordinator.recovery import Reservation, kept_reservation
from ouroactors.sessions import Sessions

from .actor_support import live_leases, recover_with_coordinator_killed_at, wait_for


@dataclass(frozen=True)
class _Live:  # the fields of a workspace Lease that kept_reservation reads
    lease_id: str
    session_id: str = "s1"
    root: str = "/w"
    mode: str = "exclusive"
    capability_sha256: str = hashlib.sha256(b"cap-2").hexdigest()
    status: str = "active"


KEPT = {"lease_id": "L2", "root": "/w", "mode": "exclusive", "capability": b"cap-2", "fencing_token": 2}


def test_the_lease_the_record_names_is_proven_by_its_kept_capability():
    assert kept_reservation("s1", "L2", KEPT, None) == (Reservation.RECLAIMABLE, "")


@pytest.mark.parametrize("status", ["active", "reserved"])
def test_a_kept_lease_the_record_does_not_name_yet_is_the_sessions_own_when_the_workspace_shows_it(status):
    assert kept_reservation("s1", "L1", KEPT, [_Live("L0", "other"), _Live("L2", status=status)]) == \
        (Reservation.RECLAIMABLE, "")


@pytest.mark.parametrize("kept, live, why", [
    (None, None, "no lease capability"),
    ({**KEPT, "capability": b""}, None, "no lease capability"),
    (KEPT, None, "did not answer"),
    (KEPT, [_Live("L9")], "no such live lease (it holds L9 for this session)"),
    (KEPT, [_Live("L1", capability_sha256="?")], "no such live lease (it holds L1 for this session)"),
    (KEPT, [_Live("L2", session_id="s2")], "not this session's"),
    (KEPT, [_Live("L2", root="/other")], "not this session's"),
    (KEPT, [_Live("L2", mode="shared_read")], "not this session's"),
    (KEPT, [_Live("L2", capability_sha256=hashlib.sha256(b"forged").hexdigest())], "not this session's"),
    (KEPT, [_Live("L2", status="released")], "not this session's"),
])
def test_a_kept_lease_whose_ownership_cannot_be_proven_is_not_reclaimable_and_says_why(kept, live, why):
    reservation, reason = kept_reservation("s1", "L1", kept, live)
    assert reservation is Reservation.NOT_RECLAIMABLE and why in reason


@pytest.mark.parametrize("live", [[], [_Live("L7", session_id="s2")]])
def test_nothing_is_reserved_when_the_workspace_holds_no_lease_of_the_session(live):
    """The kept lease released too (its runtime ended unopened: found by ``enumerate-sessions --action
    commit_unknown --suspend`` at the commit that keeps it): nothing to reclaim, so nothing to park on — the
    replacement acquires afresh (it was parked ``reservation_not_reclaimable``, waiting for an operator)."""
    assert kept_reservation("s1", "L1", KEPT, live) == (Reservation.NONE, "")


@pytest.mark.slow
def test_a_coordinator_killed_after_keeping_its_reclaimed_lease_is_replaced_and_the_session_recovers(
        actor_system, tmp_path: Path):
    system = actor_system
    before, lost = recover_with_coordinator_killed_at(system, tmp_path, "coordinator.lease_kept", timeout=30)
    sessions = Sessions(system)
    kept = live_leases(system)  # the reclaimed lease, kept beside the record, which still names the lost one
    assert len(kept) == 1 and kept[0].lease_id != lost.lease_id, kept

    def settled() -> SessionView | None:  # attached to a runtime after the lost one, or parked
        view = sessions.show("s1")
        replaced = view.state == "running" and view.generation is not None and view.generation > before.generation
        return view if replaced or view.state == "parked" else None
    after = wait_for("the session replaced or parked", settled, timeout=60)
    assert after.state == "running", f"{after.state}: {after.reason}"
    [held] = live_leases(system)  # exactly one lease: the replacement's, nothing left reserved
    assert held.status == "active" and held.session_id == "s1"
    assert held.lease_id != lost.lease_id
    events = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=40))
    assert [e.cursor for e in events] == list(range(1, len(events) + 1))
    assert events[-1].data["status"] == "completed" and events[-1].generation == after.generation
    assert wait_for("suspended", lambda: sessions.show("s1").state == "suspended")
    wait_for("the lease released", lambda: live_leases(system) == [])
    assert wait_for("no runtime left running", lambda: not [
        c for c in system.which_children("agent/execution") if c.status == "running"])
    sessions.send("s1", "again")  # the root is free for the next turn
    assert list(sessions.events("s1", after=events[-1].cursor, follow=True, until="turn_settled",
                                idle_timeout=40))[-1].data["status"] == "completed"
