"""The workflow table: every declared transition, every undeclared one refused, and properties over random runs."""

from __future__ import annotations

import itertools
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ouroactors.runtime.coordinator.workflow import (
    TERMINAL,
    TRANSITIONS,
    Event,
    InvalidTransition,
    State,
    allowed_events,
    apply,
    check,
    holds_runtime,
    is_terminal,
    next_state,
)

S, E = State, Event

# The seed's diagram plus what the issue adds, written out independently of the table.
EXPECTED = {
    (S.SUSPENDED, E.MESSAGE): S.RUNNING, (S.SUSPENDED, E.RESUME): S.RUNNING,
    (S.RUNNING, E.TURN_COMPLETE): S.SUSPENDED, (S.RUNNING, E.SUSPEND): S.SUSPENDED,
    (S.RUNNING, E.WAIT_APPROVAL): S.WAITING_APPROVAL, (S.RUNNING, E.WAIT_TIMER): S.WAITING_TIMER,
    (S.RUNNING, E.WAIT_JOB): S.WAITING_JOB,
    (S.SUSPENDED, E.WAIT_TIMER): S.WAITING_TIMER, (S.SUSPENDED, E.WAIT_JOB): S.WAITING_JOB,
    (S.WAITING_APPROVAL, E.APPROVAL_ANSWERED): S.RUNNING, (S.WAITING_TIMER, E.TIMER_FIRED): S.RUNNING,
    (S.WAITING_JOB, E.JOB_COMPLETED): S.RUNNING,
    (S.WAITING_JOB, E.JOB_EXPIRED): S.SUSPENDED,
    (S.RUNNING, E.RUNTIME_LOST): S.RECOVERING, (S.RECOVERING, E.RECOVERED): S.RUNNING,
    (S.RECOVERING, E.PARK): S.PARKED, (S.PARKED, E.RETRY): S.RECOVERING,
    # an effect of unknown outcome ends the turn: recovery reconciles it, then the settled turn completes
    (S.RUNNING, E.EFFECT_UNKNOWN): S.RECOVERING, (S.RECOVERING, E.TURN_COMPLETE): S.SUSPENDED,
    (S.RUNNING, E.COMPLETE): S.COMPLETED,
    (S.RUNNING, E.FAIL): S.FAILED, (S.RECOVERING, E.FAIL): S.FAILED, (S.PARKED, E.FAIL): S.FAILED,
    **{(s, E.CANCEL): S.CANCELLED for s in S if s not in (S.COMPLETED, S.FAILED, S.CANCELLED)},
}


@pytest.mark.parametrize(("state", "event"), list(itertools.product(S, E)))
def test_every_pair_is_declared_or_refused(state: State, event: Event) -> None:
    want = EXPECTED.get((state, event))
    if want is None:
        with pytest.raises(InvalidTransition) as info:
            next_state(state, event)
        assert (info.value.state, info.value.event, info.value.to) == (state, event, None)
        assert state.value in str(info.value) and event.value in str(info.value)
    else:
        assert next_state(state, event) is want
        check(state, event, want)
        assert apply(state, 4, event) == (want, 5)


def test_table_is_exactly_the_expected_one() -> None:
    assert TRANSITIONS == EXPECTED


def test_check_refuses_a_declared_event_towards_another_target() -> None:
    with pytest.raises(InvalidTransition) as info:
        check(S.RUNNING, E.COMPLETE, S.FAILED)
    assert info.value.to is S.FAILED and "leads to 'completed'" in str(info.value)


def test_invalid_transition_survives_pickling() -> None:
    error = pickle.loads(pickle.dumps(InvalidTransition(S.COMPLETED, E.MESSAGE)))
    assert (error.state, error.event, error.to) == (S.COMPLETED, E.MESSAGE, None)


def test_terminal_states_allow_nothing_and_only_running_holds_a_runtime() -> None:
    assert {S.COMPLETED, S.FAILED, S.CANCELLED} == TERMINAL
    for state in S:
        assert (allowed_events(state) == ()) == is_terminal(state)
        assert holds_runtime(state) == (state is S.RUNNING)


def test_waiting_states_name_their_wait() -> None:
    assert [(s.phase, s.wait) for s in (S.WAITING_APPROVAL, S.WAITING_TIMER, S.WAITING_JOB)] == [
        ("waiting", "approval"), ("waiting", "timer"), ("waiting", "external_job")]
    assert (S.RUNNING.phase, S.RUNNING.wait) == ("running", None)


def test_every_non_terminal_state_is_reachable_and_can_end() -> None:
    reached, frontier = {S.SUSPENDED}, [S.SUSPENDED]
    while frontier:
        state = frontier.pop()
        for event in allowed_events(state):
            target = next_state(state, event)
            if target not in reached:
                reached.add(target)
                frontier.append(target)
    assert reached == set(S)


@given(st.lists(st.sampled_from(list(E)), max_size=60), st.sampled_from(list(S)))
def test_random_event_sequences(events: list[Event], start: State) -> None:
    """Random runs never take an undeclared step; the version strictly grows; terminal states absorb."""
    state, version = start, 0
    for event in events:
        declared = TRANSITIONS.get((state, event))
        try:
            new_state, new_version = apply(state, version, event)
        except InvalidTransition:
            assert declared is None
            continue
        assert declared is new_state
        assert new_version == version + 1
        assert not is_terminal(state)
        state, version = new_state, new_version
    if is_terminal(start):
        assert (state, version) == (start, 0)
