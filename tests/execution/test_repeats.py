"""A turn run again publishes only what its earlier runs did not (execution.repeats): the pure rule."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ouroactors.runtime.execution.output import OutputEvent
from ouroactors.runtime.execution.repeats import RESUMED, Repeats, ask_digest, published_run

ASK = {"tool": "edit", "arguments": {"path": "a"}, "call_id": "c2", "reason": "no rule"}


def log_of(*events: tuple[str, int, dict[str, Any]]) -> list[OutputEvent]:
    return [OutputEvent(i, kind, turn, data) for i, (kind, turn, data) in enumerate(events, start=1)]


def run(repeats: Repeats, emissions: list[tuple[str, dict[str, Any]]], turn: int = 2) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for kind, data in emissions:
        out += [(k, d) for k, _, d in repeats.take(kind, turn, data)]
    return out


FIRST = [("turn_started", {"prompt": "p"}), ("text", {"text": "a"}), ("tool_call", {"call_id": "c1"}),
         ("tool_result", {"call_id": "c1", "status": "ok"}), ("approval_needed", ASK)]


def test_what_the_log_holds_of_a_turn_is_its_latest_runs_events():
    turn1 = [("turn_started", 1, {"prompt": "x"}), ("turn_settled", 1, {"status": "completed"})]
    log = log_of(*turn1, *[(k, 2, d) for k, d in FIRST])
    assert published_run(log, 2) == FIRST and published_run(log, 1) == [(k, d) for k, _, d in turn1]
    resumed = log_of(*[(k, 2, d) for k, d in FIRST], (RESUMED, 2, {"not_repeated": 3, "asks": []}),
                     ("text", 2, {"text": "b"}))
    assert published_run(resumed, 2) == [*FIRST[:3], ("text", {"text": "b"})]  # cut back to 3, then the new run's
    # a log written before the rule: the re-run published from its start again, and that run is the latest
    old = log_of(*[(k, 2, d) for k, d in FIRST], ("turn_started", 2, {"prompt": "p"}), ("text", 2, {"text": "a"}))
    assert published_run(old, 2) == [("turn_started", {"prompt": "p"}), ("text", {"text": "a"})]
    for bad in (-1, "3", True, None, 2.0):  # a marker that names no count cuts nothing
        marked = log_of(*[(k, 2, d) for k, d in FIRST[:2]], (RESUMED, 2, {"not_repeated": bad}))
        assert published_run(marked, 2) == FIRST[:2]
    assert published_run([], 2) == []


def test_a_rerun_holds_back_what_repeats_the_log_and_says_so_before_its_first_new_event():
    answered = ask_digest(ASK)
    repeats = Repeats(2, FIRST, answered=[answered])
    new = [("tool_result", {"call_id": "c2", "status": "ok"}), ("text", {"text": "done"})]
    out = run(repeats, [*FIRST, *new])
    assert out == [(RESUMED, {"not_repeated": 5, "asks": [answered]}), *new]
    assert run(repeats, FIRST[:2]) == FIRST[:2]  # done comparing: everything goes out from now on
    assert Repeats(2, FIRST).take("text", 3, {"text": "z"}) == [("text", 3, {"text": "z"})]  # another turn: as it is


def test_a_run_that_differs_from_the_log_publishes_from_where_it_differs():
    repeats = Repeats(2, FIRST)
    other = [FIRST[0], FIRST[1], ("tool_call", {"call_id": "c9"}), ("tool_result", {"call_id": "c9", "status": "ok"})]
    assert run(repeats, other) == [(RESUMED, {"not_repeated": 2, "asks": []}), *other[2:]]
    # at once different: the marker says nothing was repeated, and the whole run follows
    assert run(Repeats(2, FIRST), [("turn_started", {"prompt": "q"})]) == [
        (RESUMED, {"not_repeated": 0, "asks": []}), ("turn_started", {"prompt": "q"})]
    assert run(Repeats(2, []), FIRST) == FIRST  # nothing published: nothing to say


def test_an_ask_is_held_back_only_when_it_is_answered_and_each_answer_once():
    assert run(Repeats(2, FIRST), FIRST) == [(RESUMED, {"not_repeated": 4, "asks": []}), ("approval_needed", ASK)]
    twice = [*FIRST, ("approval_needed", ASK)]
    out = run(Repeats(2, twice, answered=[ask_digest(ASK)]), twice)
    assert out == [(RESUMED, {"not_repeated": 5, "asks": [ask_digest(ASK)]}), ("approval_needed", ASK)]


def test_a_published_ask_the_run_does_not_make_is_passed_over():
    """The call settled since it was asked (approved, run, recorded): the re-run does not decide it again."""
    logged = [*FIRST, ("tool_result", {"call_id": "c2", "status": "ok"}), ("text", {"text": "b"})]
    rerun = [*FIRST[:4], ("tool_result", {"call_id": "c2", "status": "ok"}), ("text", {"text": "b"}),
             ("turn_settled", {"status": "completed"})]
    assert run(Repeats(2, logged), rerun) == [(RESUMED, {"not_repeated": 7, "asks": []}),
                                              ("turn_settled", {"status": "completed"})]
    # passed over only as far as the next event matches: an ask before a different event is no repeat
    assert run(Repeats(2, logged), [*FIRST[:4], ("text", {"text": "z"})]) == [
        (RESUMED, {"not_repeated": 4, "asks": []}), ("text", {"text": "z"})]


def test_a_steer_delivered_again_at_the_same_point_is_a_repeat():
    steered = ("steered", {"text": "be brief", "at_call": 1, "redelivered": False})
    logged = [*FIRST[:3], steered, ("text", {"text": "ok"})]
    again = ("steered", {"text": "be brief", "at_call": 1, "redelivered": True})
    assert run(Repeats(2, logged), [*FIRST[:3], again, ("text", {"text": "ok"})]) == []
    elsewhere = ("steered", {"text": "be brief", "at_call": 2, "redelivered": True})  # another point: news
    assert run(Repeats(2, logged), [*FIRST[:3], elsewhere]) == [(RESUMED, {"not_repeated": 3, "asks": []}),
                                                                 elsewhere]


KINDS = st.sampled_from(["text", "tool_call", "tool_result", "steered"])
EVENTS = st.lists(st.tuples(KINDS, st.fixed_dictionaries({"v": st.integers(0, 2)})), min_size=1, max_size=8)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(EVENTS, st.integers(0, 10)), min_size=1, max_size=5))
def test_runs_cut_short_leave_a_log_that_holds_the_latest_run_with_no_gap(runs):
    """Any number of runs of a turn, each emitting what it emits and cut short anywhere (a crash): the log's latest
    run is always the prefix the last run emitted, and a run that repeats what the log holds publishes nothing new."""
    log: list[OutputEvent] = []
    for emissions, cut in runs:
        published = published_run(log, 2)
        repeats = Repeats(2, published) if published else None
        emitted = [("turn_started", {"prompt": "p"}), *emissions][:cut]
        out = [e for kind, data in emitted
               for e in (repeats.take(kind, 2, data) if repeats else [(kind, 2, data)])]
        log += [OutputEvent(len(log) + 1 + i, kind, turn, data) for i, (kind, turn, data) in enumerate(out)]
        after = published_run(log, 2)
        assert after[:len(emitted)] == emitted  # nothing this run emitted is missing
        if out:
            assert after == emitted  # what it published makes the log's latest run exactly its own
        if emitted == published[:len(emitted)]:
            assert out == []  # a pure repeat publishes nothing
