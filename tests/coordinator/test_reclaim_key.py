"""The coordinator's reclaim of a lost runtime's reservation, keyed by the lease it reclaims (no actor system).

:func:`~ouroactors.runtime.coordinator.runtimes.reclaim_request_id` is pure. :meth:`RuntimeLink._reclaim` is a
job (a generator of asks); here it is driven against the workspace authority's own handlers over an in-memory
lease table (its commit is the table's apply), and its naps are where the test lets the workspace find an owner
gone. The case it exists for: an earlier coordinator's reclaim was committed and its answer lost with it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest

from ouroactors.authorities.workspace.actor import Granted, Workspace
from ouroactors.authorities.workspace.leases import (
    MAX_REQUEST_ID,
    MIN_REQUEST_ID,
    LeaseConflict,
    LeaseTable,
    NotReservationOwner,
)
from ouroactors.authorities.workspace.messages import Acquire, Reclaim
from ouroactors.runtime.coordinator.calls import Ask, Nap, TimedOut
from ouroactors.runtime.coordinator.commands import CoordinatorError
from ouroactors.runtime.coordinator.runtimes import NAP_S, RECLAIM_WAIT_S, RuntimeLink, reclaim_request_id

CAP_A, CAP_B = bytes(range(32)), bytes(range(1, 33))


# -- the key ---------------------------------------------------------------------------------------------------------

def test_the_key_is_the_same_for_the_same_kept_lease_and_differs_per_lease_and_per_capability():
    lease = {"lease_id": "lease-0000000000000001", "root": "/w", "mode": "exclusive", "capability": CAP_A}
    key = reclaim_request_id(lease)
    assert key == reclaim_request_id(dict(lease, fencing_token=9))  # only the lease's identity and proof count
    assert key != reclaim_request_id(dict(lease, lease_id="lease-0000000000000002"))
    assert key != reclaim_request_id(dict(lease, capability=CAP_B))
    assert MIN_REQUEST_ID <= len(key) <= min(MAX_REQUEST_ID, 200)  # the workspace's bounds, and Name's
    assert CAP_A.hex() not in key and "lease-0000000000000001" not in key  # it names neither


def test_a_lease_kept_without_its_capability_has_no_key():
    with pytest.raises(CoordinatorError, match="no capability"):
        reclaim_request_id({"lease_id": "lease-1", "root": "/w", "mode": "exclusive", "capability": None})


# -- the job against the workspace's handlers -------------------------------------------------------------------------

class Ws:
    """The workspace authority's handlers over an in-memory table; a refusal is answered, as the worker shell does."""

    def __init__(self, root: str) -> None:
        self.actor = actor = Workspace.__new__(Workspace)
        actor.allowed_roots, actor.owners, actor.table = (root,), {}, LeaseTable()
        actor.quarantined, actor.worktrees = [], {}  # no corrupt record, no worktree (see Workspace.on_start)
        actor._commit = actor.table.apply  # type: ignore[method-assign]  # durable at once

    def ask(self, message: Any) -> Any:
        handler = {Acquire: self.actor.handle_Acquire, Reclaim: self.actor.handle_Reclaim}[type(message)]
        try:
            return handler(message, "coordinator")
        except Workspace.refusals as exc:
            return exc

    def owner_died(self, owner: str) -> None:  # what its heartbeat does once an owner stops answering
        self.actor.table.apply(self.actor.table.owner_died(owner, "unknown"))

    def live(self) -> list[Any]:
        return self.actor.table.live()


class Link(RuntimeLink):
    session_id = "s1"
    myAddress = "coordinator"

    def _authority(self, name: str, payload: Any, timeout_s: float = 10.0) -> Ask:
        return Ask(name, payload, timeout_s)


def run(job: Generator[Ask, Any, Any], ws: Ws, at_nap: Callable[[int], None] = lambda n: None) -> tuple[Any, int]:
    """Answer the job's asks from ``ws`` until it returns; its naps time out (``at_nap(n)`` runs at the nth)."""
    answer, naps = None, 0
    try:
        while True:
            ask = job.send(answer)
            if isinstance(ask.message, Nap):
                naps += 1
                at_nap(naps)
                answer = TimedOut(ask.message)
            else:
                answer = ws.ask(ask.message)
    except StopIteration as done:
        return done.value, naps


@pytest.fixture
def lost(tmp_path: Path) -> tuple[Ws, dict[str, Any]]:
    """A workspace whose runtime-0 held the session's lease and was found gone: a reservation, its lease kept."""
    ws = Ws(str(tmp_path))
    granted = ws.ask(Acquire(str(tmp_path), "exclusive", "s1", owner="runtime-0", request_id="s1.g1-first-runtime"))
    assert isinstance(granted, Granted)
    ws.owner_died("runtime-0")
    kept = {"lease_id": granted.lease.lease_id, "root": granted.lease.root, "mode": "exclusive",
            "capability": granted.capability, "fencing_token": granted.lease.fencing_token}
    return ws, kept


def test_a_reclaim_whose_answer_was_lost_is_taken_over_by_the_next_coordinator_once_its_runtime_is_found_gone(lost):
    ws, kept = lost
    first, _ = run(Link()._reclaim(kept, "runtime-1"), ws)  # committed; its coordinator died before keeping it
    assert isinstance(first, Granted) and not first.replayed and first.lease.owner == "runtime-1"
    # The next coordinator still keeps the old lease, whose reservation is gone. The workspace answers its reclaim
    # from the committed one while runtime-1 (stopped by that coordinator's replace) is its owner: not taken for
    # runtime-2; then, once runtime-1 is found gone, the key takes the reservation over for runtime-2.
    second, naps = run(Link()._reclaim(kept, "runtime-2"), ws,
                       at_nap=lambda n: ws.owner_died("runtime-1") if n == 3 else None)
    assert isinstance(second, Granted), second
    assert second.lease.owner == "runtime-2" and second.lease.fencing_token > first.lease.fencing_token
    assert naps == 3  # it waited for runtime-1 to be found gone, and not a nap longer
    assert [(x.lease_id, x.status) for x in ws.live()] == [(second.lease.lease_id, "active")]


def test_every_next_coordinator_killed_there_finds_the_same_key(lost):
    ws, kept = lost
    owners = [f"runtime-{n}" for n in range(1, 5)]
    tokens = []
    for owner in owners:  # each coordinator's grant lost with it; its runtime found gone before the next one asks
        granted, naps = run(Link()._reclaim(kept, owner), ws)
        assert isinstance(granted, Granted) and granted.lease.owner == owner and naps == 0, granted
        tokens.append(granted.lease.fencing_token)
        ws.owner_died(owner)
    assert tokens == sorted(set(tokens))  # every take-over fences out the runtime before it
    assert [x.status for x in ws.live()] == ["reserved"]  # one lease, reserved for the next


def test_a_reclaim_while_the_old_owner_still_holds_its_lease_waits_and_takes_nothing_else(tmp_path):
    ws = Ws(str(tmp_path))
    granted = ws.ask(Acquire(str(tmp_path), "exclusive", "s1", owner="runtime-0", request_id="s1.g1-first-runtime"))
    kept = {"lease_id": granted.lease.lease_id, "root": granted.lease.root, "mode": "exclusive",
            "capability": granted.capability}
    seen: list[Any] = []
    reclaimed, naps = run(Link()._reclaim(kept, "runtime-1"), ws,
                          at_nap=lambda n: (seen.append(ws.live()), ws.owner_died("runtime-0") if n == 2 else None))
    assert isinstance(reclaimed, Granted) and not reclaimed.replayed and reclaimed.lease.owner == "runtime-1"
    assert naps == 2 and all(len(live) == 1 for live in seen)  # the key's acquire conflicted: nothing granted
    assert isinstance(ws.ask(Acquire(str(tmp_path), "exclusive", "s1", owner="x",
                                     request_id="s1.someone-else-entirely")), LeaseConflict)


def test_a_grant_still_held_by_an_earlier_runtime_is_never_returned_as_this_ones(lost):
    ws, kept = lost
    run(Link()._reclaim(kept, "runtime-1"), ws)  # runtime-1 answers its pings: never found gone
    answer, naps = run(Link()._reclaim(kept, "runtime-2"), ws)
    assert isinstance(answer, NotReservationOwner) and "earlier runtime" in str(answer)
    assert naps == int(RECLAIM_WAIT_S / NAP_S)
    assert [x.owner for x in ws.live()] == ["runtime-1"]
