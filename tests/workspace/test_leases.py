"""The lease table's rules, one by one (pure; no filesystem)."""

from __future__ import annotations

import hashlib
from typing import Any, TypeVar

import pytest

from ouroactors.authorities.workspace.leases import (
    Acquired,
    ConflictingRecoveryState,
    Decision,
    Lease,
    LeaseConflict,
    LeaseError,
    LeaseNotFound,
    LeaseTable,
    NoReservation,
    NotLeaseOwner,
    NotReservationOwner,
    ReservationMismatch,
    ReservationPending,
    StaleDecision,
    StaleFence,
    invariant_violations,
)

from .support import fake_random

D = TypeVar("D", bound=Decision)


def do(table: LeaseTable, decision: D) -> D:
    table.apply(decision)
    table.check_invariant()
    return decision


def acquire(table: LeaseTable, root: str, mode: str = "exclusive", session: str = "s1", owner: str = "o1",
            now: int = 1) -> Acquired:
    decision = table.acquire(root, mode, session, owner, now)
    do(table, decision)
    return decision


def test_acquire_returns_capability_once_and_keeps_only_its_digest(table):
    got = acquire(table, "/w/a")
    assert len(got.capability) == 32
    assert got.lease.capability_sha256 == hashlib.sha256(got.capability).hexdigest()
    assert got.lease.status == "active" and got.lease.fencing_token == 1
    assert repr(got.capability) not in repr(got) and "capability=" not in repr(got)  # repr does not leak it
    stored = table.get(got.lease.lease_id)
    assert stored == got.lease and not hasattr(stored, "capability")
    assert table.next_token == 2


def test_real_random_capabilities_differ():
    t = LeaseTable()
    a = t.acquire("/w/a", "shared_read", "s1", "o1", 0).capability
    b = t.acquire("/w/a", "shared_read", "s1", "o1", 0).capability
    assert a != b and len(a) == len(b) == 32


def test_conflict_names_every_holder(table):
    acquire(table, "/w/a/x", "shared_read", "s1", "o1")
    acquire(table, "/w/a/y", "shared_read", "s2", "o2")
    with pytest.raises(LeaseConflict) as info:
        table.acquire("/w/a", "exclusive", "s3", "o3", 5)
    err = info.value
    assert {h.session_id for h in err.holders} == {"s1", "s2"}
    text = str(err)
    for needle in ["'s1'", "'s2'", "shared_read", "'/w/a/x'", "'/w/a/y'", "exclusive on '/w/a'"]:
        assert needle in text


def test_shared_read_coexist(table):
    acquire(table, "/w/a", "shared_read", "s1", "o1")
    acquire(table, "/w/a", "shared_read", "s2", "o2")
    acquire(table, "/w/a/b", "shared_read", "s3", "o3")
    assert len(table.live()) == 3


@pytest.mark.parametrize("held, asked", [("exclusive", "exclusive"), ("exclusive", "shared_read"),
                                         ("shared_read", "exclusive")])
@pytest.mark.parametrize("held_root, asked_root", [("/w/a", "/w/a"), ("/w/a", "/w/a/b"), ("/w/a/b", "/w/a")])
def test_overlapping_conflicts(table, held, asked, held_root, asked_root):
    acquire(table, held_root, held, "s1", "o1")
    with pytest.raises(LeaseConflict):
        table.acquire(asked_root, asked, "s2", "o2", 2)
    with pytest.raises(LeaseConflict):  # the same session is not exempt from its own active lease
        table.acquire(asked_root, asked, "s1", "o1", 2)


def test_non_prefix_roots_do_not_overlap(table):
    acquire(table, "/w/a/b", "exclusive", "s1", "o1")
    acquire(table, "/w/a/bc", "exclusive", "s2", "o2")
    acquire(table, "/w/a/c", "exclusive", "s3", "o3")
    assert len(table.live()) == 3


def test_bad_requests_change_nothing(table):
    for args in [("w/a", "exclusive"), ("/w/../a", "exclusive"), ("/w/a/", "exclusive"), ("/w/a", "write")]:
        with pytest.raises(LeaseError):
            table.acquire(args[0], args[1], "s1", "o1", 1)
    with pytest.raises(LeaseError):
        table.acquire("/w/a", "exclusive", "", "o1", 1)
    assert table.live() == [] and table.next_token == 1 and table.version == 0


def test_release_by_owner_and_idempotent_repeat(table):
    got = acquire(table, "/w/a")
    first = do(table, table.release(got.lease.lease_id, owner="o1"))
    assert not first.already and first.lease.status == "released"
    again = table.release(got.lease.lease_id, owner="o1")
    assert again.already and again.changes == ()
    do(table, again)
    acquire(table, "/w/a", session="s2", owner="o2")  # the root is free again


def test_release_by_capability(table):
    got = acquire(table, "/w/a")
    with pytest.raises(NotLeaseOwner):
        table.release(got.lease.lease_id, capability=b"\x00" * 32)
    with pytest.raises(NotLeaseOwner):
        table.release(got.lease.lease_id, owner="someone-else")
    with pytest.raises(NotLeaseOwner):
        table.release(got.lease.lease_id)
    assert do(table, table.release(got.lease.lease_id, capability=got.capability)).already is False
    assert table.release(got.lease.lease_id, capability=got.capability).already is True
    with pytest.raises(NotLeaseOwner):  # a wrong credential is refused even on a tombstone
        table.release(got.lease.lease_id, capability=b"\x01" * 32)


def test_release_unknown_and_tombstone_bound():
    t = LeaseTable(max_tombstones=3, random_bytes=fake_random())
    with pytest.raises(LeaseNotFound):
        t.release("lease-nope", owner="o1")
    ids = []
    for i in range(5):
        got = acquire(t, f"/w/{i}")
        do(t, t.release(got.lease.lease_id, owner="o1"))
        ids.append(got.lease.lease_id)
    assert list(t.tombstones) == ids[2:]
    assert t.release(ids[-1], owner="o1").already
    with pytest.raises(LeaseNotFound):
        t.release(ids[0], owner="o1")


@pytest.mark.parametrize("state, expected", [("active", "reserved"), ("unknown", "reserved"), ("terminal", "released")])
def test_owner_death(table, state, expected):
    got = acquire(table, "/w/a", session="s1", owner="o1")
    other = acquire(table, "/w/b", session="s2", owner="o2")
    died = do(table, table.owner_died("o1", state))
    assert [x.status for x in died.changes] == [expected]
    lease = table.get(got.lease.lease_id)
    assert lease is not None and lease.status == expected
    assert table.get(other.lease.lease_id).status == "active"
    assert table.owner_died("o1", state).changes == ()  # a second DOWN changes nothing
    if expected == "reserved":
        with pytest.raises(LeaseConflict) as info:  # the reservation still holds the root for s1
            table.acquire("/w/a/sub", "shared_read", "s9", "o9", 3)
        assert "reserved" in str(info.value) and "'s1'" in str(info.value)
    else:
        acquire(table, "/w/a/sub", "exclusive", "s9", "o9")


def test_owner_death_per_session_mapping_fails_closed(table):
    acquire(table, "/w/a", session="s1", owner="o1")
    acquire(table, "/w/b", session="s2", owner="o1")
    acquire(table, "/w/c", session="s3", owner="o1")
    died = do(table, table.owner_died("o1", {"s1": "terminal", "s2": "active"}))
    assert {x.session_id for x in died.released} == {"s1"}
    assert {x.session_id for x in died.reserved} == {"s2", "s3"}  # s3 missing from the map: unknown
    with pytest.raises(LeaseError):
        table.owner_died("o1", "sleeping")


def test_reservation_cannot_be_released_by_the_dead_owner_or_capability(table):
    got = acquire(table, "/w/a")
    do(table, table.owner_died("o1", "active"))
    attempts: list[dict[str, Any]] = [{"owner": "o1"}, {"capability": got.capability}]
    for kwargs in attempts:
        with pytest.raises(NotLeaseOwner, match="reserved"):
            table.release(got.lease.lease_id, **kwargs)


def test_own_reservation_must_be_reclaimed_not_acquired(table):
    acquire(table, "/w/a", session="s1", owner="o1")
    do(table, table.owner_died("o1", "unknown"))
    with pytest.raises(ReservationPending, match="reclaim"):
        table.acquire("/w/a", "exclusive", "s1", "o1-new", 5)
    acquire(table, "/w/b", session="s1", owner="o1-new")  # elsewhere it may acquire


def test_reclaim_by_proof_only_with_a_larger_token(table):
    got = acquire(table, "/w/a", session="s1", owner="o1")
    acquire(table, "/w/z", session="s2", owner="o2")
    do(table, table.owner_died("o1", "active"))
    with pytest.raises(NotReservationOwner):
        table.reclaim("s1", "/w/a", "exclusive", "intruder", proof_session_id="s2")
    with pytest.raises(ReservationMismatch):
        table.reclaim("s1", "/w/a", "shared_read", "o1-new", proof_session_id="s1")
    with pytest.raises(ReservationMismatch):
        table.reclaim("s1", "/w/a/sub", "exclusive", "o1-new", proof_session_id="s1")
    with pytest.raises(NoReservation):
        table.reclaim("s2", "/w/z", "exclusive", "o2", proof_session_id="s2")
    back = do(table, table.reclaim("s1", "/w/a", "exclusive", "o1-new", proof_session_id="s1", now_ns=9))
    assert back.lease.status == "active" and back.lease.owner == "o1-new"
    assert back.lease.fencing_token > got.lease.fencing_token
    assert back.lease.lease_id != got.lease.lease_id
    assert table.get(got.lease.lease_id).status == "released"
    assert back.capability != got.capability
    # the new owner can release with the new capability; the old capability opens nothing
    with pytest.raises(NotLeaseOwner):
        table.release(back.lease.lease_id, capability=got.capability)
    do(table, table.release(back.lease.lease_id, capability=back.capability))


def test_session_ended_releases_its_reservations(table):
    acquire(table, "/w/a", session="s1", owner="o1")
    do(table, table.owner_died("o1", "unknown"))
    done = do(table, table.session_ended("s1"))
    assert [x.status for x in done.released] == ["released"]
    acquire(table, "/w/a", session="s2", owner="o2")


def test_rebuild_at_boot(table):
    t = LeaseTable(next_token=40, random_bytes=fake_random())
    rebuilt = do(t, t.rebuild([("s1", "/w/a", "exclusive", "active"), ("s2", "/w/b", "shared_read", "unknown"),
                               ("s3", "/w/a", "exclusive", "terminal"), ("s4", "/w/b/c", "shared_read", "active")]))
    assert sorted(x.session_id for x in rebuilt.reserved) == ["s1", "s2", "s4"]
    assert all(x.status == "reserved" and x.fencing_token >= 40 for x in t.live())
    assert t.next_token == 43
    with pytest.raises(LeaseConflict):
        t.acquire("/w/a/x", "exclusive", "s9", "o9", 1)
    # a rebuilt reservation has no owner and no capability: only reclaim (or session end) frees it
    with pytest.raises(NotLeaseOwner):
        t.release(rebuilt.reserved[0].lease_id, owner="")
    back = do(t, t.reclaim("s1", "/w/a", "exclusive", "o1-new", proof_session_id="s1"))
    assert back.lease.fencing_token == 43


@pytest.mark.parametrize("records", [
    [("s1", "/w/a", "exclusive", "active"), ("s2", "/w/a/b", "shared_read", "unknown")],
    [("s1", "/w/a", "exclusive", "active"), ("s1", "/w/a", "exclusive", "active")],
    [("s1", "/w/a", "exclusive", "bogus")],
    [("s1", "w/a", "exclusive", "active")],
    [("s1", "/w/a", "exclusive")],
])
def test_rebuild_refuses_bad_or_overlapping_recovery_state(table, records):
    with pytest.raises(ConflictingRecoveryState):
        table.rebuild(records)
    assert table.live() == [] and table.next_token == 1


def test_fencing_refuses_the_zombies_late_write(table):
    zombie = acquire(table, "/w/a", session="s1", owner="o1")
    assert table.check_fence("/w/a/src/x.py", zombie.lease.fencing_token) == zombie.lease
    do(table, table.owner_died("o1", "active"))  # declared dead, but still running
    with pytest.raises(StaleFence):
        table.check_fence("/w/a/src/x.py", zombie.lease.fencing_token)  # reserved: nobody writes
    back = do(table, table.reclaim("s1", "/w/a", "exclusive", "o1-new", proof_session_id="s1"))
    with pytest.raises(StaleFence, match="lower than the current holder"):
        table.check_fence("/w/a/src/x.py", zombie.lease.fencing_token)
    table.check_fence("/w/a/src/x.py", back.lease.fencing_token)
    do(table, table.release(back.lease.lease_id, owner="o1-new"))
    with pytest.raises(StaleFence, match="no live lease"):
        table.check_fence("/w/a/src/x.py", back.lease.fencing_token)


def test_fencing_for_shared_read_and_unknown_tokens(table):
    reader = acquire(table, "/w/a", "shared_read", "s1", "o1")
    with pytest.raises(StaleFence, match="no writes"):
        table.check_fence("/w/a/f", reader.lease.fencing_token)
    assert table.check_fence("/w/a/f", reader.lease.fencing_token, write=False) == reader.lease
    with pytest.raises(StaleFence, match="not an active lease"):
        table.check_fence("/w/a/f", 999)
    with pytest.raises(StaleFence):
        table.check_fence("/w/ab", reader.lease.fencing_token, write=False)  # not under /w/a


def test_decisions_are_pure_and_bound_to_a_version(table):
    first = table.acquire("/w/a", "exclusive", "s1", "o1", 1)
    second = table.acquire("/w/a", "exclusive", "s2", "o2", 1)  # computed on the same version
    assert table.live() == [] and table.next_token == 1  # deciding changed nothing
    table.apply(first)
    with pytest.raises(StaleDecision):
        table.apply(second)  # would have broken invariant 5
    table.check_invariant()


def test_loading_persisted_records_checks_them():
    a = Lease("lease-1", "/w/a", "exclusive", "s1", "o1", 1, 0, "")
    b = Lease("lease-2", "/w/a/b", "shared_read", "s2", "o2", 2, 0, "")
    assert invariant_violations([a, b]) == [(a, b)]
    with pytest.raises(ConflictingRecoveryState):
        LeaseTable(next_token=3, leases=[a, b])
    with pytest.raises(ConflictingRecoveryState, match="next_token"):
        LeaseTable(next_token=2, leases=[b])
    t = LeaseTable(next_token=3, leases=[a], tombstones=[Lease("lease-2", "/w/x", "exclusive", "s2", "o2", 2, 0, "",
                                                               "released")])
    assert t.release("lease-2", owner="o2").already


def test_rebuild_is_idempotent_over_what_is_already_held():
    t = LeaseTable(random_bytes=fake_random())
    records = [("s1", "/w/a", "exclusive", "active"), ("s2", "/w/b", "shared_read", "unknown")]
    do(t, t.rebuild(records))
    again = t.rebuild(records)
    assert again.changes == () and again.next_token == t.next_token
    do(t, again)
    assert len(t.live()) == 2
