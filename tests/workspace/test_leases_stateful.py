"""Invariant 5 under random operation sequences (hypothesis stateful testing).

No two live (active or reserved) leases overlap unless both are shared_read; a reservation only
disappears by its own session's reclaim (with proof) or by the session ending; fencing tokens only
grow; a refused operation changes nothing.
"""

from __future__ import annotations

import copy
import itertools

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from ouroactors.authorities.workspace.leases import (
    IdempotencyConflict,
    LeaseError,
    LeaseTable,
    Reclaimed,
    RequestCompleted,
    StaleDecision,
    StaleFence,
    conflicts,
    invariant_violations,
    request_digest,
)

ROOTS = ["/w", "/w/a", "/w/a/b", "/w/ab", "/x"]
PATHS = [*ROOTS, "/w/a/b/f", "/w/ab/f", "/y"]
MODES = ["exclusive", "shared_read"]
SESSIONS = ["s1", "s2", "s3"]
OWNERS = ["o1", "o2", "o3", "o4"]
STATES = ["terminal", "active", "unknown"]
KEYS = ["request-key-0000000001", "request-key-0000000002"]  # idempotency keys (>= 16 characters)


def state_of(table: LeaseTable) -> tuple:
    return (dict(table.leases), dict(table.tombstones), table.next_token, table.version)


class LeaseMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        counter = itertools.count(1)
        self.table = LeaseTable(random_bytes=lambda n: next(counter).to_bytes(n, "big"), max_tombstones=20)
        self.capabilities: dict[str, bytes] = {}
        self.highest_token = 0
        self.last_next_token = self.table.next_token

    # -- helpers --

    def reserved_ids(self) -> set[str]:
        return {x.lease_id for x in self.table.leases.values() if x.status == "reserved"}

    def attempt(self, decide):
        """Decide; on refusal assert nothing changed; otherwise apply and return the decision."""
        before = copy.deepcopy(state_of(self.table))
        try:
            decision = decide()
        except LeaseError:
            assert state_of(self.table) == before
            return None
        assert state_of(self.table) == before  # deciding is pure
        self.table.apply(decision)
        for lease in decision.changes:
            if lease.status == "active" and lease.lease_id not in self.capabilities:
                assert lease.fencing_token > self.highest_token  # tokens only grow
                self.highest_token = lease.fencing_token
        return decision

    # -- rules --

    @rule(root=st.sampled_from(ROOTS), mode=st.sampled_from(MODES), session=st.sampled_from(SESSIONS),
          owner=st.sampled_from(OWNERS))
    def acquire(self, root, mode, session, owner):
        reserved = self.reserved_ids()
        clashing = [x for x in self.table.live() if conflicts(x, root, mode)]
        decision = self.attempt(lambda: self.table.acquire(root, mode, session, owner, 0))
        assert (decision is None) == bool(clashing)
        if decision is not None:
            self.capabilities[decision.lease.lease_id] = decision.capability
        assert reserved <= self.reserved_ids()

    @rule(root=st.sampled_from(ROOTS), mode=st.sampled_from(MODES), session=st.sampled_from(SESSIONS),
          owner=st.sampled_from(OWNERS), key=st.sampled_from(KEYS))
    def acquire_with_request_id(self, root, mode, session, owner, key):
        """A retried (or new) keyed acquire: the same grant, a reclaim, a refusal — never a second lease."""
        digest = request_digest(session, key)
        earlier = next((x for x in self.table.live() if x.request_sha256 == digest), None)
        buried = any(x.request_sha256 == digest for x in self.table.tombstones.values())
        clashing = [x for x in self.table.live() if conflicts(x, root, mode)]
        reserved = self.reserved_ids()
        try:
            self.table.acquire(root, mode, session, owner, 0, request_id=key)
        except IdempotencyConflict:
            assert earlier is not None or buried
        except RequestCompleted:
            assert earlier is None and buried
        except LeaseError:
            assert earlier is None and clashing
        decision = self.attempt(lambda: self.table.acquire(root, mode, session, owner, 0, request_id=key))
        if decision is None:
            return
        if earlier is not None:
            assert (earlier.root, earlier.mode) == (root, mode) and decision.replayed
            if earlier.status == "active":  # the very same grant, nothing changed
                assert decision.changes == () and decision.lease == earlier
                assert decision.capability == self.capabilities[earlier.lease_id]
            else:  # reserved: reclaimed for the key holder, with a larger token
                assert isinstance(decision, Reclaimed) and decision.reservation.lease_id == earlier.lease_id
                assert decision.lease.fencing_token > earlier.fencing_token
                assert reserved - self.reserved_ids() == {earlier.lease_id}
        else:
            assert not decision.replayed and not clashing and not buried
            assert reserved <= self.reserved_ids()
        assert decision.lease.request_sha256 == digest
        self.capabilities[decision.lease.lease_id] = decision.capability
        again = self.table.acquire(root, mode, session, "someone-else", 1, request_id=key)  # its answer lost
        assert again.replayed and again.changes == () and again.lease == decision.lease
        assert again.capability == decision.capability

    @rule(data=st.data(), by_capability=st.booleans(), owner=st.sampled_from(OWNERS), right=st.booleans())
    def release(self, data, by_capability, owner, right):
        known = sorted(self.capabilities)
        if not known:
            return
        lease_id = data.draw(st.sampled_from(known))
        reserved = self.reserved_ids()
        lease = self.table.get(lease_id)
        if by_capability:
            cap = self.capabilities[lease_id] if right else b"\xff" * 32
            decision = self.attempt(lambda: self.table.release(lease_id, capability=cap))
            ok_expected = right
        else:
            decision = self.attempt(lambda: self.table.release(lease_id, owner=owner))
            ok_expected = lease is not None and lease.owner == owner
        if lease is None or lease.status == "reserved":
            ok_expected = False
        assert (decision is not None) == ok_expected
        assert reserved <= self.reserved_ids()

    @rule(owner=st.sampled_from(OWNERS), state=st.sampled_from(STATES))
    def owner_died(self, owner, state):
        reserved = self.reserved_ids()
        self.attempt(lambda: self.table.owner_died(owner, state))
        assert not any(x.owner == owner and x.status == "active" for x in self.table.live())
        assert reserved <= self.reserved_ids()

    @rule(session=st.sampled_from(SESSIONS), proof=st.sampled_from(SESSIONS), root=st.sampled_from(ROOTS),
          mode=st.sampled_from(MODES), owner=st.sampled_from(OWNERS))
    def reclaim(self, session, proof, root, mode, owner):
        reserved = self.reserved_ids()
        decision = self.attempt(lambda: self.table.reclaim(session, root, mode, owner, proof_session_id=proof))
        gone = reserved - self.reserved_ids()
        if decision is None:
            assert not gone
        else:
            assert proof == session  # Invariant 5, second half: only the owner's own session reclaims
            assert gone == {decision.reservation.lease_id}
            assert decision.reservation.session_id == session
            assert decision.lease.fencing_token > decision.reservation.fencing_token
            self.capabilities[decision.lease.lease_id] = decision.capability

    @rule(session=st.sampled_from(SESSIONS))
    def session_ended(self, session):
        reserved = self.reserved_ids()
        self.attempt(lambda: self.table.session_ended(session))
        gone = reserved - self.reserved_ids()
        for lease_id in gone:
            lease = self.table.get(lease_id)
            assert lease is not None and lease.session_id == session

    @rule(path=st.sampled_from(PATHS), data=st.data(), write=st.booleans())
    def check_fence(self, path, data, write):
        tokens = [x.fencing_token for x in self.table.live()] + [0, self.table.next_token]
        token = data.draw(st.sampled_from(tokens))
        try:
            lease = self.table.check_fence(path, token, write=write)
        except StaleFence:
            return
        assert lease.status == "active" and lease.fencing_token == token
        assert path == lease.root or path.startswith(lease.root + "/")
        assert not write or lease.mode == "exclusive"

    @rule(a=st.sampled_from(ROOTS), b=st.sampled_from(ROOTS))
    def racing_decisions(self, a, b):
        try:
            first = self.table.acquire(a, "exclusive", "s1", "o1", 0)
            second = self.table.acquire(b, "exclusive", "s2", "o2", 0)
        except LeaseError:
            return
        self.table.apply(first)
        self.capabilities[first.lease.lease_id] = first.capability
        self.highest_token = max(self.highest_token, first.lease.fencing_token)
        try:
            self.table.apply(second)
        except StaleDecision:
            return
        raise AssertionError("a decision made on an old version was applied")

    # -- invariants --

    @invariant()
    def no_conflicting_live_leases(self):
        assert invariant_violations(self.table.leases.values()) == []

    @invariant()
    def tokens_only_grow_and_are_unique(self):
        live_tokens = [x.fencing_token for x in self.table.live()]
        assert len(live_tokens) == len(set(live_tokens))
        assert all(t < self.table.next_token for t in live_tokens)
        assert self.table.next_token >= self.last_next_token
        self.last_next_token = self.table.next_token

    @invariant()
    def one_live_lease_per_request(self):
        keyed = [x.request_sha256 for x in self.table.live() if x.request_sha256]
        assert len(keyed) == len(set(keyed))

    @invariant()
    def live_and_tombstones_are_disjoint(self):
        assert not set(self.table.leases) & set(self.table.tombstones)
        assert all(x.live for x in self.table.leases.values())
        assert all(x.status == "released" for x in self.table.tombstones.values())
        assert len(self.table.tombstones) <= 20


LeaseMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=40, deadline=None,
                                          suppress_health_check=[HealthCheck.too_slow])
TestLeaseInvariant = LeaseMachine.TestCase

pytestmark = pytest.mark.slow  # 300 sequences of 40 steps: ~5 s of CPU on its own
