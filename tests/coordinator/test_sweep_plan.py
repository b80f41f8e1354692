"""The boot sweep's batch plan over every kind of recoverable session (pure: no actor, no store)."""

from __future__ import annotations

from ouroactors.runtime.coordinator import recovery
from ouroactors.runtime.coordinator.record import Recoverable, RuntimeAttachment, WorkspaceLease
from ouroactors.runtime.coordinator.sweep import needs_record, plan
from ouroactors.runtime.coordinator.workflow import Event, State

from .support import new_record

LOST = RuntimeAttachment(runtime_id="rt", generation=7)
LEASE = WorkspaceLease(lease_id="lease-1", root="/w", fencing_token=1)


def test_each_session_goes_where_the_recovery_table_sends_it() -> None:
    records = {
        "idle": new_record("idle", state=State.SUSPENDED),
        "parked": new_record("parked", state=State.PARKED, reason="earlier"),
        "job": new_record("job", state=State.WAITING_JOB),
        "timer": new_record("timer", state=State.WAITING_TIMER),
        "approval": new_record("approval", state=State.WAITING_APPROVAL),
        "stray": new_record("stray", state=State.SUSPENDED),  # its last runtime still lives: to be stopped
        "adopt": new_record("adopt", state=State.RUNNING, runtime=RuntimeAttachment(runtime_id="rt2", generation=9)),
        "blind": new_record("blind", state=State.RUNNING, runtime=LOST),  # an ambiguous effect, no reconciler
        "unprovable": new_record("unprovable", state=State.RUNNING, runtime=LOST, workspace=LEASE),
        "replace": new_record("replace", state=State.RUNNING, runtime=LOST, workspace=LEASE),
        "unread": new_record("unread", state=State.RECOVERING),  # its whole record could not be read
    }
    found = [Recoverable.of(r) for r in records.values()]
    assert {f.session_id for f in found if needs_record(f)} == {"adopt", "blind", "unprovable", "replace", "unread"}
    decided = plan(found, records={k: v for k, v in records.items() if k != "unread"}, live=frozenset({9, 11}),
                   located={"stray": 11, "blind": 7},
                   unsettled={"blind": (recovery.Effect("blind/t1/c", "ambiguous", False),)},
                   reservations={"unprovable": recovery.Reservation.NOT_RECLAIMABLE,
                                 "replace": recovery.Reservation.RECLAIMABLE})
    assert sorted(decided.idle) == ["idle", "parked"]
    # a job's wait has an expiry to apply after the restart: its coordinator is started, as a timer's is
    assert sorted(decided.start) == ["adopt", "approval", "job", "replace", "stray", "timer", "unread"]
    parks = {record.session_id: steps for record, steps in decided.park}
    assert sorted(parks) == ["blind", "unprovable"]
    for sid, reason in (("blind", "ambiguous_effect"), ("unprovable", "reservation_not_reclaimable")):
        (lost, _), (park, changes) = parks[sid]
        assert (lost, park) == (Event.RUNTIME_LOST, Event.PARK) and changes["reason"].startswith(reason)
