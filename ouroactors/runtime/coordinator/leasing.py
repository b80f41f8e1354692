"""The coordinator's hold on its runtime's workspace: acquire the lease for a new runtime, or reclaim a lost one's.

A mixin of :class:`.runtimes.RuntimeLink` (which starts, opens and closes runtimes). The runtime is the lease's
owner, so its death — not the coordinator's — turns the lease into a reservation; the lease and its capability are
kept durably beside the session record (:func:`.configs.put_lease`) so that a replacement can reclaim it
(:meth:`WorkspaceLeasing._reclaim`). Acquires are keyed per runtime generation by an HMAC under the data dir's
secret (:mod:`.request_keys`); reclaims by an HMAC under the lease's capability (:func:`reclaim_request_id`):
whoever holds a key is handed its lease, so neither may be guessable.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Generator, Mapping
from typing import TYPE_CHECKING, Any

from ...authorities.workspace.actor import Granted
from ...authorities.workspace.leases import LeaseConflict, NotLeaseOwner, NotReservationOwner, ReservationPending
from ...authorities.workspace.messages import Acquire, Reclaim, Release
from ...core import faults
from ...core.errors import ActorCrashed, CommitRejected, OuroactorsError
from . import request_keys
from .calls import Ask, Nap, TimedOut
from .commands import CoordinatorError
from .configs import get_lease
from .record import WorkspaceLease

if TYPE_CHECKING:
    from ...supervision.protocol import SystemContext
    from .store import SessionStore

RECLAIM_WAIT_S = 15.0  # the workspace reserves a dead owner's lease after owner_lost_after_s (2 s by default)
NAP_S = 0.5
ACQUIRE_TRIES = 3  # asks of one keyed Acquire the workspace refused as CommitRejected (it changed nothing)


class AuthorityCrashed(OuroactorsError):
    """The workspace crashed answering a lease (a commit of unknown outcome stops it): it is restarting, and so is
    every coordinator after it (rest_for_one). Not a :class:`CoordinatorError` (a refusal that suspends the session
    with "the turn did not start"): the coordinator stops, the session stays running with no runtime, and its
    recovery runs the turn — as when the workspace is killed there."""


def lease_refused(answer: object) -> OuroactorsError:
    """What a refused lease raises: :class:`AuthorityCrashed` for the authority's crash, else a refusal."""
    if isinstance(answer, ActorCrashed):
        return AuthorityCrashed(f"workspace lease: {answer}")
    return CoordinatorError(f"workspace lease refused: {answer}")
RECLAIMED = faults.register_point("coordinator.reclaimed", "the workspace granted a reclaim, its lease not yet kept")


def reclaim_request_id(lease: Mapping[str, Any]) -> str:
    """The idempotency key of every reclaim of ``lease`` (the lease kept beside the record: :func:`.configs.get_lease`).

    Derived, not drawn or numbered, so that a coordinator killed after the workspace committed its reclaim (the
    answer lost with it) is followed by one that sends the *same* key and finds the lease that reclaim made —
    the reservation it reclaimed is gone, so the old capability alone proves nothing any more. The kept lease is
    the durable fact every incarnation shares until a grant is kept in its place; a runtime generation is not: it
    moves on with every attempt, and a lease the workspace hands over to a key's holder stays keyed by that key, so
    a key named after a generation (as the acquire path's ``earlier`` is) is lost after a second interrupted attempt.
    An HMAC under the lease's capability, because the workspace replays a key's lease *with its capability* to
    whoever presents the key: the key must be as unguessable as a capability, and only whoever already holds this
    lease's capability — the session's coordinators — can compute it. The lease id makes it one key per lease.
    """
    capability = lease.get("capability")
    if not isinstance(capability, bytes) or not capability:
        raise CoordinatorError(f"lease {lease.get('lease_id')!r} keeps no capability to reclaim it with")
    message = b"ouroactors.coordinator.reclaim\0" + str(lease.get("lease_id")).encode()
    return "reclaim-" + hmac.new(capability, message, hashlib.sha256).hexdigest()


class WorkspaceLeasing:
    """See the module docstring."""

    if TYPE_CHECKING:  # what the coordinator provides
        session_id: str
        store: SessionStore
        attached: Any
        released_lease: str | None
        myAddress: Any
        context: SystemContext | None

        def _authority(self, name: str, payload: Any, timeout_s: float = 10.0) -> Ask: ...

    _acquire_key: bytes | None = None  # the data dir's acquire key, read once per incarnation (.request_keys)

    def _acquire_secret(self) -> bytes:
        """The data dir's acquire secret (:func:`.request_keys.load_or_create_key`), read once per incarnation."""
        if self._acquire_key is None:
            assert self.context is not None
            try:
                self._acquire_key = request_keys.load_or_create_key(self.context.data_dir)
            except (OuroactorsError, OSError) as exc:  # fail closed: no lease without an unguessable key
                raise CoordinatorError(f"the coordinator's acquire key cannot be used: {exc}") from exc
        return self._acquire_key

    def _acquire_request_id(self, generation: int) -> str:
        """The ``request_id`` of this session's workspace ``Acquire`` for its runtime of ``generation``
        (:func:`.request_keys.acquire_request_id`; the same in every incarnation on this data dir)."""
        try:
            return request_keys.acquire_request_id(self._acquire_secret(), self.session_id, generation)
        except ValueError as exc:  # e.g. a generation that is no int: no key, no lease
            raise CoordinatorError(f"no acquire key for runtime generation {generation!r}: {exc}") from exc

    def _lease_workspace(self, root: str, owner: Any, request_id: str, reclaim: dict[str, Any] | None,
                         earlier: str | None = None, owner_generation: int | None = None) -> Generator[Ask, Any, Any]:
        """Lease ``root`` for the runtime ``owner``: reclaim ``reclaim``'s reservation, or acquire anew.

        An earlier runtime's lease may still stand although nobody will use it again: its coordinator died after
        closing that runtime and before releasing the lease, or the runtime died where its coordinator was closing
        it (the release was then refused: the lease had become a reservation). The lease kept beside the record
        (:func:`.configs.get_lease`) is that lease, so it is released first with its capability — or, when it is a
        reservation by now, reclaimed: this coordinator is that session's recovering owner. A lease this
        incarnation released itself is skipped (one ask less per turn).

        A reservation with no lease kept beside the record is one whose grant never reached a coordinator (the
        workspace died after recording it, before answering): it is keyed by the request id of the runtime before
        this one (``earlier``), and an acquire with that key reclaims it (the workspace's idempotent acquisition).
        One that a reclaim made is keyed by the lease it reclaimed, still the one kept: :meth:`_reclaim` finds it.
        ``owner_generation`` (the runtime's) is named in every request: the workspace's heartbeats to the owner go
        addressed to it, so a worker that got the port of a runtime that died refuses them instead of answering.
        """
        other = earlier if earlier != request_id else None  # the earlier runtime's key, when it is another
        prior = get_lease(self.store, self.session_id) if reclaim is None else None
        if prior is not None and prior.get("capability") and prior.get("lease_id") != self.released_lease:
            freed = yield self._authority("workspace", Release(prior["lease_id"], prior["capability"]))
            if isinstance(freed, NotLeaseOwner):  # reserved for the session's recovering owner: this one
                reclaim = prior
        if reclaim is not None:
            return (yield from self._reclaim(reclaim, owner, other, owner_generation))
        granted = yield from self._acquire_committed(root, owner, request_id, owner_generation)
        if not isinstance(granted, ReservationPending):
            return granted
        if other is not None:
            granted = yield from self._acquire_committed(root, owner, other, owner_generation)
        if isinstance(granted, BaseException | TimedOut) and prior is not None and prior.get("capability"):
            # the workspace found the earlier runtime dead between the release and this acquire
            granted = yield from self._reclaim(prior, owner, other, owner_generation)
        return granted

    def _reclaim(self, lease: dict[str, Any], owner: Any, earlier: str | None = None,
                 owner_generation: int | None = None) -> Generator[Ask, Any, Any]:
        """Reclaim the reservation of ``lease`` (the lease kept beside the record) for ``owner``.

        The workspace reserves a dead owner's lease only once it stopped answering its pings, so a refusal is
        retried for :data:`RECLAIM_WAIT_S`. The reclaim is keyed by :func:`reclaim_request_id`, the same for every
        incarnation reclaiming this lease, so one that an earlier incarnation's reclaim committed (its answer lost
        with that coordinator) is found, not fought over:

        * while the runtime it was made for is still its owner, the Reclaim is answered from it (``replayed``):
          that grant is not this runtime's — its owner is the earlier incarnation's runtime, stopped by
          :meth:`.recovering.Recovering._replace` — so the reclaim waits, as for any owner not yet found gone;
        * once it is a reservation the old capability proves nothing (its reservation is gone):
          :class:`NotReservationOwner`. An ``Acquire`` with the key then reclaims it for ``owner`` (the
          workspace's idempotent acquisition hands a key's reserved lease to whoever holds the key, with a new
          token, and keeps it keyed by it — so a chain of incarnations killed here is still one key).

        The reservation may be of a lease the kept one never was: the grant of the runtime before this one (its
        acquire key ``earlier``), recorded by a workspace that died before answering, so no coordinator kept it,
        and reserved by the workspace's restart. The kept lease's capability proves nothing of it, and neither does
        this lease's key; ``earlier`` does, so an ``Acquire`` with it is asked too. It reclaims that reservation for
        ``owner`` (a new token), and only a grant whose owner is ``owner`` is taken: an active lease the key made is
        still the earlier runtime's.
        """
        key = reclaim_request_id(lease)
        root, mode = lease["root"], lease["mode"]
        theirs: set[str] = set()  # leases the key made for an earlier incarnation's runtime
        answer: Any = None
        for _ in range(int(RECLAIM_WAIT_S / NAP_S)):
            answer = yield self._authority("workspace", Reclaim(self.session_id, root, mode, lease["capability"],
                                                                owner=owner, request_id=key,
                                                                owner_generation=owner_generation))
            if isinstance(answer, Granted) and answer.replayed:  # the key's lease, still its earlier runtime's
                theirs.add(answer.lease.lease_id)
            elif isinstance(answer, NotReservationOwner) and mode == "exclusive":
                # (exclusive only: an Acquire of a shared_read root could be granted beside the reservation)
                taken = yield self._acquire(root, mode, owner, key, owner_generation)
                if isinstance(taken, Granted) and taken.lease.lease_id not in theirs:
                    answer = taken
                elif earlier is not None and (found := (yield from self._earlier_grant(root, mode, owner, earlier,
                                                                                      owner_generation))) is not None:
                    answer = found
                elif not isinstance(taken, Granted | LeaseConflict | ReservationPending):
                    return taken  # the key's lease released, or no answer: waiting changes nothing
            if isinstance(answer, Granted) and answer.lease.lease_id not in theirs:
                faults.point(RECLAIMED)
                return answer
            if not isinstance(answer, Granted | NotReservationOwner):
                return answer
            yield Ask(self.myAddress, Nap(), NAP_S)  # answered by nobody: resumes after NAP_S
        if isinstance(answer, Granted):
            return NotReservationOwner(f"session {self.session_id!r}: the reservation of lease "
                                       f"{lease['lease_id']} was reclaimed for an earlier runtime, which still "
                                       "holds it")
        return answer

    def _earlier_grant(self, root: str, mode: str, owner: Any, earlier: str,
                       owner_generation: int | None) -> Generator[Ask, Any, Granted | None]:
        """The reservation the earlier runtime's acquire key made, reclaimed for ``owner``; None when that key has
        no reserved lease here (none, released, or still its runtime's active lease)."""
        taken = yield self._acquire(root, mode, owner, earlier, owner_generation)
        if isinstance(taken, Granted) and taken.lease.owner == str(owner):
            return taken
        return None

    def _acquire_committed(self, root: str, owner: Any, request_id: str, owner_generation: int | None
                           ) -> Generator[Ask, Any, Any]:
        """An exclusive ``Acquire``, asked again while the workspace answers ``CommitRejected`` (its commit changed
        nothing, and the acquire is keyed by ``request_id``): at most :data:`ACQUIRE_TRIES` asks. A turn did not
        start for one refused commit before (the session suspended, ``resume`` to run it)."""
        granted = None
        for _ in range(ACQUIRE_TRIES):
            granted = yield self._acquire(root, "exclusive", owner, request_id, owner_generation)
            if not isinstance(granted, CommitRejected):
                break
        return granted

    def _acquire(self, root: str, mode: str, owner: Any, request_id: str, owner_generation: int | None) -> Ask:
        return self._authority("workspace", Acquire(root, mode, self.session_id, owner=owner, request_id=request_id,
                                                    owner_generation=owner_generation))

    def _workspace(self) -> WorkspaceLease | None:
        attached = self.attached
        if attached is None or attached.lease_id is None:
            return None
        lease = get_lease(self.store, self.session_id) or {}
        return WorkspaceLease(lease_id=attached.lease_id, root=str(lease.get("root")), fencing_token=attached.token)

    def _released(self, lease_id: str, answer: Any) -> None:
        """Remember a lease this incarnation saw released (the next runtime need not release it again)."""
        if getattr(answer, "status", None) == "released":
            self.released_lease = lease_id


__all__ = ["NAP_S", "RECLAIM_WAIT_S", "WorkspaceLeasing", "reclaim_request_id"]
