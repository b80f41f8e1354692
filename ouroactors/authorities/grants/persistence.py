"""The grants authority's durable records: load them, copy the undecodable to quarantine, commit changes.

Mixed into :class:`~.actor.Grants`. Everything the authority knows lives in the ``grants`` database of the
node's LMDB environment: ``posture/<session>``, ``rules/<scope>`` (``rules/session/<id>`` for one session's),
``approval/<id>`` and the configuration's policy record (see :mod:`.inline`). A change is committed first and
applied to the in-memory view only once durable (:meth:`Persistence._commit`): a rejected commit raises
:class:`~ouroactors.core.errors.CommitRejected` (the request is refused), one whose outcome is unknown raises
:class:`~ouroactors.core.errors.CommitOutcomeUnknown` (a crash: the restart reloads the truth).

A record that does not decode is reported, copied to ``quarantine`` and left in place, failing closed on its
own (see :mod:`.records`): the rest loads, and nothing is merged into it (:meth:`Persistence._intact`).
"""

from __future__ import annotations

import dataclasses
import logging

import lmdb
import msgpack

from ...core.errors import CommitOutcomeUnknown, CommitRejected, CorruptRecord
from ..storage.commit import Committed, Rejected, write
from ..storage.env import db
from .approvals import Approval
from .inline import POLICY_KEY, Policy, policy_record
from .records import QUARANTINE_PREFIX, decode_record
from .rules import Scope

log = logging.getLogger("ouroactors.grants")


class Persistence:
    """The grants database; the state it loads and updates belongs to :class:`~.actor.Grants`."""

    env: lmdb.Environment
    grants_db: lmdb._Database
    fence: int | None
    corrupt: dict[str, str]  # key in the grants database -> what is wrong with its record (quarantined)
    postures: dict[str, str]
    stored_rules: dict[str, tuple[str, ...]]
    approvals: dict[str, Approval]

    def _load(self) -> tuple[dict[str, str], dict[str, tuple[str, ...]], dict[str, Approval]]:
        """Every record of the grants database; one that does not decode is quarantined, reported and fails closed
        on its own (see :mod:`.records`): the rest loads."""
        postures: dict[str, str] = {}
        stored: dict[str, tuple[str, ...]] = {}
        found: dict[str, Approval] = {}
        bad: dict[bytes, bytes] = {}
        with self.env.begin() as txn:
            for raw_key, raw_value in txn.cursor(db=self.grants_db):
                key = bytes(raw_key)
                try:
                    kind, name, data = decode_record(key, bytes(raw_value))
                except CorruptRecord as exc:
                    log.error("grants database, key %r: %s; left in place, failing closed for it", key, exc)
                    bad[key] = bytes(raw_value)
                    self.corrupt[key.decode(errors="replace")] = exc.detail
                    continue
                if kind == "posture":
                    postures[name] = data
                elif kind == "rules" and name == Scope.SESSION.value:
                    log.warning("ignoring %d session rules stored without a session (they would apply to every "
                                "session); add them again per session", len(data))
                elif kind == "rules":
                    stored[name] = data
                elif kind == "approval":
                    found[name] = data
        if bad:
            self._quarantine(bad)
        return postures, stored, found

    def _quarantine(self, bad: dict[bytes, bytes]) -> None:
        """Copy undecodable records to ``quarantine`` as ``grants/<key>`` (the originals stay, failing closed)."""
        def copy(txn: lmdb.Transaction) -> None:
            quarantine = db(self.env, b"quarantine")
            for key, raw in bad.items():
                txn.put(QUARANTINE_PREFIX + key, raw, db=quarantine)

        outcome = write(self.env, copy, fence=self.fence)
        if not isinstance(outcome, Committed):
            log.error("could not copy %d corrupt grants records to quarantine: %s", len(bad), outcome)

    def _commit(self, *, approvals: list[Approval] = (), postures: dict[str, str] | None = None,  # type: ignore[assignment]
                rules: dict[str, tuple[str, ...]] | None = None, forget: list[str] = (),  # type: ignore[assignment]
                policy: Policy | None = None) -> None:
        def put(txn: lmdb.Transaction) -> None:
            if policy is not None:
                txn.put(POLICY_KEY, policy_record(policy), db=self.grants_db)
            for approval_id in forget:
                txn.delete(f"approval/{approval_id}".encode(), db=self.grants_db)
            for approval in approvals:
                txn.put(f"approval/{approval.approval_id}".encode(),
                        msgpack.packb(dataclasses.asdict(approval)), db=self.grants_db)
            for session, posture in (postures or {}).items():
                txn.put(f"posture/{session}".encode(), msgpack.packb(posture), db=self.grants_db)
            for scope, texts in (rules or {}).items():
                txn.put(f"rules/{scope}".encode(), msgpack.packb(list(texts)), db=self.grants_db)

        outcome = write(self.env, put, fence=self.fence)
        if isinstance(outcome, Rejected):
            raise CommitRejected(outcome.reason)
        if not isinstance(outcome, Committed):
            raise CommitOutcomeUnknown(outcome.reason)  # crash: the restart reloads the truth
        for approval in approvals:
            self.approvals[approval.approval_id] = approval
        for approval_id in forget:
            self.approvals.pop(approval_id, None)
        self.postures.update(postures or {})
        self.stored_rules.update(rules or {})
        for session in postures or {}:  # a posture is set in full: the corrupt one is replaced (its copy kept)
            self.corrupt.pop(f"posture/{session}", None)
        if policy is not None:  # rewritten from the configuration, its source
            self.corrupt.pop(POLICY_KEY.decode(), None)

    def _intact(self, key: str) -> None:
        """Refuse to merge into a corrupt record: what it held is unknown (its quarantined copy is the evidence)."""
        if key in self.corrupt:
            raise CorruptRecord(f"grants/{key}", f"{self.corrupt[key]}; not changed: what it held is unknown")
