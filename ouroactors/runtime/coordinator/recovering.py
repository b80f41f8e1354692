"""Recovery, the coordinator's start: read the session back, probe its runtime, decide, act on the decision.

A mixin of :class:`~.actor.Coordinator` (its module docstring tells the whole story). The decisions are pure
(:mod:`.recovery`); asking the ledger for the session's unsettled effects and settling them through their
reconcilers is :mod:`.reconciling`'s; starting, opening and closing a runtime is :mod:`.runtimes`'.

**Start = recovery.** Read the record back (this is also the reconciliation after a
``commit_outcome_unknown`` that stopped the previous incarnation: the store wrote record, log and
cursor in one transaction, so what it reads is what is durable), claim it (a CAS: a stale
incarnation's later write is refused), probe the runtime the record expects (the execution
supervisor's child with the record's generation — generations are unique on the node — then its
status: id and session), list the session's unsettled effects in the ledger, and let
:func:`.recovery.decide` choose. ADOPT: reattach and drain beyond the committed cursor; nothing is
started and no model call repeats. REPLACE: the session goes ``recovering`` first, the old
runtime's restarted incarnation is terminated, a replacement opens **at the committed cursor** and
re-runs the prompt of the turn that had not settled (the message that resumed the session, kept by
the store). PARK: the reason is in the record, visible in ``session show``.

**A runtime found gone is recovered at once.** While a runtime is attached, the coordinator's heartbeat
(:data:`.actor.HEARTBEAT_S`) runs :meth:`Recovering._heartbeat` between jobs: is the execution supervisor's child
still the one attached? Then one more drain and the lazy ack (a lost push or answer is found there); else
recovery runs again.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from ...core import faults
from ...core.errors import CorruptRecord, OuroactorsError
from ...supervision.generations import epoch_of
from ...supervision.protocol import AdminCall
from ..execution import versions
from ..execution.messages import RuntimeStatus, RuntimeStatusRequest, SubscribeOutput
from . import publication, reconciling, recovery, runtimes
from .calls import Ask, Job, OffThread, TimedOut
from .commands import value_of
from .configs import get_lease, get_runtime
from .leasing import AuthorityCrashed
from .runtimes import _Attached
from .workflow import Event, State, is_terminal

if TYPE_CHECKING:
    from ..execution.messages import Opened
    from .record import SessionRecord, WorkspaceLease
    from .store import SessionStore
    from .waits import TurnContext

log = logging.getLogger("ouroactors.coordinator")

# Named boundaries for crash enumeration (ouroactors.faults.session_enumerate); free unless a plan is armed.
CLAIMED = faults.register_point("coordinator.claimed", "an incarnation claimed the session, recovery not yet decided")


class Recovering:
    """See the module docstring."""

    if TYPE_CHECKING:  # what the coordinator provides
        session_id: str
        incarnation: str
        path: str
        store: SessionStore
        attached: _Attached | None
        record: SessionRecord | None
        answered_asks: list[str]
        myAddress: Any

        def stop(self, reason: Any = None) -> None: ...
        def _authority(self, name: str, payload: Any, timeout_s: float = 10.0) -> Ask: ...
        def _execution(self, call: AdminCall, timeout_s: float = 30.0) -> Ask: ...
        def _transition(self, record: SessionRecord, event: Event, **changes: Any) -> SessionRecord: ...
        def _want_publish(self, drain: bool = True) -> None: ...
        def _poll(self) -> None: ...
        def _runtime_ask(self, message: Any, timeout_s: float = ..., to: _Attached | None = None) -> Ask: ...
        def _start_runtime(self, start: int, reclaim: dict[str, Any] | None = None,
                           answered: tuple[tuple[str, str], ...] = (),
                           tail: int = 0) -> Generator[Ask, Any, Opened]: ...
        def _send_text(self, text: str) -> Generator[Ask | OffThread, Any, Any]: ...
        def _close_runtime(self, settle: bool = True) -> Job: ...
        def _stop_stray(self) -> Job: ...
        def _workspace(self) -> WorkspaceLease | None: ...
        def _turn_context(self, record: SessionRecord) -> TurnContext: ...
        def _check_waits(self, look: bool = False) -> Job: ...
        def _tools_changed(self, record: SessionRecord) -> str | None: ...
        def _publish(self, drain: bool | None = None) -> Job: ...
        def _acked(self) -> int: ...
        def _ack(self, cursor: int) -> Generator[Ask | OffThread, Any, bool]: ...

    def _recover(self) -> Job:
        try:
            record = self.store.get(self.session_id)
        except CorruptRecord as exc:  # quarantined and reported by the store; restarting would only loop
            log.error("%s: session %r does not decode (%s): not coordinated", self.path, self.session_id, exc)
            self.stop()
            return
        if record is None:
            log.warning("%s: no session %r: nothing to coordinate", self.path, self.session_id)
            self.stop()
            return
        # the claim's synced commit runs beside the actor thread (OffThread): this job starts in on_start, which then
        # reports the start at once, while the commit is made (~1-3 ms a new session's creation no longer waits for);
        # commands that arrive meanwhile wait behind this job, as before
        claimed = yield OffThread(functools.partial(self.store.claim, self.session_id, record.revision,
                                                    self.incarnation))
        record = self.record = value_of(claimed, "claim")
        faults.point(CLAIMED)
        if is_terminal(record.state):
            self.stop()
            return
        probe, found = yield from self._probe(record)
        effects: tuple[recovery.Effect, ...] = ()
        if record.state in (State.RUNNING, State.RECOVERING) and not probe.answered:
            effects = yield from self._unsettled()
        reservation, why = recovery.Reservation.NONE, ""
        if record.workspace is not None and not probe.answered:
            kept, live = get_lease(self.store, self.session_id), None
            if kept is not None and kept.get("capability") and kept.get("lease_id") != record.workspace.lease_id:
                # kept for a replacement its coordinator died before naming (.recovery.kept_reservation): ask
                answer = yield self._authority("workspace", "leases")
                live = answer if isinstance(answer, list | tuple) else None  # else no answer: nothing proven
            reservation, why = recovery.kept_reservation(self.session_id, record.workspace.lease_id, kept, live)
        replacing = record.state in (State.RUNNING, State.RECOVERING) and not probe.answered  # tools matter then
        decision = recovery.decide(record, commit=recovery.Commit.SETTLED, effects=effects, probe=probe,
                                   reservation=reservation, provided=versions.PROVIDED, why=why,
                                   tools_changed=self._tools_changed(record) if replacing else None)
        log.info("%s: recovery of %s: %s %s", self.path, self.session_id, decision.action.value, decision.detail)
        for event, changes in recovery.entering(record, decision):
            record = self._transition(record, event, **changes)
        if decision.action is recovery.Action.REPLACE and decision.reconcile:  # recovering now: reconcile first
            decision = recovery.reconciled(decision, (yield from reconciling.settle(self._ledger, self.session_id)))
            for event, changes in recovery.entering(record, decision):
                record = self._transition(record, event, **changes)
        if decision.action is recovery.Action.ADOPT:
            assert found is not None and record.runtime is not None
            self.attached = attached = _Attached(found[0], found[1], record.runtime.runtime_id,
                                                 record.runtime.generation, adopted=True)
            lease = get_lease(self.store, self.session_id)  # the runtime holds it: closing it releases it too
            if record.workspace is not None and lease and lease.get("lease_id") == record.workspace.lease_id:
                attached.lease_id, attached.capability = lease["lease_id"], lease.get("capability")
                attached.token = int(lease.get("fencing_token") or 0)
            self.answered_asks = [d for _, d in self._turn_context(record).approvals]
            if runtimes.PUSH:  # its pushes went to the dead incarnation that opened it: from now on to this one
                yield self._runtime_ask(SubscribeOutput(self.myAddress), 10.0)  # gone: the drain finds it
            self._want_publish()  # drain whatever lies beyond the committed cursor
            self._poll()
            status = found[2]
            text = self._turn_context(record).text
            if text is not None and recovery.text_never_sent(record, running=status.running,
                                                             produced=status.produced):
                log.info("%s: the adopted runtime never got its turn's text: sending it", self.path)
                yield from self._send_text(text)
        elif decision.action is recovery.Action.REPLACE:
            yield from self._replace(record, decision)
        elif decision.action is recovery.Action.IDLE:
            yield from self._stop_stray()
            if record.state.wait is not None:  # a wait goes on where the record says it is (see .waits)
                yield from self._check_waits()

    def _probe(self, record: SessionRecord) -> Generator[Ask, Any, tuple[recovery.Probe,
                                                                          tuple[Any, str, RuntimeStatus] | None]]:
        """What answers at the runtime the record expects: the execution child of its generation, then its status."""
        if record.runtime is None:
            return recovery.Probe(), None
        where = get_runtime(self.store, self.session_id)
        if where is not None and where.get("generation") == record.runtime.generation:
            match = yield self._execution(AdminCall("which_child", where["key"]), 10.0)
            if isinstance(match, BaseException | TimedOut) or match.generation != record.runtime.generation:
                return recovery.Probe(), None
        else:  # no location kept: look among all runtimes of the node
            children = yield self._execution(AdminCall("which_children"))
            if isinstance(children, BaseException | TimedOut):
                raise OuroactorsError(f"the execution supervisor did not list its children: {children!r}")
            match = next((c for c in children if c.generation == record.runtime.generation), None)
        if match is None or match.status != "running" or match.address is None:
            return recovery.Probe(), None
        status = yield self._runtime_ask(RuntimeStatusRequest(), 5.0,
                                         to=_Attached(match.address, match.id, "", record.runtime.generation))
        if not isinstance(status, RuntimeStatus) or status.session_id != self.session_id:
            return recovery.Probe(), None
        return recovery.Probe(status.runtime_id, status.generation), (match.address, match.id, status)

    def _unsettled(self) -> Generator[Ask, Any, tuple[recovery.Effect, ...]]:
        return (yield from reconciling.unsettled(self._ledger, self.session_id))

    def _ledger(self, payload: Any, timeout_s: float) -> Ask:
        return self._authority("ledger", payload, timeout_s)

    def _replace(self, record: SessionRecord, decision: recovery.Decision) -> Job:
        lost = get_runtime(self.store, self.session_id)
        if lost is not None:  # the supervisor may have restarted the lost runtime: that incarnation is a stray
            info = yield self._execution(AdminCall("which_child", lost["key"]), 10.0)
            # A key is reused only by a later system (dynamic keys count from 1 again): same node epoch, same child.
            if getattr(info, "generation", None) and epoch_of(info.generation) == epoch_of(lost["generation"]):
                yield self._execution(AdminCall("terminate_child", lost["key"]))
        self.attached = None
        last = self.store.events(self.session_id, max(record.committed_cursor - 1, 0), 1)
        if last and self._ended_this_turn(record, last[-1]):  # it stopped on an effect of unknown outcome, settled
            # now by its reconciler: nothing re-runs, the next message goes on; the record says why the turn stopped
            self._transition(record, Event.TURN_COMPLETE, reason="the last turn stopped on an effect of unknown "
                             f"outcome, since settled (by its reconciler or an operator: `ouroactors ledger show` "
                             f"names which): {last[-1].data.get('reason')}"[:500])
            return
        reclaim = get_lease(self.store, self.session_id) if decision.reclaim else None
        context = self._turn_context(record)
        try:
            opened = yield from self._start_runtime(record.committed_cursor, reclaim,
                                                    answered=context.approvals, tail=self._unsettled_turn(record))
        except AuthorityCrashed:
            # the workspace crashed answering the reclaim (rest_for_one is restarting it and this coordinator):
            # parked now, the session would stay parked for its next coordinator, whose recovery can reclaim — the
            # key is the same, so a reclaim the crash left committed is found (.leasing.reclaim_request_id)
            raise
        except OuroactorsError as exc:
            self._transition(record, Event.PARK, reason=f"{recovery.ParkReason.RESERVATION_NOT_RECLAIMABLE.value}: "
                                                        f"replacement refused: {exc}")
            return
        event, changes = recovery.attaching(dataclasses.replace(decision, generation=opened.generation),
                                            opened.runtime_id)
        record = self._transition(record, event, workspace=self._workspace(), **changes)
        self.answered_asks = [d for _, d in context.approvals]
        text = context.text
        if opened.tail:  # the lost runtime had settled the turn: its withheld events follow, nothing re-runs
            log.info("%s: the lost runtime settled the turn; its last events are published from the journal",
                     self.path)
            self._want_publish()
            return
        if text is None:
            yield from self._close_runtime()
            self._transition(record, Event.TURN_COMPLETE)
            return
        yield from self._send_text(text)

    def _ended_this_turn(self, record: SessionRecord, last: Any) -> bool:
        """:func:`.recovery.ends_recovered_turn`, with the resume event that started the turn being recovered."""
        started_by = self.store.accepted(self.session_id, record.resumed_by) if record.resumed_by else None
        return recovery.ends_recovered_turn(last, started_by)

    def _unsettled_turn(self, record: SessionRecord) -> int:
        """:func:`.publication.unsettled_turn` of the committed log (its last event)."""
        cursor = record.committed_cursor
        last = self.store.events(self.session_id, cursor - 1, 1) if cursor > 0 else []
        return publication.unsettled_turn(last[-1] if last else None)

    def _heartbeat(self, drain: bool = True) -> Job:
        """Is the runtime's child still the one attached? Then drain once more (a lost push or answer is
        found here within a heartbeat); else recovery."""
        attached = self.attached
        if attached is None:
            return
        info = yield self._execution(AdminCall("which_child", attached.key), 10.0)
        if getattr(info, "generation", None) == attached.generation and getattr(info, "status", None) == "running":
            if drain:
                yield from self._publish(drain=True)
                committed = self.record.committed_cursor if self.record is not None else 0
                # the lazy ack (see .publishing); False: the runtime died while asked, so recovery runs now
                if self.attached is not None and committed > self._acked() and not (yield from self._ack(committed)):
                    yield from self._heartbeat(drain=False)
            return
        log.warning("%s: runtime %s (generation %s) is gone: %r", self.path, attached.runtime_id,
                    attached.generation, info)
        yield from self._recover()
