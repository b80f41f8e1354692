"""The workspace authority: node-local admission to canonical roots (a leaf LMDB writer).

Every decision of the pure :class:`~.leases.LeaseTable` is committed through the storage commit
contract (fenced on the storage generation) *before* it is applied and answered, so the durable
table and the answers can never disagree.

* **Owners are watched.** The actor that acquired a lease (or the one named as its owner) is
  pinged; when it stops answering, its active leases become **reservations** — its session is
  not known to be terminal here, so the authority fails closed. An owner that is a worker is named
  with its generation (``owner_generation``) and pinged addressed to it: an address is only a port,
  and another worker that got a dead owner's port refuses the ping instead of answering for it.
  A reservation is reclaimed only by a recovering owner that proves it is the same session by
  presenting the lease's one-time capability (the original owner keeps it in its durable session
  state).
* **Boot.** Leases are reloaded from LMDB; every active lease becomes a reservation, because a
  restart of this authority restarts every consumer after it (rest_for_one): no owner survives.
* **Fencing.** ``CheckFence(path, token)`` answers whether a write with that fencing token may
  proceed; a zombie's late write (its lease reserved, reclaimed or released) is refused.
* **Idempotent acquisition.** ``Acquire`` and ``Reclaim`` may carry a client-chosen ``request_id``
  (an unguessable idempotency key). A retry whose first answer was lost — the lease committed, then
  a kill at ``storage.after_commit`` / ``workspace.lease_recorded`` or an ask timeout — gets the
  grant that request made (``Granted.replayed``), not a conflict with its own lease: the same
  lease, token and capability while it is active; after a restart of this authority (the lease is
  then a reservation) the reservation reclaimed for it, with a larger token. A replay of an active
  lease commits nothing. See :meth:`.leases.LeaseTable.acquire` for the rules and why handing the
  capability out again is safe.

* **Worktrees have owners.** ``CreateWorktree`` commits a ``worktree/…`` record naming the session
  before git makes the checkout; ``CleanupWorktree`` is answered only for that session or a verified
  operator, and never while a live lease or reservation overlaps the worktree
  (:mod:`.worktree_owners` decides).
* **Corrupt records fail closed.** A record of the ``workspace`` database that does not decode is
  left in place, copied to ``quarantine`` (key ``workspace/<key>``), logged and listed by the
  ``"quarantined"`` ask; the authority still boots. An unreadable lease keeps holding its root (or
  every root when its root is unreadable): new acquisitions it may overlap are refused with an error
  naming the record (see :mod:`.worktree_owners` for why).

This is admission control on one node, not a distributed lock.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import lmdb
import msgpack
from thespian.actors import WakeupMessage

from ...core import clock, faults
from ...core.codec import CodecError
from ...core.errors import CommitOutcomeUnknown, CommitRejected, StaleGeneration
from ...supervision.calls import Addressed
from ...supervision.protocol import Ping, Pong
from ...supervision.worker import Worker
from ..grants.operators import CredentialsError, load_operators, verify
from ..heartbeats import note_refused_heartbeat
from ..session_facts import DEFAULT_READER, SessionFacts, load_reader
from ..storage.actor import storage_config
from ..storage.commit import Committed, Rejected, write
from ..storage.env import db, decode_u64, encode_u64, meta_db, open_env
from .leases import (
    Acquired,
    Decision,
    Lease,
    LeaseError,
    LeaseTable,
    NotReservationOwner,
    capability_digest,
    lease_record,
)
from .messages import PROTOCOL, Acquire, CheckFence, CheckRoot, CleanupWorktree, CreateWorktree, Reclaim, Release
from .paths import PathError, canonicalize, canonicalize_roots, under
from .worktree_owners import (
    NotWorktreeOwner,
    Quarantined,
    WorktreeRecord,
    WorktreeRefused,
    check_admission,
    decide_cleanup,
    decide_create,
    decode_entry,
    worktree_key,
    worktree_record,
)
from .worktrees import WorktreeError, cleanup, create, plan

log = logging.getLogger("ouroactors.workspace")
LEASE_RECORDED = faults.register_point("workspace.lease_recorded", "a lease decision is durable, not yet answered")
OWNER_DIED = faults.register_point("workspace.owner_died", "an owner stopped answering, before its reservations")
NEXT_TOKEN_KEY = b"workspace_next_token"
_HEARTBEAT = "ouroactors:workspace-heartbeat"


@dataclass(frozen=True)
class Granted:
    lease: Lease
    capability: bytes = field(repr=False)
    replayed: bool = False  # answered from an earlier request with the same request_id


class Workspace(Worker):
    """Asks: Acquire, Release, Reclaim, CheckFence, CheckRoot, CreateWorktree, CleanupWorktree, ``"leases"``,
    ``"worktrees"``, ``"quarantined"``.

    Every request is checked at the door (:mod:`.messages`) and must be stamped with this
    authority's generation. Refusals (answered, nothing changed): a bad request, lease and path
    errors, worktree errors, a rejected commit.
    An unknown commit outcome is a crash: the restart reloads the truth from LMDB.
    """

    refusals = (LeaseError, PathError, WorktreeError, WorktreeRefused, CommitRejected, CodecError)
    protocol = PROTOCOL
    stamped_only = True

    def on_start(self, allowed_roots: list[str] | None = None, heartbeat_s: float = 0.5,
                 owner_lost_after_s: float = 2.0, map_size: int | None = None,
                 worktrees_dir: str | None = None, session_facts: str = DEFAULT_READER) -> None:
        """``worktrees_dir``: where session worktrees go (default ``<repo>.worktrees`` next to the
        repository); a worktree is created only inside the allowed roots. ``session_facts``: who reads a session's
        durable state (:mod:`..session_facts`; the coordinator's)."""
        assert self.context is not None
        self.allowed_roots = tuple(allowed_roots or ())
        self.worktrees_dir = worktrees_dir
        self.heartbeat_s = heartbeat_s
        self.owner_lost_after_s = owner_lost_after_s
        storage = self.authorities.get("storage")
        self.fence = storage.generation if storage is not None else None
        self.env = open_env(storage_config(self.context.data_dir, map_size))
        self.session_facts = load_reader(session_facts)(self.env, self.fence)  # read only (ended sessions)
        self.leases_db = db(self.env, b"workspace")
        self.quarantine_db = db(self.env, b"quarantine")
        self.worktrees: dict[str, WorktreeRecord] = {}  # canonical path -> owner record
        self.quarantined: list[Quarantined] = []
        self.table = self._load()
        self._save_quarantine()
        self.owners: dict[str, tuple[Any, int | None, float]] = {}  # owner id -> (address, generation, last answer)
        orphaned = sorted({lease.owner for lease in self.table.live() if lease.status == "active"})
        for owner in orphaned:  # nobody survives a restart of this authority (rest_for_one)
            self._commit(self.table.owner_died(owner, "unknown"))
        self._end_reservations_of_ended_sessions()  # those of sessions that ended while it was down, at once
        self.wakeupAfter(timedelta(seconds=heartbeat_s), payload=_HEARTBEAT)

    # -- persistence --------------------------------------------------------------------------------

    def _load(self) -> LeaseTable:
        """Leases, worktree owners and quarantined records from LMDB. A record that does not decode is
        not guessed at and does not stop the boot: it is quarantined (see :mod:`.worktree_owners`)."""
        live: list[Lease] = []
        buried: list[Lease] = []
        self._corrupt: dict[bytes, bytes] = {}
        with self.env.begin() as txn:
            raw = txn.get(NEXT_TOKEN_KEY, db=meta_db(self.env))
            for key, value in txn.cursor(db=self.leases_db):
                entry = decode_entry(bytes(key), bytes(value))
                if isinstance(entry, Quarantined):
                    log.error("%s: record %s does not decode (%s): quarantined, left in place, still holding %s",
                              self.path, entry.where, entry.detail,
                              "nothing" if not entry.holds_leases else repr(entry.root) if entry.root else "every root")
                    self.quarantined.append(entry)
                    self._corrupt[bytes(key)] = bytes(value)
                elif isinstance(entry, WorktreeRecord):
                    self.worktrees[entry.path] = entry
                else:
                    (live if entry.live else buried).append(entry)
        next_token = decode_u64(raw) if raw is not None else 1
        return LeaseTable(next_token=next_token, leases=live, tombstones=buried)

    def _save_quarantine(self) -> None:
        """Copy the undecodable records' bytes to ``quarantine`` (the originals stay in place: failing closed)."""
        pending, self._corrupt = self._corrupt, {}
        if not pending:
            return

        def copy(txn: lmdb.Transaction) -> None:
            for key, raw in pending.items():
                txn.put(b"workspace/" + key, raw, db=self.quarantine_db)

        outcome = write(self.env, copy, fence=self.fence)
        if not isinstance(outcome, Committed):  # still reported (log, "quarantined"), still holding
            log.error("%s: could not copy %d corrupt workspace records to quarantine: %s", self.path, len(pending),
                      outcome)

    def _write(self, put: Any) -> None:
        """Commit ``put`` through the storage contract; a storage refusal becomes the caller's error."""
        outcome = write(self.env, put, fence=self.fence)
        if isinstance(outcome, Rejected):
            raise CommitRejected(outcome.reason)
        if not isinstance(outcome, Committed):
            # Unknown: the table may or may not be on disk; this incarnation cannot know which.
            # Crash so the restart reloads the truth from LMDB (and rest_for_one restarts consumers).
            raise CommitOutcomeUnknown(outcome.reason)

    def _commit(self, decision: Decision) -> None:
        """Make a decision durable, then apply it."""

        def put(txn: lmdb.Transaction) -> None:
            for lease in decision.changes:
                txn.put(f"lease/{lease.lease_id}".encode(), msgpack.packb(lease_record(lease)), db=self.leases_db)
            txn.put(NEXT_TOKEN_KEY, encode_u64(decision.next_token), db=meta_db(self.env))

        self._write(put)
        self.table.apply(decision)
        faults.point(LEASE_RECORDED)

    def _commit_worktree(self, path: str, record: WorktreeRecord | None) -> None:
        """Record (or, with None, forget) the owner of the worktree at ``path``, then apply it."""

        def put(txn: lmdb.Transaction) -> None:
            if record is None:
                txn.delete(worktree_key(path), db=self.leases_db)
            else:
                txn.put(worktree_key(path), msgpack.packb(worktree_record(record)), db=self.leases_db)

        self._write(put)
        if record is None:
            self.worktrees.pop(path, None)
        else:
            self.worktrees[path] = record

    # -- requests -----------------------------------------------------------------------------------

    def handle_Acquire(self, message: Acquire, sender: Any) -> Granted:
        root = canonicalize(message.root, allowed_roots=self.allowed_roots)
        owner = message.owner or sender
        decision = self.table.acquire(root, message.mode, message.session_id, self._owner_id(owner),
                                      clock.time_ns(), request_id=message.request_id)
        if not decision.replayed:  # a replay re-admits only what its own request already holds
            check_admission(root, self.quarantined)
        return self._grant(decision, owner, message.owner_generation)

    def _grant(self, decision: Acquired, owner: Any, generation: int | None) -> Granted:
        if decision.changes:  # a replay of an active lease changes nothing: nothing to commit
            self._commit(decision)
        if decision.lease.owner == self._owner_id(owner):  # a replay keeps the lease's recorded owner
            self._watch(owner, generation)
        return Granted(decision.lease, decision.capability, replayed=decision.replayed)

    def handle_Release(self, message: Release, sender: Any) -> Lease:
        decision = self.table.release(message.lease_id, owner=self._owner_id(sender),
                                      capability=message.capability)
        if not decision.already:
            self._commit(decision)
        return decision.lease

    def handle_Reclaim(self, message: Reclaim, sender: Any) -> Granted:
        root = canonicalize(message.root, allowed_roots=self.allowed_roots)
        owner = message.owner or sender
        if message.request_id is not None:  # this reclaim was answered before (and the answer lost)?
            replayed = self.table.replay(message.session_id, root, message.mode, message.request_id)
            if replayed is not None:
                return self._grant(replayed, owner, message.owner_generation)
        digest = capability_digest(message.capability)
        proven = any(lease.status == "reserved" and lease.session_id == message.session_id
                     and lease.capability_sha256 == digest for lease in self.table.live())
        if not proven:
            raise NotReservationOwner(
                f"session {message.session_id!r}: the capability presented is not that of its reservation on {root}"
            )
        decision: Acquired = self.table.reclaim(message.session_id, root, message.mode, self._owner_id(owner),
                                                message.session_id, clock.time_ns(), request_id=message.request_id)
        return self._grant(decision, owner, message.owner_generation)

    def handle_CheckFence(self, message: CheckFence, sender: Any) -> Lease:
        return self.table.check_fence(message.path, message.token, write=message.write)

    def handle_CheckRoot(self, message: CheckRoot, sender: Any) -> str:
        return canonicalize(message.root, allowed_roots=self.allowed_roots)

    def handle_CreateWorktree(self, message: CreateWorktree, sender: Any) -> Any:
        repo = canonicalize(message.repo, allowed_roots=self.allowed_roots)
        roots = canonicalize_roots(self.allowed_roots)
        top, path = plan(repo, message.session_id, root_dir=self.worktrees_dir, allowed_roots=roots)
        earlier = self.worktrees.get(path)
        decide_create(path, message.session_id, earlier, live=self.table.live(), quarantined=self.quarantined)
        record = WorktreeRecord(path=path, repo=top, session_id=message.session_id,
                                branch=f"ouroactors/{message.session_id}", created_ns=clock.time_ns())
        self._commit_worktree(path, record)  # the owner is durable before the checkout exists
        try:
            return create(repo, message.session_id, base=message.base, root_dir=self.worktrees_dir,
                          allowed_roots=roots)
        except WorktreeError:
            # Nothing was checked out (git refused): forget the owner again, unless it owned it before
            # (a worktree already at that path stays that session's). A failure here leaves a record of
            # this session for a path only this session's worktree can take: harmless.
            if earlier is None:
                self._commit_worktree(path, None)
            raise

    def handle_CleanupWorktree(self, message: CleanupWorktree, sender: Any) -> Any:
        repo = canonicalize(message.repo, allowed_roots=self.allowed_roots)
        roots = canonicalize_roots(self.allowed_roots)
        path = os.path.realpath(message.path)
        if not any(under(path, root) for root in roots):
            raise WorktreeError(repo, f"worktree {message.path} is outside the allowed roots")
        record = self.worktrees.get(path)
        who = decide_cleanup(path, record, session_id=message.session_id, operator=self._operator(message, path),
                             live=self.table.live(), quarantined=self.quarantined)
        result = cleanup(repo, path)
        if result.removed and record is not None:
            # Removed first, forgotten second: forgetting first would leave a kept (dirty) tree
            # without an owner. The handler runs alone, so no lease can slip in between.
            self._commit_worktree(path, None)
        log.info("%s: cleanup of worktree %s by %s: %s", self.path, path, who,
                 "removed" if result.removed else "kept (dirty)")
        return result

    def _operator(self, message: CleanupWorktree, path: str) -> str | None:
        """The operator named by the request, verified with the grants authority's credentials (None: none named)."""
        if message.operator is None:
            return None
        assert self.context is not None
        try:
            verified = message.token is not None and verify(load_operators(self.context.data_dir),
                                                            message.operator, message.token)
        except CredentialsError as exc:
            raise NotWorktreeOwner(path, None, None, f"operator credentials cannot be checked: {exc}") from None
        if not verified:
            raise NotWorktreeOwner(path, None, None, f"operator {message.operator!r}: credentials not verified")
        return message.operator

    def handle_str(self, message: str, sender: Any) -> Any:
        if message == "leases":
            return self.table.live()
        if message == "worktrees":
            return sorted(self.worktrees.values(), key=lambda r: r.path)
        if message == "quarantined":
            return list(self.quarantined)
        return self.unhandled(message, sender)

    # -- owners -------------------------------------------------------------------------------------

    @staticmethod
    def _owner_id(address: Any) -> str:
        return str(address)

    def _watch(self, owner: Any, generation: int | None) -> None:
        self.owners[self._owner_id(owner)] = (owner, generation, clock.monotonic())

    def handle_Pong(self, message: Pong, sender: Any) -> None:
        owner = self.owners.get(self._owner_id(sender))
        if owner is not None:
            self.owners[self._owner_id(sender)] = (owner[0], owner[1], clock.monotonic())

    def handle_StaleGeneration(self, message: StaleGeneration, sender: Any) -> None:
        owner = self._owner_id(sender)
        note_refused_heartbeat(log, self.path, f"owner {owner}" if owner in self.owners else None, sender, message)

    def handle_WakeupMessage(self, message: WakeupMessage, sender: Any) -> None:
        if message.payload != _HEARTBEAT:
            return
        now = clock.monotonic()
        holding = {lease.owner for lease in self.table.live() if lease.status == "active"}
        for owner_id, (address, generation, seen) in list(self.owners.items()):
            if owner_id not in holding:
                del self.owners[owner_id]  # nothing left to watch it for
            elif now - seen > self.owner_lost_after_s:
                del self.owners[owner_id]
                faults.point(OWNER_DIED)
                decision = self.table.owner_died(owner_id, "unknown")  # its session's fate is not known here
                self._commit(decision)
                log.warning("%s: owner %s stopped answering; %d lease(s) reserved for its session",
                            self.path, owner_id, len(decision.reserved))
            else:  # addressed to a worker owner's generation: whoever got its port once it died refuses it
                ping = Ping("workspace", 0)
                self.send(address, ping if generation is None else Addressed(generation, ping))
        self._end_reservations_of_ended_sessions()
        self.wakeupAfter(timedelta(seconds=self.heartbeat_s), payload=_HEARTBEAT)

    def _end_reservations_of_ended_sessions(self) -> None:
        """Release the reservations of sessions whose durable record is terminal (``LeaseTable.session_ended``).

        A reservation waits for its session's recovering owner; a session cancelled (or failed) while it held one —
        parked, say — has no owner left to reclaim it, and its root would stay refused to everyone. The session's
        fate is read from the coordinator's durable record, never taken from a message: a session with no record
        (no coordinator manages it) or one that does not decode keeps its reservation (fail closed)."""
        reserved = {lease.session_id for lease in self.table.live() if lease.status == "reserved"}
        if not reserved:
            return
        for session_id in sorted(reserved):
            facts = self.session_facts(session_id)  # no record, or a corrupt one: it keeps its reservation
            if isinstance(facts, SessionFacts) and facts.terminal:
                decision = self.table.session_ended(session_id)
                self._commit(decision)
                log.info("%s: session %r is %s: released its %d reservation(s)", self.path, session_id,
                         facts.state, len(decision.released))
