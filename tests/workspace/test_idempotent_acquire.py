"""Idempotent lease acquisition (a client-chosen ``request_id``), in the pure lease table.

An acquire whose answer was lost is asked again with the same key: it gets the grant that request
made — never a conflict with its own lease — and a key reused for something else is refused with
nothing changed. The capability is kept only sealed under the key; old records still decode.
"""

from __future__ import annotations

import copy

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ouroactors.authorities.workspace.leases import (
    MAX_REQUEST_ID,
    MIN_REQUEST_ID,
    ConflictingRecoveryState,
    IdempotencyConflict,
    Lease,
    LeaseConflict,
    LeaseError,
    LeaseTable,
    Reclaimed,
    RequestCompleted,
    ReservationPending,
    capability_digest,
    lease_from_record,
    lease_record,
    request_digest,
    seal_capability,
    unseal_capability,
)

from .support import fake_random

KEY = "k-7f3a9c1e5b2d4e6f8a0b"  # an idempotency key (>= 16 characters)
OTHER = "k-0123456789abcdef0123"




def state(table: LeaseTable) -> tuple:
    return copy.deepcopy((dict(table.leases), dict(table.tombstones), table.next_token, table.version))


def applied(table: LeaseTable, decision):
    table.apply(decision)
    table.check_invariant()
    return decision


def test_a_retry_of_an_active_lease_gets_the_same_grant_and_changes_nothing(table):
    first = applied(table, table.acquire("/w/a", "exclusive", "s1", "o1", 5, request_id=KEY))
    assert not first.replayed and first.lease.request_sha256 == request_digest("s1", KEY)
    before = state(table)
    again = table.acquire("/w/a", "exclusive", "s1", "o1", 9, request_id=KEY)
    assert again.replayed and again.changes == () and again.next_token == table.next_token
    assert (again.lease, again.capability) == (first.lease, first.capability)  # same id, token, capability
    applied(table, again)
    assert state(table) == before  # nothing durable, not even the version moved
    other_owner = table.acquire("/w/a", "exclusive", "s1", "o2", 9, request_id=KEY)
    assert other_owner.lease.owner == "o1" and other_owner.capability == first.capability  # owner kept


def test_a_retry_after_the_lease_became_a_reservation_reclaims_it_with_a_larger_token(table):
    first = applied(table, table.acquire("/w/a", "exclusive", "s1", "o1", 5, request_id=KEY))
    applied(table, table.owner_died("o1", "unknown"))  # e.g. the workspace restarted after the commit
    again = table.acquire("/w/a", "exclusive", "s1", "o2", 9, request_id=KEY)
    assert isinstance(again, Reclaimed) and again.replayed
    assert again.reservation.lease_id == first.lease.lease_id and again.reservation.status == "released"
    assert again.lease.fencing_token > first.lease.fencing_token  # a zombie with the old token stays fenced
    assert again.lease.status == "active" and again.lease.owner == "o2"
    assert again.capability != first.capability and again.lease.request_sha256 == first.lease.request_sha256
    applied(table, again)
    assert [x.lease_id for x in table.live()] == [again.lease.lease_id]
    third = table.acquire("/w/a", "exclusive", "s1", "o2", 10, request_id=KEY)  # that answer lost too
    assert third.replayed and third.changes == () and (third.lease, third.capability) == (again.lease,
                                                                                          again.capability)


@pytest.mark.parametrize(("root", "mode"), [("/w/a/b", "exclusive"), ("/w/a", "shared_read"), ("/x", "exclusive")])
def test_a_key_reused_with_other_arguments_is_a_conflict_that_changes_nothing(table, root, mode):
    applied(table, table.acquire("/w/a", "exclusive", "s1", "o1", 5, request_id=KEY))
    before = state(table)
    with pytest.raises(IdempotencyConflict) as caught:
        table.acquire(root, mode, "s1", "o1", 6, request_id=KEY)
    assert "this request_id was used for exclusive on '/w/a'" in str(caught.value)
    assert KEY not in str(caught.value)  # the key unlocks the capability: never in an error message
    assert state(table) == before


def test_the_key_is_bound_to_its_session(table):
    applied(table, table.acquire("/w/a", "exclusive", "s1", "o1", 5, request_id=KEY))
    with pytest.raises(LeaseConflict):  # another session with the same key matches nothing: a plain conflict
        table.acquire("/w/a", "exclusive", "s2", "o2", 6, request_id=KEY)
    elsewhere = applied(table, table.acquire("/x", "exclusive", "s2", "o2", 6, request_id=KEY))
    assert not elsewhere.replayed and elsewhere.lease.request_sha256 != request_digest("s1", KEY)


def test_a_key_whose_lease_was_released_is_refused_until_its_tombstone_is_evicted():
    table = LeaseTable(random_bytes=fake_random(), max_tombstones=2)
    got = applied(table, table.acquire("/w/a", "exclusive", "s1", "o1", 5, request_id=KEY))
    applied(table, table.release(got.lease.lease_id, capability=got.capability))
    before = state(table)
    with pytest.raises(RequestCompleted, match="has been released"):  # a late retry must not re-take the root
        table.acquire("/w/a", "exclusive", "s1", "o1", 6, request_id=KEY)
    with pytest.raises(IdempotencyConflict):
        table.acquire("/w/b", "exclusive", "s1", "o1", 6, request_id=KEY)
    assert state(table) == before
    for root in ("/w/b", "/w/c"):  # two more tombstones evict the first
        other = applied(table, table.acquire(root, "exclusive", "s1", "o1", 7))
        applied(table, table.release(other.lease.lease_id, owner="o1"))
    fresh = table.acquire("/w/a", "exclusive", "s1", "o1", 8, request_id=KEY)
    assert not fresh.replayed  # forgotten: documented bound of the key's memory


def test_a_keyed_reclaim_is_answered_again_by_replay(table):
    first = applied(table, table.acquire("/w/a", "exclusive", "s1", "o1", 5, request_id=KEY))
    applied(table, table.owner_died("o1", "active"))
    reclaimed = applied(table, table.reclaim("s1", "/w/a", "exclusive", "o2", "s1", 6, request_id=OTHER))
    assert reclaimed.lease.request_sha256 == request_digest("s1", OTHER)
    assert table.replay("s1", "/w/a", "exclusive", OTHER).capability == reclaimed.capability
    assert table.replay("s1", "/x", "exclusive", "k-never-used-0000000") is None
    with pytest.raises(RequestCompleted):  # the first key's lease was consumed by the reclaim
        table.replay("s1", "/w/a", "exclusive", KEY)
    assert first.lease.lease_id in table.tombstones


@pytest.mark.parametrize("bad", ["", "short", "x" * (MIN_REQUEST_ID - 1), "x" * (MAX_REQUEST_ID + 1), 12345, b"k" * 20])
def test_bad_keys_are_refused_with_a_clear_error(table, bad):
    with pytest.raises(LeaseError, match=f"request_id must be a str of {MIN_REQUEST_ID} to {MAX_REQUEST_ID}"):
        table.acquire("/w/a", "exclusive", "s1", "o1", 5, request_id=bad)
    assert table.live() == [] and table.next_token == 1


def test_neither_the_capability_nor_the_key_is_stored_in_the_clear(table):
    got = applied(table, table.acquire("/w/a", "exclusive", "s1", "o1", 5, request_id=KEY))
    stored = msgpack.packb(lease_record(table.leases[got.lease.lease_id]))
    assert got.capability not in stored and got.capability.hex().encode() not in stored
    assert KEY.encode() not in stored
    assert "capability_sealed" not in repr(got.lease)
    assert unseal_capability(got.lease, KEY) == got.capability
    with pytest.raises(LeaseError, match="does not match its digest"):
        unseal_capability(got.lease, OTHER)  # another key unseals garbage, and it is caught


def test_records_written_before_request_ids_still_decode():
    old = {"lease_id": "lease-0000000000000001", "root": "/w/a", "mode": "exclusive", "session_id": "s1",
           "owner": "o1", "fencing_token": 1, "acquired_ns": 5, "capability_sha256": "ab", "status": "reserved"}
    lease = lease_from_record(msgpack.unpackb(msgpack.packb(old), raw=False))
    assert lease.request_sha256 == "" and lease.capability_sealed == "" and lease.status == "reserved"
    table = LeaseTable(next_token=2, leases=[lease], random_bytes=fake_random())
    with pytest.raises(ReservationPending):  # an unkeyed lease is never matched by a key
        table.acquire("/w/a", "exclusive", "s1", "o1", 6, request_id=KEY)
    assert lease_from_record(lease_record(lease)) == lease
    with pytest.raises(ConflictingRecoveryState, match="undecodable lease record"):
        lease_from_record({**old, "colour": "blue"})
    with pytest.raises(ConflictingRecoveryState, match="undecodable lease record"):
        lease_from_record({k: v for k, v in old.items() if k != "root"})


def test_loading_two_live_leases_of_one_request_fails_closed():
    cap = bytes(32)
    a = Lease("lease-1", "/w/a", "exclusive", "s1", "o1", 1, 0, capability_digest(cap))
    keyed = [Lease(**{**lease_record(x), "request_sha256": request_digest("s1", KEY)})  # type: ignore[arg-type]
             for x in (a, Lease("lease-2", "/x", "exclusive", "s1", "o1", 2, 0, capability_digest(cap)))]
    with pytest.raises(ConflictingRecoveryState, match="same request"):
        LeaseTable(next_token=3, leases=keyed)


def test_sealing_round_trips_and_checks_its_length():
    lease = Lease("lease-1", "/w/a", "exclusive", "s1", "o1", 1, 0, capability_digest(b"\x07" * 32))
    sealed = Lease(**{**lease_record(lease), "capability_sealed": seal_capability(b"\x07" * 32, KEY, lease)})  # type: ignore[arg-type]
    assert unseal_capability(sealed, KEY) == b"\x07" * 32
    with pytest.raises(LeaseError, match="keeps no sealed capability"):
        unseal_capability(lease, KEY)
    with pytest.raises(LeaseError, match="a capability has 32 bytes"):
        seal_capability(b"short", KEY, lease)


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(st.tuples(st.sampled_from(["/w", "/w/a", "/w/a/b", "/x"]),
                                st.sampled_from(["exclusive", "shared_read"]), st.sampled_from(["s1", "s2"]),
                                st.sampled_from([KEY, OTHER, None]), st.booleans(), st.booleans()),
                      max_size=25))
def test_retrying_any_keyed_acquire_never_makes_a_second_lease(steps):
    """Every keyed acquire is retried (its first answer "lost"), sometimes after the owner died:
    the retry answers the request's grant, and no key ever holds two live leases."""
    table = LeaseTable(random_bytes=fake_random())
    for root, mode, session, key, owner_dies, release in steps:
        try:
            first = applied(table, table.acquire(root, mode, session, f"o-{session}", 1, request_id=key))
        except LeaseError:
            continue
        if owner_dies:
            applied(table, table.owner_died(f"o-{session}", "unknown"))
        if key is not None:
            retry = applied(table, table.acquire(root, mode, session, f"o-{session}", 2, request_id=key))
            assert retry.replayed and retry.lease.request_sha256 == request_digest(session, key)
            if owner_dies:
                assert retry.lease.fencing_token > first.lease.fencing_token
            else:
                assert (retry.lease, retry.capability) == (first.lease, first.capability)
            first = retry
        keyed = [x.request_sha256 for x in table.live() if x.request_sha256]
        assert len(keyed) == len(set(keyed))
        current = table.get(first.lease.lease_id)
        if release and current is not None and current.status == "active":
            applied(table, table.release(first.lease.lease_id, capability=first.capability))
