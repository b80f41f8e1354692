"""Reservations of the lease table: what happens to leases when an owner dies, and how they are recovered.

Mixed into :class:`~.leases.LeaseTable`; every operation here is a query returning a :class:`~.lease_records.Decision`
(applied by :meth:`~.leases.LeaseTable.apply`, like the others), or raises with nothing changed.

* **owner_died**: active leases become reservations when the session is not terminal *or unknown*
  (fail closed), and are released when it is terminal.
* **session_ended**: the durable session is terminal, so nobody will reclaim its reservations: they
  are released.
* **reclaim**: only with proof of the same session (``proof_session_id`` from an authenticated
  registry) and the same root and mode; the result is a new lease (new id, capability, larger token).
* **rebuild** (boot): reservations for non-terminal durable sessions, all or nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, cast

from .lease_checks import _check_name, _check_request_id, _check_root, _one_of
from .lease_records import (
    MODES,
    NO_OWNER,
    SESSION_STATES,
    Acquired,
    ConflictingRecoveryState,
    Lease,
    LeaseError,
    Mode,
    NoReservation,
    NotReservationOwner,
    Reclaimed,
    ReservationMismatch,
    SessionState,
    Transitioned,
    conflicts,
)


class LeaseRecovery:
    """The reservation operations; the table they read belongs to :class:`~.leases.LeaseTable`."""

    next_token: int
    version: int
    leases: dict[str, Lease]

    if TYPE_CHECKING:  # what the table provides

        def _new_active(self, root: str, mode: Mode, session_id: str, owner: str, now_ns: int,
                        changes: tuple[Lease, ...], request_id: str | None = None) -> Acquired: ...

    def owner_died(self, owner: str,
                   session_state: SessionState | str | Mapping[str, SessionState | str]) -> Transitioned:
        """The owner's active leases → reserved (session not terminal, or unknown) or released (terminal).

        ``session_state`` is one state for all of the owner's sessions, or a mapping per session id (a
        session missing from the mapping counts as ``unknown``). Idempotent: a second call changes nothing.
        """
        states = dict(session_state) if isinstance(session_state, Mapping) else None
        for given in states.values() if states is not None else [session_state]:
            _one_of(given, SESSION_STATES, "session state")
        reserved: list[Lease] = []
        released: list[Lease] = []
        for lease in self.leases.values():
            if lease.owner != owner or lease.status != "active":
                continue
            state = states.get(lease.session_id, "unknown") if states is not None else session_state
            if state == "terminal":
                released.append(replace(lease, status="released"))
            else:
                reserved.append(replace(lease, status="reserved"))
        return Transitioned(changes=(*reserved, *released), next_token=self.next_token,
                            base_version=self.version, reserved=tuple(reserved), released=tuple(released))

    def session_ended(self, session_id: str) -> Transitioned:
        """The durable session is terminal: nobody will reclaim its reservations, so release them."""
        released = tuple(replace(x, status="released") for x in self.leases.values()
                         if x.session_id == session_id and x.status == "reserved")
        return Transitioned(changes=released, next_token=self.next_token, base_version=self.version,
                            released=released)

    def reclaim(self, session_id: str, root: str, mode: str, owner: str, proof_session_id: str,
                now_ns: int | None = None, *, request_id: str | None = None) -> Reclaimed:
        """Turn ``session_id``'s reservation of ``root``/``mode`` into an active lease for ``owner``.

        ``proof_session_id`` is the session the caller is registered for (from an authenticated
        registry); it must equal ``session_id``. With ``request_id`` the new lease is keyed by it
        (see :meth:`~.leases.LeaseTable.acquire`), so a retry whose answer was lost is answered by
        :meth:`~.leases.LeaseTable.replay`.
        """
        _check_root(root)
        checked = cast(Mode, _one_of(mode, MODES, "lease mode"))
        _check_name("owner", owner)
        if request_id is not None:
            _check_request_id(request_id)
        if proof_session_id != session_id:
            raise NotReservationOwner(
                f"caller {owner!r} proved session {proof_session_id!r}, not {session_id!r}: "
                f"only the recovering owner of {session_id!r} may reclaim its reservation")
        mine = [x for x in self.leases.values() if x.status == "reserved" and x.session_id == session_id]
        if not mine:
            raise NoReservation(f"session {session_id!r} holds no reservation (to reclaim {checked} on {root!r})")
        match = next((x for x in mine if x.root == root and x.mode == checked), None)
        if match is None:
            held = ", ".join(f"{x.mode} on {x.root!r}" for x in mine)
            raise ReservationMismatch(f"session {session_id!r} reserved {held}, not {checked} on {root!r}")
        gone = replace(match, status="released")
        when = match.acquired_ns if now_ns is None else now_ns
        new = self._new_active(root, checked, session_id, owner, when, changes=(gone,), request_id=request_id)
        return Reclaimed(changes=new.changes, next_token=new.next_token, base_version=new.base_version,
                         lease=new.lease, capability=new.capability, reservation=gone)

    def rebuild(self, durable_sessions: Iterable[tuple[str, str, str, str]], now_ns: int = 0) -> Transitioned:
        """At boot: a reservation per non-terminal durable (session, root, mode). All or nothing: a
        duplicate, invalid or overlapping record refuses it all (:class:`ConflictingRecoveryState`)."""
        token = self.next_token
        made: list[Lease] = []
        keys: set[tuple[str, str, str]] = set()
        for record in durable_sessions:
            try:
                session_id, root, mode, state = record
                _check_name("session_id", session_id)
                _check_root(root)
                checked = cast(Mode, _one_of(mode, MODES, "lease mode"))
                state = _one_of(state, SESSION_STATES, "session state")
            except (LeaseError, ValueError, TypeError) as exc:
                raise ConflictingRecoveryState(f"invalid recovery record {record!r}: {exc}") from None
            if (session_id, root, checked) in keys:
                raise ConflictingRecoveryState(f"duplicate recovery record for session {session_id!r} on {root!r}")
            keys.add((session_id, root, checked))
            if state == "terminal" or any(x.session_id == session_id and x.root == root and x.mode == checked
                                          for x in self.leases.values()):
                continue  # nothing to recover, or already held (loaded from persisted leases): idempotent
            for other in [*self.leases.values(), *made]:
                if conflicts(other, root, checked):
                    raise ConflictingRecoveryState(
                        f"recovery state of session {session_id!r} ({checked} on {root!r}) overlaps "
                        f"session {other.session_id!r} ({other.mode} on {other.root!r})")
            made.append(Lease(lease_id=f"recovery-{token:016x}", root=root, mode=checked, session_id=session_id,
                              owner=NO_OWNER, fencing_token=token, acquired_ns=now_ns, capability_sha256="",
                              status="reserved"))
            token += 1
        return Transitioned(changes=tuple(made), next_token=token, base_version=self.version, reserved=tuple(made))
