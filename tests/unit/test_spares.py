"""The checks before a coordinator uses a spare runtime it was offered (ouroactors.runtime.coordinator.spares)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ouroactors.runtime.coordinator.messages import (
    ApprovalAnswered,
    CompleteJob,
    ControlSession,
    SendMessage,
    SteerSession,
)
from ouroactors.runtime.coordinator.spares import (
    SPARE_MAX_AGE_S,
    SpareChild,
    child_refusal,
    may_start_a_runtime,
    status_refusal,
    take_fresh,
)
from ouroactors.runtime.coordinator.workflow import State

HERE, ELSEWHERE = object(), object()
SPARE = SimpleNamespace(key="runtime#4", generation=40, address=HERE)


def child(**changes):
    return SimpleNamespace(**{"status": "running", "generation": 40, "address": HERE, **changes})


def status(**changes):
    return SimpleNamespace(**{"session_id": None, "generation": 40, **changes})


def test_a_live_unopened_child_newer_than_the_session_is_used():
    assert child_refusal(SPARE, child(), last_generation=39) is None
    assert status_refusal(SPARE, status()) is None
    assert child_refusal(SPARE, SpareChild("runtime#4", "running", 40, HERE), 0) is None


@pytest.mark.parametrize(("answer", "last", "why"), [
    (child(status="stopped"), 0, "not running"),
    (None, 0, "not running"),  # the supervisor did not answer
    (TimeoutError("no answer"), 0, "not running"),
    (child(generation=41), 0, "generation 41, not 40"),  # restarted since the offer: another process
    (child(address=ELSEWHERE), 0, "not at the address offered"),  # a forged address
    (child(), 40, "not above the session's last runtime"),
    (child(), 99, "not above the session's last runtime"),
])
def test_the_supervisors_answer_refuses(answer, last, why):
    assert why in child_refusal(SPARE, answer, last)


@pytest.mark.parametrize(("answer", "why"), [
    (None, "did not say"),
    (status(generation=7), "generation 7, not 40"),
    (status(session_id="other"), "already serves session 'other'"),
])
def test_the_runtimes_own_answer_refuses(answer, why):
    assert why in status_refusal(SPARE, answer)


def test_the_oldest_spare_young_enough_is_taken_and_older_ones_dropped():
    now = 1000.0
    spares = [("old", now - SPARE_MAX_AGE_S - 1), ("a", now - 5), ("b", now - 1)]
    assert take_fresh(spares, now) == "a" and spares == [("b", now - 1)]
    assert take_fresh(spares, now) == "b" and take_fresh(spares, now) is None
    gone = [("x", now - SPARE_MAX_AGE_S)]
    assert take_fresh(gone, now) is None and gone == []


@pytest.mark.parametrize(("request_", "state", "offered"), [
    (SendMessage("s", "hi", "user:x", "m1"), State.SUSPENDED, True),
    (SendMessage("s", "hi", "user:x", "m1"), State.RUNNING, False),  # busy: the message is refused, no runtime
    (SendMessage("s", "hi", "user:x", "m1"), State.WAITING_APPROVAL, False),
    (ApprovalAnswered("s", "a1"), State.WAITING_APPROVAL, True),
    (ApprovalAnswered("s", "a1"), State.SUSPENDED, False),
    (CompleteJob("s", "j1", "user:x", "e1"), State.WAITING_JOB, True),
    (CompleteJob("s", "j1", "user:x", "e1"), State.WAITING_TIMER, False),
    (ControlSession("s", "resume", "user:x"), State.SUSPENDED, True),
    (ControlSession("s", "resume", "user:x"), State.PARKED, True),
    (ControlSession("s", "cancel", "user:x"), State.SUSPENDED, False),
    (ControlSession("s", "suspend", "user:x"), State.RUNNING, False),
    (SteerSession("s", "hi", "user:x"), State.RUNNING, False),
    (SendMessage("s", "hi", "user:x", "m1"), State.COMPLETED, False),
])
def test_a_spare_is_offered_only_with_a_command_that_may_start_a_runtime(request_, state, offered):
    assert may_start_a_runtime(request_, state) is offered
