"""The coordinator's count of answered asks across a re-run's marker (waits._approval_wait, execution.repeats)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ouroactors.runtime.coordinator.waits import Waits
from ouroactors.runtime.execution.output import OutputEvent
from ouroactors.runtime.execution.repeats import RESUMED, ask_digest

ASK = {"tool": "edit", "arguments": {"path": "a"}, "call_id": "c2", "reason": "no rule"}


def wait_for(answered: list[str], *events: tuple[str, dict[str, Any]]) -> tuple[Any, list[str]]:
    coordinator = SimpleNamespace(answered_asks=answered)
    record = SimpleNamespace(state_version=4)
    batch = [OutputEvent(i, kind, 1, data) for i, (kind, data) in enumerate(events, start=1)]
    return Waits._approval_wait(coordinator, record, batch)  # type: ignore[arg-type]


def test_a_marker_takes_the_answered_asks_it_names_so_the_same_call_asked_again_waits():
    digest = ask_digest(ASK)
    # the re-run held back the answered ask (named by its marker); the same call asked once more is a new ask
    wait, left = wait_for([digest], (RESUMED, {"not_repeated": 7, "asks": [digest]}), ("approval_needed", ASK))
    assert wait is not None and wait.proposal_digest == digest and left == []
    # without the marker's word the count would take the new ask for the answered one: no wait
    wait, left = wait_for([digest], ("approval_needed", ASK))
    assert wait is None and left == []


def test_a_marker_whose_asks_are_not_a_list_of_digests_takes_nothing_and_crashes_nothing():
    digest = ask_digest(ASK)
    for asks in (5, None, "x" * 64, {"a": 1}, [1, None, ["nested"]], [digest.upper()]):
        wait, left = wait_for([digest], (RESUMED, {"not_repeated": 1, "asks": asks}))
        assert wait is None and left == [digest], asks
