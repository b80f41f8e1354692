"""The recovery table, over every combination of its inputs."""

from __future__ import annotations

import itertools

from ouroactors.authorities.storage.commit import Committed
from ouroactors.core.generation_text import format_generation
from ouroactors.runtime.coordinator.record import RuntimeAttachment, WorkspaceLease
from ouroactors.runtime.coordinator.recovery import (
    Action,
    Commit,
    Decision,
    Effect,
    ParkReason,
    Probe,
    Reservation,
    attaching,
    decide,
    entering,
    reconciled,
    text_never_sent,
)
from ouroactors.runtime.coordinator.workflow import Event, State, is_terminal

from .support import new_record

RT = RuntimeAttachment(runtime_id="rt-1", generation=3)
PROBES = {
    "none": Probe(),
    "expected": Probe("rt-1", 3),
    "older": Probe("rt-1", 2),
    "newer": Probe("rt-1", 4),
    "other": Probe("rt-9", 3),
}
EFFECTS = {
    "none": (),
    "reconcilable": (Effect("e1", "ambiguous", True), Effect("e2", "started", True)),
    "blind": (Effect("e1", "ambiguous", True), Effect("e3", "ambiguous", False)),
}
ATTACHED = {"attached": RT, "detached": None}


def expected(state: State, commit: Commit, effects: str, probe: str, reservation: Reservation,
             attached: str) -> tuple[Action, ParkReason | None]:
    """The table, spelled out row by row (independently of the implementation's order of tests)."""
    if is_terminal(state):
        return Action.NONE, None
    if commit is Commit.UNKNOWN:
        return Action.PARK, ParkReason.COMMIT_OUTCOME_UNKNOWN
    if state not in (State.RUNNING, State.RECOVERING):
        return Action.IDLE, None
    if probe != "none":
        if attached == "attached" and probe == "expected":
            return Action.ADOPT, None
        return Action.PARK, ParkReason.WRONG_GENERATION
    if effects == "blind":
        return Action.PARK, ParkReason.AMBIGUOUS_EFFECT
    if reservation is Reservation.NOT_RECLAIMABLE:
        return Action.PARK, ParkReason.RESERVATION_NOT_RECLAIMABLE
    return Action.REPLACE, None


CASES = list(itertools.product(State, Commit, EFFECTS, PROBES, Reservation, ATTACHED))


def test_every_combination() -> None:
    assert len(CASES) == 2400
    for case in CASES:
        check_case(*case)


def check_case(state, commit, effects, probe, reservation, attached) -> None:
    record = new_record(state=state, runtime=ATTACHED[attached], last_generation=3, committed_cursor=17,
                        workspace=WorkspaceLease(lease_id="L1", root="/w", fencing_token=5))
    decision = decide(record, commit=commit, effects=EFFECTS[effects], probe=PROBES[probe], reservation=reservation)
    assert (decision.action, decision.reason) == expected(state, commit, effects, probe, reservation, attached)
    if decision.action is Action.ADOPT:
        assert (decision.runtime_id, decision.generation, decision.drain_after) == ("rt-1", 3, 17)
    if decision.action is Action.REPLACE:
        assert decision.generation == 4 and decision.drain_after == 17  # never reuses a generation
        assert decision.reconcile == tuple(e.effect_id for e in EFFECTS[effects])
        assert decision.reclaim == (reservation is Reservation.RECLAIMABLE)
    if decision.action is Action.IDLE:
        assert decision.stop_stray == (probe != "none")
    if decision.action is Action.PARK:
        assert decision.detail  # a visible reason, never silent


def test_park_details_name_the_culprit() -> None:
    record = new_record(state=State.RUNNING, runtime=RT, last_generation=3)
    blind = decide(record, commit=Commit.SETTLED, effects=EFFECTS["blind"], probe=Probe(), reservation=Reservation.HELD)
    assert "e3" in blind.detail and "e1" not in blind.detail
    wrong = decide(record, commit=Commit.SETTLED, effects=(), probe=PROBES["older"], reservation=Reservation.HELD)
    assert f"generation {format_generation(2)}" in wrong.detail  # the same form as everywhere else


def test_decisions_become_durable_through_the_store(store) -> None:
    """Every decision's transitions pass the table and the record rules, on real LMDB."""
    def apply_steps(sid, record, steps):
        for event, changes in steps:
            outcome = store.transition(sid, record.revision, event, **changes)
            assert isinstance(outcome, Committed), outcome
            record = outcome.value
        return record

    for sid, probe, effects, action in (("adopt", PROBES["expected"], (), Action.ADOPT),
                                        ("replace", Probe(), EFFECTS["reconcilable"], Action.REPLACE),
                                        ("park", PROBES["older"], (), Action.PARK),
                                        ("blind", Probe(), EFFECTS["blind"], Action.PARK)):
        created = store.create(new_record(sid, state=State.RUNNING, runtime=RT, last_generation=3))
        assert isinstance(created, Committed)
        record = created.value
        decision = decide(record, commit=Commit.SETTLED, effects=effects, probe=probe, reservation=Reservation.HELD)
        assert decision.action is action
        record = apply_steps(sid, record, entering(record, decision))
        if action is Action.PARK:
            assert record.state is State.PARKED and decision.reason.value in record.reason
            retried = apply_steps(sid, record, ((Event.RETRY, {}),))
            assert retried.state is State.RECOVERING
        elif action is Action.REPLACE:
            assert record.state is State.RECOVERING and record.runtime == RT  # kept for the probe
            record = apply_steps(sid, record, (attaching(decision, "rt-2"),))
            assert (record.state, record.runtime.generation, record.last_generation) == (State.RUNNING, 4, 4)
        else:
            assert record.state is State.RUNNING and record.runtime == RT
    recovering = store.create(new_record("again", state=State.RECOVERING, runtime=RT, last_generation=3,
                                         reason="x"))
    record = recovering.value
    decision = decide(record, commit=Commit.SETTLED, effects=(), probe=PROBES["expected"],
                      reservation=Reservation.HELD)
    adopted = apply_steps("again", record, entering(record, decision))
    assert (adopted.state, adopted.reason) == (State.RUNNING, None)


def test_an_adopted_runtime_is_sent_its_turn_only_when_it_never_got_it() -> None:
    """The coordinator that opened the runtime died after naming it in the record, before sending the text."""
    for state in State:
        for running, produced in itertools.product((False, True), (4, 5, 9)):
            record = new_record(state=state, committed_cursor=5) if state.wait is None else None
            if record is None:
                continue
            never = text_never_sent(record, running=running, produced=produced)
            assert never == (state is State.RUNNING and not running and produced <= 5), (state, running, produced)


def test_a_replacement_waits_for_its_reconcilers_and_parks_on_what_they_could_not_settle() -> None:
    record = new_record(state=State.RUNNING, runtime=RT, last_generation=3, committed_cursor=17)
    replace = decide(record, commit=Commit.SETTLED, effects=EFFECTS["reconcilable"], probe=Probe(),
                     reservation=Reservation.HELD)
    assert replace.action is Action.REPLACE and replace.reconcile == ("e1", "e2")
    assert reconciled(replace, ()) is replace  # every effect settled by its reconciler: replace as decided
    parked = reconciled(replace, ("e2",))
    assert (parked.action, parked.reason) == (Action.PARK, ParkReason.AMBIGUOUS_EFFECT)
    assert "e2" in parked.detail and "e1" not in parked.detail
    assert entering(new_record(state=State.RECOVERING), parked)[-1][0] is Event.PARK  # parked from recovering
    for other in (Decision(Action.ADOPT), Decision(Action.IDLE), Decision(Action.NONE)):
        assert reconciled(other, ("e1",)) is other  # only a replacement is held back by what is unsettled


def test_a_session_pinned_to_a_workflow_this_code_does_not_provide_parks_instead_of_being_replaced() -> None:
    from ouroactors.runtime.coordinator.record import PinnedVersions

    def pinned(workflow: str):
        return new_record(state=State.RUNNING, runtime=RT, last_generation=3,
                          pinned=PinnedVersions(prompt="p", model="m", tools="t", workflow=workflow, policy="x"))

    old = decide(pinned("turn-loop/1"), commit=Commit.SETTLED, effects=(), probe=Probe(), reservation=Reservation.NONE,
                 provided=("turn-loop/2",))
    assert (old.action, old.reason) == (Action.PARK, ParkReason.WORKFLOW_UNAVAILABLE)
    assert "'turn-loop/1'" in old.detail and "'turn-loop/2'" in old.detail
    for workflow in ("turn-loop/2", "default"):  # provided, or pinned before versions were (this code's)
        ok = decide(pinned(workflow), commit=Commit.SETTLED, effects=(), probe=Probe(), reservation=Reservation.NONE,
                    provided=("turn-loop/2",))
        assert ok.action is Action.REPLACE, workflow
    live = decide(pinned("turn-loop/1"), commit=Commit.SETTLED, effects=(), probe=Probe("rt-1", 3),
                  reservation=Reservation.NONE, provided=("turn-loop/2",))
    assert live.action is Action.ADOPT  # a live runtime of the expected identity is adopted: it runs its own code


def test_a_session_whose_tools_changed_parks_instead_of_being_replaced_and_a_live_runtime_is_still_adopted() -> None:
    record = new_record(state=State.RUNNING, runtime=RT, last_generation=3)
    why = "session 's1' is pinned to tool set 'tools/a'; this code's tools for it digest to 'tools/b'"
    parked = decide(record, commit=Commit.SETTLED, effects=(), probe=Probe(), reservation=Reservation.NONE,
                    tools_changed=why)
    assert (parked.action, parked.reason, parked.detail) == (Action.PARK, ParkReason.TOOL_SET_UNAVAILABLE, why)
    assert decide(record, commit=Commit.SETTLED, effects=(), probe=Probe(), reservation=Reservation.NONE,
                  tools_changed=None).action is Action.REPLACE
    assert decide(record, commit=Commit.SETTLED, effects=(), probe=Probe("rt-1", 3), reservation=Reservation.NONE,
                  tools_changed=why).action is Action.ADOPT


def _settled(status: str, cursor: int, committed_ns: int):
    from ouroactors.runtime.coordinator.record import PublishedEvent

    return PublishedEvent(cursor=cursor, kind="turn_settled", turn=2, data={"status": status}, generation=3,
                          committed_ns=committed_ns)


def _accepted(at_cursor: int | None, at_ns: int = 1_000):
    from ouroactors.runtime.coordinator.record import AcceptedEvent

    return AcceptedEvent(event_id="m2", kind="message", actor="bob", channel="cli", wait_id=None,
                         payload={"text": "again"}, from_version=4, at_ns=at_ns, at_cursor=at_cursor)


def test_only_an_ambiguous_settlement_published_after_the_turns_resume_ends_the_recovered_turn() -> None:
    from ouroactors.runtime.coordinator.recovery import ends_recovered_turn

    # the log's order decides, whatever the clock said: settled at cursor 9, the message accepted at cursor 8 or 9
    assert ends_recovered_turn(_settled("ambiguous", 9, committed_ns=500), _accepted(8, at_ns=1_000))
    assert not ends_recovered_turn(_settled("ambiguous", 9, committed_ns=2_000), _accepted(9, at_ns=1_000))
    # any other status moved the session on when it was committed: an earlier turn's
    for status in ("completed", "failed", "interrupted", "max_turns"):
        assert not ends_recovered_turn(_settled(status, 9, 2_000), _accepted(8))
    assert not ends_recovered_turn(_text_event(), _accepted(0))
    # a first turn has no resume event: an ambiguous settlement can only be its own
    assert ends_recovered_turn(_settled("ambiguous", 3, 1), None)
    # an event accepted before at_cursor was kept: its time is all there is
    assert ends_recovered_turn(_settled("ambiguous", 9, 1_000), _accepted(None, at_ns=1_000))
    assert not ends_recovered_turn(_settled("ambiguous", 9, 999), _accepted(None, at_ns=1_000))


def _text_event():
    from ouroactors.runtime.coordinator.record import PublishedEvent

    return PublishedEvent(cursor=9, kind="text", turn=2, data={"status": "ambiguous"}, generation=3, committed_ns=5)
