"""Recovery's replacement of a lost runtime, when the workspace crashes answering its lease (no actor system).

``AuthorityCrashed`` means rest_for_one is restarting the workspace and, after it, this coordinator: the next
incarnation recovers the session again. Recovery that parked the session on it instead ("replacement refused")
left it parked for that next incarnation, and a turn nothing prevented waited for an operator's ``resume`` (seen in
1 of 4 runs of ``test_actor_refused_commits``'s reclaim test, when the crash answer reached the coordinator before
its termination did). Any other refusal of the replacement still parks, with the reason.
"""

from __future__ import annotations

from collections.abc import Generator
from types import SimpleNamespace
from typing import Any

import pytest

from ouroactors.core.errors import ActorCrashed
from ouroactors.runtime.coordinator import recovering, recovery
from ouroactors.runtime.coordinator.commands import CoordinatorError
from ouroactors.runtime.coordinator.leasing import AuthorityCrashed, lease_refused
from ouroactors.runtime.coordinator.workflow import Event


class Replacing(recovering.Recovering):
    """Just what ``_replace`` uses: a store with no events, a turn to re-run, and a runtime start that fails."""

    session_id = "s1"

    def __init__(self, failure: BaseException) -> None:
        self.failure = failure
        self.store = SimpleNamespace(events=lambda *args: [])  # type: ignore[assignment]
        self.transitions: list[tuple[Event, dict[str, Any]]] = []

    def _turn_context(self, record: Any) -> Any:
        return SimpleNamespace(approvals=(), text="go")

    def _unsettled_turn(self, record: Any) -> int:
        return 0

    def _start_runtime(self, start: int, reclaim: Any = None, answered: Any = (), tail: int = 0
                       ) -> Generator[Any, Any, Any]:
        raise self.failure
        yield  # a generator, as the real one is

    def _transition(self, record: Any, event: Event, **changes: Any) -> Any:
        self.transitions.append((event, changes))
        return record


@pytest.fixture(autouse=True)
def nothing_kept(monkeypatch):
    monkeypatch.setattr(recovering, "get_runtime", lambda store, session_id: None)
    monkeypatch.setattr(recovering, "get_lease", lambda store, session_id: None)


def replace(coordinator: Replacing) -> None:
    job = coordinator._replace(SimpleNamespace(committed_cursor=3), recovery.Decision(recovery.Action.REPLACE))
    next(job)  # the failing start raises before its first ask


def test_a_workspace_crash_on_the_replacements_lease_stops_the_coordinator_and_parks_nothing():
    coordinator = Replacing(lease_refused(ActorCrashed("agent/workspace", "commit outcome unknown")))
    assert isinstance(coordinator.failure, AuthorityCrashed)
    with pytest.raises(AuthorityCrashed):
        replace(coordinator)
    assert coordinator.transitions == []  # nothing durable: the next incarnation finds the session as it was


def test_a_refused_replacement_still_parks_the_session_with_the_reason():
    coordinator = Replacing(CoordinatorError("workspace lease refused: LeaseConflict"))
    with pytest.raises(StopIteration):
        replace(coordinator)
    [(event, changes)] = coordinator.transitions
    assert event is Event.PARK
    assert changes["reason"].startswith(recovery.ParkReason.RESERVATION_NOT_RECLAIMABLE.value)
    assert "LeaseConflict" in changes["reason"]
