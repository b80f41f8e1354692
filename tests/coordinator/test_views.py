"""What a user is shown of a session: its next valid transitions come from the workflow table (seed 001)."""

from __future__ import annotations

from ouroactors.runtime.coordinator.views import view_of
from ouroactors.runtime.coordinator.workflow import TRANSITIONS, State

from .support import new_record


def test_the_view_names_every_transition_the_table_declares_from_the_state_and_nothing_else() -> None:
    for state in State:
        view = view_of(new_record(state=state))
        declared = {event.value for (source, event) in TRANSITIONS if source is state}
        assert set(view.next_events) == declared and len(view.next_events) == len(declared)


def test_a_waiting_session_may_be_answered_expired_or_cancelled_and_a_terminal_one_nothing() -> None:
    assert view_of(new_record(state=State.WAITING_JOB)).next_events == ("job_completed", "job_expired", "cancel")
    assert view_of(new_record(state=State.SUSPENDED)).next_events[:2] == ("message", "resume")
    assert view_of(new_record(state=State.COMPLETED)).next_events == ()
