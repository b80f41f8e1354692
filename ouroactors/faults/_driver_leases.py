"""The synthetic driver's lease steps: hold a workspace root for a session, and keep it.

Each session leases its root once (``exclusive``), with an idempotency key
(:meth:`~LeaseSteps.request_id`): a retry whose first answer was lost gets the grant its request
made, not a conflict with its own lease. Before every effect the lease's fencing token is checked
(:meth:`~LeaseSteps._fence`); a lease reserved meanwhile (its owner or the workspace restarted) is
reclaimed with its capability. Waiting for a conflicting lease ends when it is released, or as
soon as it is clear that it never will be (:meth:`~LeaseSteps._futile`). Every grant and release
snapshots the lease table into the record, for the overlapping-leases check.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Generator
from typing import Any

from ..authorities.workspace.actor import Acquire, CheckFence, Granted, Reclaim, Release
from ..authorities.workspace.leases import (
    Lease,
    LeaseConflict,
    LeaseError,
    NoReservation,
    NotReservationOwner,
    StaleFence,
)
from ..core import clock
from ..core.errors import OuroactorsError
from ._asking import isolated
from ._driver_base import _WAIT, DriverBase, _describe
from .workload_record import LeaseRecord


class LeaseSteps(DriverBase):
    """The lease steps of :class:`~.workload.Driver` (its base class)."""

    def _owner_address(self, index: int) -> Generator[str, None, tuple[Any, int | None]]:
        """The lease owner's address and, for a worker, its generation (the workspace's heartbeats are addressed to
        it, as a coordinator's runtime's are); (None, None) when there is no owner to name."""
        path = self.targets.owner_of(index)
        if path is None:
            return None, None
        deadline = clock.monotonic() + self.config.op_deadline
        while True:
            try:
                with isolated(self.system) as system:
                    info = system.child_info(path)
                    if info.status != "running" or info.address is None:
                        raise OuroactorsError(f"{path} is {info.status}")
                    generation = info.generation if info.type == "worker" and type(info.generation) is int else None
                    return info.address, generation
            except OuroactorsError:
                if clock.monotonic() > deadline:
                    return None, None
                yield _WAIT

    def _snapshot(self) -> Generator[str, None, None]:
        assert self.targets.workspace is not None
        result = yield from self._ask(self.targets.workspace, "leases")
        if result.ok and isinstance(result.value, list):
            self.record.lease_snapshots.append(list(result.value))

    def request_id(self, sid: str, attempt: int) -> str:
        """The idempotency key of lease ``attempt`` of session ``sid`` (which includes the run id):
        the same on every retry of that acquisition and of its reclaims, so a retry whose answer was
        lost gets the grant its request made instead of conflicting with its own lease; an HMAC under
        this driver's secret, so nobody else can guess it (it unlocks the lease's capability)."""
        return hmac.new(self._key_secret, f"{sid}/lease{attempt}".encode(), hashlib.sha256).hexdigest()[:32]

    def _granted(self, lease: LeaseRecord, granted: Granted, holder: dict[str, Any]) -> None:
        holder["lease_id"] = granted.lease.lease_id
        holder["token"] = granted.lease.fencing_token
        holder["capability"] = granted.capability
        lease.grants.append((granted.lease.lease_id, granted.lease.fencing_token, time.time_ns()))
        if granted.replayed:
            lease.replays += 1

    def _acquire(self, lease: LeaseRecord, index: int, holder: dict[str, Any]) -> Generator[str, None, bool]:
        assert self.targets.workspace is not None
        deadline = clock.monotonic() + self.config.lease_wait
        while True:
            owner, generation = yield from self._owner_address(index)
            result = yield from self._ask(self.targets.workspace,
                                          Acquire(lease.root, lease.mode, lease.session_id, owner=owner,
                                                  request_id=holder["request_id"], owner_generation=generation))
            if result.ok and isinstance(result.value, Granted):
                self._granted(lease, result.value, holder)
                lease.outcome = "held"
                yield from self._snapshot()
                return True
            if isinstance(result.error, LeaseConflict) and clock.monotonic() < deadline:
                futile = self._futile(lease, result.error.holders)
                if futile is None:
                    yield _WAIT  # another session holds an overlapping root: wait for its release
                    continue
                lease.outcome = f"not granted: {futile}"
                return False
            lease.outcome = f"not granted: {_describe(result.error or result.value)}"
            return False

    def _futile(self, lease: LeaseRecord, holders: list[Lease]) -> str | None:
        """Why waiting for ``holders`` cannot end (None: it can)."""
        if any(h.session_id == lease.session_id for h in holders):
            return "this session's own lease blocks it (an acquire whose answer was lost)"
        if holders and all(h.status == "reserved" and h.session_id in self._finished for h in holders):
            return "blocked by reservations of sessions that have ended here (nobody will reclaim them)"
        return None

    def _fence(self, lease: LeaseRecord, index: int, holder: dict[str, Any]) -> Generator[str, None, bool]:
        """Check the lease still admits our writes; reclaim it (with its capability) if it was reserved."""
        assert self.targets.workspace is not None
        result = yield from self._ask(self.targets.workspace, CheckFence(lease.root, holder["token"]))
        if result.ok and isinstance(result.value, Lease):
            return True
        if not isinstance(result.error, StaleFence):
            lease.outcome = f"fence check failed: {_describe(result.error or result.value)}"
            return False
        owner, generation = yield from self._owner_address(index)
        result = yield from self._ask(self.targets.workspace, Reclaim(lease.session_id, lease.root, lease.mode,
                                                                      holder["capability"], owner=owner,
                                                                      request_id=holder["request_id"],
                                                                      owner_generation=generation))
        if isinstance(result.error, NotReservationOwner | NoReservation):
            # The capability we hold is not the reservation's: an earlier grant for our request (a
            # reclaim, or a retried acquire) was committed but its answer lost. The request's key
            # proves the same session: the acquire with it reclaims the reservation for us.
            result = yield from self._ask(self.targets.workspace,
                                          Acquire(lease.root, lease.mode, lease.session_id, owner=owner,
                                                  request_id=holder["request_id"], owner_generation=generation))
        if result.ok and isinstance(result.value, Granted):
            self._granted(lease, result.value, holder)
            lease.reclaims += 1
            yield from self._snapshot()
            return True
        lease.outcome = f"reclaim failed: {_describe(result.error or result.value)}"
        holder.clear()
        return False

    def _release(self, lease: LeaseRecord, index: int, holder: dict[str, Any]) -> Generator[str, None, None]:
        assert self.targets.workspace is not None
        for _attempt in range(3):
            result = yield from self._ask(self.targets.workspace,
                                          Release(holder["lease_id"], capability=holder["capability"]))
            if result.ok and isinstance(result.value, Lease):
                lease.released = True
                lease.outcome = "released"
                yield from self._snapshot()
                return
            if not isinstance(result.error, LeaseError):
                break
            # Reserved meanwhile (the owner or the workspace restarted): reclaim it, then release.
            if not (yield from self._fence(lease, index, holder)):
                return
        lease.outcome = f"not released: {_describe(result.error or result.value)}"

