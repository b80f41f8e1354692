"""Output the runtime commits itself: a tool call's events carried in the ledger transaction of its start.

**Why.** Commit before publish (DESIGN.md invariant 3) used to mean two synced commits per event: the runtime's
ledger start (which follows the ``tool_call`` event at once) and the coordinator's checkpoint of the event, one
process hop later, racing the first for the disk. Both processes write the same LMDB environment, so the event can
ride in the commit that happens anyway: the ``tool_call`` event is put in the session's log, with the record's
cursor and log digest, inside the start's transaction, and pushed to the coordinator only once that transaction is
durable — the coordinator then publishes it without a commit of its own. The decision (fenced by the session record
inside the transaction: running, on this runtime id and generation, no gap) is
:func:`ouroactors.runtime.coordinator.publication.carry`; this is the runtime's shell around it.

**Which events.** Only those the loop emits with ``rides=True`` wait for a commit: one of this runtime follows them
at once (a valid tool call: its start or its denial is recorded next). Every other event is pushed as it is emitted,
as before, and takes the events still waiting with it — so nothing waits behind a model call or a long tool. A
commit carries every event the coordinator has not committed yet, pushed or not (the turn's start, pushed a moment
before, would otherwise leave a gap), up to the first one the coordinator decides on (a settled turn, an approval):
those are always the coordinator's to commit, with the transition they cause.

**Nothing depends on it.** A carry refused (not attached yet, a zombie, a gap), a transaction rejected, or a push
lost leaves the events where they always were: in the runtime's buffer until acknowledged, pushed with the next
event, drained at the coordinator's next poll. ``put_staged`` never raises and never spoils the ledger's
transaction (a nested transaction when asked to isolate): the ledger, not publication, is the gate.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import lmdb

from ...authorities.storage.commit import Committed, nested
from ...core import faults
from ...core.codec import decode
from ..coordinator.publication import CarryRefused, carry
from ..coordinator.record import SessionRecord, check_id
from ..coordinator.store import SessionStore
from ..coordinator.trace import mark
from .messages import MAX_PUSHED
from .output import OutputEvent

__all__ = ["CARRIED", "CarriedOutput"]

log = logging.getLogger("ouroactors.runtime")

# A named boundary for crash enumeration: the carried events are durable, the coordinator not yet told.
WINDOW = 1024  # events remembered for a carry (the output buffer holds as many unacknowledged)
CARRIED = faults.register_point("runtime.output_carried", "a runtime's commit carried output events, not yet pushed")


class CarriedOutput:
    """The runtime's output on its way to the coordinator: pushed at once, or carried by the next ledger commit.

    ``push(events)`` posts one push (from any thread; the actor thread sends it) and answers whether there was a
    reader to push to; ``wake()`` writes to the coordinator's wake-up FIFO (:mod:`..coordinator.wake`), which
    tells it of a carried commit sooner than a push, from the committing thread. It is a ledger rider
    (:class:`ouroactors.authorities.ledger.direct.Rider`).
    """

    def __init__(self, store: SessionStore, session_id: str, runtime_id: str, generation: int | None,
                 push: Callable[[tuple[OutputEvent, ...]], bool], wake: Callable[[int], bool] | None = None) -> None:
        self._store = store
        self._key = check_id(session_id, "session_id").encode()
        self._runtime_id = runtime_id
        self._generation = generation
        self._push = push
        self._wake = wake  # tells the coordinator of a carried commit without the actor thread (coordinator.wake)
        self._lock = threading.Lock()  # emitted on the trio thread; put and settled on whichever thread commits
        self._pending: list[OutputEvent] = []  # riding events not pushed yet
        self._window: list[OutputEvent] = []  # every event emitted and not known to be committed, in order
        self._seen: tuple[bytes, SessionRecord] | None = None  # the record bytes last read or written, decoded
        self.carried = 0  # events committed by this runtime (metrics, tests)

    # -- the trio thread ------------------------------------------------------------------------------------

    def emitted(self, event: OutputEvent, rides: bool = False) -> None:
        """``event`` is in the buffer: hold it for the commit that follows (``rides``), or push it now."""
        with self._lock:
            self._window.append(event)
            if len(self._window) > WINDOW:
                del self._window[:-WINDOW]  # an old event left out only makes a carry stop at the gap
            if rides and self._generation is not None:
                self._pending.append(event)
                return
            out, self._pending = (*self._pending, event), []
        self._send(out)

    def flush(self) -> None:
        """Push what waits for a commit (nothing will carry it: the turn ends, or the runtime closes)."""
        with self._lock:
            out, self._pending = tuple(self._pending), []
        if out:
            self._send(out)

    def _send(self, events: tuple[OutputEvent, ...]) -> None:
        for start in range(0, len(events), MAX_PUSHED):
            if not self._push(events[start:start + MAX_PUSHED]):
                with self._lock:  # nobody reads yet: nothing is held for a commit either (it would never be pushed)
                    self._pending = []
                return

    # -- the ledger rider (inside the ledger's transaction) --------------------------------------------------

    def put_staged(self, txn: lmdb.Transaction, *, isolate: bool = False) -> tuple[OutputEvent, ...] | None:
        """Put the events the coordinator has not committed yet in the session's log inside ``txn``, if the record
        lets this runtime (:func:`carry`). Not only the riding ones: an event pushed a moment ago (the turn's start)
        whose checkpoint has not landed yet would otherwise leave a gap before them. Never raises."""
        with self._lock:
            if not self._pending or self._generation is None:
                return None
            window = tuple(self._window)
        try:
            raw = txn.get(self._key, db=self._store.sessions)
            if raw is None:  # no session record (a runtime opened without a coordinator): nothing will carry them
                with self._lock:
                    self._pending, self._window = [], []
                return None
            raw = bytes(raw)
            seen = self._seen
            record = seen[1] if seen is not None and seen[0] == raw else decode(raw, SessionRecord)
            self._committed(record.committed_cursor)
            plan = carry(record, self._runtime_id, self._generation, window)
            if isinstance(plan, CarryRefused) or plan.empty:
                return None
            with nested(self._store.env, txn, isolate) as target:
                written = self._store.put_carried(target, record, plan)
            self._seen = (written[1], written[0])
            return plan.events
        except Exception as exc:  # publication never refuses an effect: the coordinator commits these instead
            log.warning("carrying output of session %s failed: %s: %s", self._key.decode(), type(exc).__name__, exc)
            return None

    def _committed(self, cursor: int) -> None:
        """Events up to ``cursor`` are durable (whoever committed them): nothing holds them any more."""
        with self._lock:
            self._window = [e for e in self._window if e.cursor > cursor]
            self._pending = [e for e in self._pending if e.cursor > cursor]

    def settle_staged(self, staged: tuple[OutputEvent, ...] | None, outcome: Any) -> None:
        """The ledger transaction's outcome: committed, the carried events are pushed; else they stay pending."""
        if not staged or not isinstance(outcome, Committed):
            return
        mark("carried_commit", staged[-1].cursor)
        self._committed(staged[-1].cursor)
        self.carried += len(staged)
        faults.point(CARRIED)
        if self._wake is None or not self._wake(staged[-1].cursor):  # no wake-up line: the push tells (a hop later)
            self._send(staged)
