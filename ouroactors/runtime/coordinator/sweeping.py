"""The directory's boot sweep, the shell over :mod:`.sweep`: gather the facts for every session, settle in batch.

A mixin of :class:`~.directory.Sessions`. The facts come in three asks whatever the number of sessions — the
execution supervisor's children (which runtimes live), the ledger's ``started`` and ``ambiguous`` entries — and
reads of this node's store (the records, the runtime locations and leases kept beside them). The sessions
:func:`.sweep.plan` settles are claimed for the sweep (an incarnation id of its own, so a stale coordinator's
later write is refused) and parked where the table parks them, :data:`BATCH` sessions to one transaction; idle
sessions are left as they are (nothing about them changes); every other session gets its coordinator, as does a
session whose record moved meanwhile. If the facts cannot be
gathered, every session gets its coordinator, which gathers its own: the sweep is a shortcut, never a second
policy.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Generator, Mapping
from typing import TYPE_CHECKING, Any

from ...authorities.ledger.messages import ListEntries, ReconcilerKinds
from ...supervision.events import log_event
from ...supervision.protocol import AdminCall, Stamped
from . import reconciling, recovery, sweep
from .calls import Ask, TimedOut
from .commands import value_of
from .configs import get_lease, runtime_generations
from .record import Recoverable, SessionRecord

if TYPE_CHECKING:
    from .store import SessionStore

log = logging.getLogger("ouroactors.coordinator")

BATCH = 1000  # sessions settled per transaction


class Sweeper:
    """See the module docstring."""

    if TYPE_CHECKING:  # what the directory provides
        path: str
        node: str
        store: SessionStore
        keys: dict[str, str]
        swept: list[str]
        authorities: Mapping[str, Any]
        context: Any

        def _start(self, session_id: str) -> Generator[Ask, Any, Any]: ...

    def _sweep_sessions(self, found: list[Recoverable]) -> Generator[Ask, Any, None]:
        began = time.monotonic()
        wanted = [f.session_id for f in found if sweep.needs_record(f)]
        records = self.store.records(wanted) if wanted else {}
        decided = yield from self._plan(found, records)
        if decided is None:  # the facts could not be gathered: every session recovers itself
            decided = sweep.SweepPlan(start=[f.session_id for f in found])
        parked = self._park(decided, records)
        start = [*decided.start, *(r.session_id for r, _ in decided.park if r.session_id not in parked)]
        for session_id in start:
            yield from self._start(session_id)
            self.swept.append(session_id)
        fields = {"sessions": len(found), "idle": len(decided.idle), "parked": len(parked),
                  "coordinators": len(start), "seconds": round(time.monotonic() - began, 3)}
        log.info("%s: recovery sweep: %s", self.path, fields)
        log_event(self.context, self.path, "recovery_swept", fields)

    def _plan(self, found: list[Recoverable], records: dict[str, tuple[SessionRecord, bytes]]
              ) -> Generator[Ask, Any, sweep.SweepPlan | None]:
        if not found:
            return sweep.SweepPlan()
        execution, ledger = self.authorities.get("execution"), self.authorities.get("ledger")
        if execution is None or ledger is None:
            return None
        children = yield Ask(execution.address, AdminCall("which_children"), 30.0)
        if isinstance(children, BaseException | TimedOut):
            log.warning("%s: the execution supervisor did not list its runtimes (%r)", self.path, children)
            return None
        live = frozenset(c.generation for c in children if c.status == "running" and c.generation is not None)
        unsettled: dict[str, list[recovery.Effect]] = {}
        if records:
            found_entries = []
            for status in reconciling.UNSETTLED:
                entries = yield Ask(ledger.address, Stamped(ledger.generation, ListEntries(status, None, None, 0,
                                                                                            10_000_000)), 30.0)
                if isinstance(entries, BaseException | TimedOut):
                    log.warning("%s: the ledger did not list its %s entries (%r)", self.path, status, entries)
                    return None
                found_entries += [entry for entry in entries if entry.session_id is not None]
            kinds: frozenset[str] = frozenset()
            if found_entries:  # an effect a reconciler may settle does not park its session here: its coordinator
                answer = yield Ask(ledger.address, Stamped(ledger.generation, ReconcilerKinds()), 30.0)
                if not isinstance(answer, tuple):  # reconciles it first (see .reconciling)
                    log.warning("%s: the ledger did not name its reconcilers (%r)", self.path, answer)
                    return None
                kinds = frozenset(answer)
            for entry in found_entries:
                unsettled.setdefault(entry.session_id, []).append(
                    recovery.Effect(entry.effect_id, entry.status.value, entry.kind in kinds))
        located = runtime_generations(self.store, [f.session_id for f in found]) if live else {}
        whole = {sid: record for sid, (record, _) in records.items()}
        return sweep.plan(found, records=whole, live=live, located=located,
                          unsettled={sid: tuple(effects) for sid, effects in unsettled.items()},
                          reservations={sid: self._reservation(r) for sid, r in whole.items()
                                        if r.workspace is not None})

    def _reservation(self, record: SessionRecord) -> recovery.Reservation:
        """As a coordinator's recovery judges it: reclaimable only with the lease's capability kept for it."""
        assert record.workspace is not None
        lease = get_lease(self.store, record.session_id)
        proof = lease is not None and lease.get("lease_id") == record.workspace.lease_id and lease.get("capability")
        return recovery.Reservation.RECLAIMABLE if proof else recovery.Reservation.NOT_RECLAIMABLE

    def _park(self, decided: sweep.SweepPlan, records: dict[str, tuple[SessionRecord, bytes]]) -> set[str]:
        """Park what the plan parks (claimed for the sweep, :data:`BATCH` to a transaction); the ids parked."""
        items = [(record, records[record.session_id][1], steps) for record, steps in decided.park]
        claimant = f"sweep.{uuid.uuid4().hex[:20]}"
        parked: set[str] = set()
        for first in range(0, len(items), BATCH):
            parked.update(value_of(self.store.settle_swept(items[first:first + BATCH], claimant), "sweep"))
        return parked


__all__ = ["BATCH", "Sweeper"]
