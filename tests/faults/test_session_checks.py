"""The session invariants on hand-made histories: a clean one passes, each planted break is named.

Histories are built by :func:`clean` — the crash-free demo scenario's shape (turn 1: started, a tool call and
its result, an approval, text, settled) read by one subscriber in two batches — and broken one fact at a time.
A hypothesis property checks that any split of a clean log into reads, and any reconnect from the last cursor
received, passes (b), and that dropping or repeating one event in a stream is caught.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ouroactors.faults.session_checks import (
    SESSION_CHECKS,
    Read,
    Reference,
    Seen,
    SessionHistory,
    View,
    carried_out_of_turn,
    check_session,
    cursor_went_back,
    model_asked_again,
    published_beyond_commit,
    published_twice,
    resume_twice,
    steer_dropped,
    terminal_diverged,
)

GEN = 5
KINDS = ("turn_started", "text", "tool_call", "tool_result", "approval_needed", "text", "turn_settled")


def log(generation: int = GEN, turn: int = 1, start: int = 1) -> list[Seen]:
    return [Seen(start + i, kind, turn, {"status": "completed"} if kind == "turn_settled" else {"i": i}, generation)
            for i, kind in enumerate(KINDS)]


def clean(**changes: Any) -> SessionHistory:
    events = log()
    reads = [Read("s", 0, tuple(events[:3]), 3, "running"), Read("s", 3, tuple(events[3:]), 7, "completed"),
             Read("s", 7, (), 7, "completed")]
    views = [View(0, 0, 1, "suspended"), View(3, 1, 4, "running"), View(7, 2, 7, "completed")]
    history = SessionHistory("sess", "completed", 7, None, events, reads, views,
                             [{"event_id": "m1", "kind": "message"}], [], [("m1", "done")],
                             Reference("completed", "completed"))
    return dataclasses.replace(history, **changes)


def names(violations: list[Any]) -> set[str]:
    return {v.invariant for v in violations}


def test_a_clean_history_passes_every_check() -> None:
    assert check_session(clean()) == []


def test_unknown_check_names_are_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="published-beyond-commit"):
        check_session(clean(), ["no-such-check"])


# -- (a) nothing published beyond the committed cursor ---------------------------------------------------------

def test_a_subscriber_given_an_event_beyond_its_reads_committed_cursor_is_caught() -> None:
    h = clean()
    h.reads[0] = dataclasses.replace(h.reads[0], committed=2)  # the batch held cursor 3 while 2 was committed
    found = published_beyond_commit(h)
    assert [v.subject for v in found] == ["sess@3"]


def test_an_event_published_but_never_committed_is_caught() -> None:
    ghost = Seen(8, "text", 1, {"i": 99}, GEN)
    h = clean()
    h.reads[2] = dataclasses.replace(h.reads[2], events=(ghost,), committed=8)
    found = published_beyond_commit(h)
    assert "not in the durable log" in " ".join(v.message for v in found)
    assert any("committed 7 in the end" in v.message for v in found)


def test_an_event_that_differs_from_the_durable_one_at_its_cursor_is_caught() -> None:
    h = clean()
    changed = dataclasses.replace(h.reads[0].events[1], kind="tool_result")
    h.reads[0] = dataclasses.replace(h.reads[0], events=(h.reads[0].events[0], changed, h.reads[0].events[2]))
    assert [v.subject for v in published_beyond_commit(h)] == ["sess@2"]


def test_a_log_that_runs_past_the_records_cursor_is_caught() -> None:
    assert names(published_beyond_commit(clean(committed_cursor=6))) == {"published-beyond-commit"}


# -- (b) cursors never go back -----------------------------------------------------------------------------------

def test_a_committed_cursor_seen_to_decrease_is_caught() -> None:
    h = clean()
    h.views.append(View(5, 2, 8, "completed"))
    found = cursor_went_back(h)
    assert len(found) == 1 and "committed_cursor 5 after 7" in found[0].message


def test_a_state_version_seen_to_decrease_is_caught() -> None:
    h = clean()
    h.views.insert(2, View(3, 0, 5, "running"))
    assert any("state_version 0 after 1" in v.message for v in cursor_went_back(h))


def test_an_event_delivered_twice_to_one_subscriber_is_caught() -> None:
    h = clean()
    again = h.reads[0].events[-1]
    h.reads[1] = dataclasses.replace(h.reads[1], after=2, events=(again, *h.reads[1].events))
    found = cursor_went_back(h)
    assert any("again" in v.message for v in found) and any("resumed after 2" in v.message for v in found)


def test_a_gap_in_a_subscribers_stream_is_caught() -> None:
    h = clean()
    h.reads[1] = dataclasses.replace(h.reads[1], events=h.reads[1].events[1:])
    assert any("a gap" in v.message for v in cursor_went_back(h))


@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(0, len(KINDS)), max_size=5), empty=st.lists(st.booleans(), max_size=3),
       fault=st.sampled_from(["none", "drop", "repeat"]), where=st.integers(0, len(KINDS) - 1))
def test_any_split_of_a_clean_stream_passes_and_one_dropped_or_repeated_event_is_caught(
        cuts: list[int], empty: list[bool], fault: str, where: int) -> None:
    events = log()
    bounds = sorted({0, len(events), *cuts})
    stream = [events[a:b] for a, b in itertools.pairwise(bounds)] + [[] for flag in empty if flag]
    reads, after = [], 0
    for part in stream:
        reads.append(Read("s", after, tuple(part), part[-1].cursor if part else after))
        after = part[-1].cursor if part else after
    if fault == "drop":
        flat = [e for e in events if e.cursor != where + 1]
    elif fault == "repeat":
        flat = [*events[:where + 1], events[where], *events[where + 1:]]
    else:
        flat = events
    broken = [Read("s", 0, tuple(flat), len(KINDS))]
    assert cursor_went_back(clean(reads=reads)) == []
    caught = cursor_went_back(clean(reads=broken))
    assert (caught == []) == (fault == "none" or (fault == "drop" and where == len(KINDS) - 1))


# -- (c) the same terminal state as the crash-free run, or parked with a reason ------------------------------------

def test_a_session_that_failed_where_the_reference_completed_is_caught() -> None:
    found = terminal_diverged(clean(state="failed", reason="no runtime for the turn"))
    assert len(found) == 1 and "'failed'" in found[0].message and "'completed'" in found[0].message


def test_a_session_stuck_running_is_caught() -> None:
    assert names(terminal_diverged(clean(state="running"))) == {"terminal-diverged"}


def test_parked_with_a_reason_is_visible_and_allowed_but_parked_without_one_is_caught() -> None:
    assert terminal_diverged(clean(state="parked", reason="ambiguous_effect: sess/t1/call (no reconciler)")) == []
    assert names(terminal_diverged(clean(state="parked", reason="  "))) == {"terminal-diverged"}


def test_a_last_turn_settled_otherwise_than_in_the_reference_is_caught() -> None:
    events = log()
    events[-1] = dataclasses.replace(events[-1], data={"status": "interrupted"})
    found = terminal_diverged(clean(log=events))
    assert len(found) == 1 and "interrupted" in found[0].message


# -- (d) no resume event acted on twice ---------------------------------------------------------------------------

def test_an_event_id_accepted_twice_is_caught() -> None:
    h = clean(accepted=[{"event_id": "m1", "kind": "message"}, {"event_id": "m1", "kind": "message"}])
    assert any("accepted 2 times" in v.message for v in resume_twice(h))


def test_a_retry_the_client_was_told_was_taken_again_is_caught_and_a_refused_retry_is_fine() -> None:
    assert resume_twice(clean(sent=[("m1", "error"), ("m1", "rejected:duplicate")])) == []
    found = resume_twice(clean(sent=[("m1", "error"), ("m1", "done"), ("m1", "done")]))
    assert len(found) == 1 and "told 2 times" in found[0].message


def test_a_second_turn_started_by_one_runtime_is_caught_but_a_replacements_rerun_is_not() -> None:
    rerun = log() + log(generation=GEN + 1, start=len(KINDS) + 1)  # a replacement re-ran turn 1: allowed
    assert resume_twice(clean(log=rerun, committed_cursor=len(rerun))) == []
    answered = log() + log(generation=GEN + 1, turn=2, start=len(KINDS) + 1)  # an answer's turn: a new runtime
    accepted = [{"event_id": "m1", "kind": "message"}, {"event_id": "a1", "kind": "approval"}]
    assert resume_twice(clean(log=answered, committed_cursor=len(answered), accepted=accepted)) == []
    twice = log() + log(turn=2, start=len(KINDS) + 1)
    found = resume_twice(clean(log=twice, committed_cursor=len(twice), accepted=accepted))
    assert len(found) == 1 and "started 2 turns [1, 2]" in found[0].message


def test_a_new_turn_for_a_message_whose_turn_already_ran_is_caught() -> None:
    # a replacement runtime ran the message again as turn 2 after turn 1 had settled in its journal
    again = log()[:4] + log(generation=GEN + 1, turn=2, start=5)
    found = resume_twice(clean(log=again, committed_cursor=len(again)))
    assert len(found) == 1 and "2 turns started ([1, 2]) for 1 accepted resume events" in found[0].message


def test_every_check_is_registered_by_its_invariant_name() -> None:
    assert set(SESSION_CHECKS) == {"published-beyond-commit", "cursor-went-back", "terminal-diverged",
                                   "resume-twice", "carried-out-of-turn", "model-asked-again", "steer-dropped",
                                   "published-twice", "published-after-cancel", "turn-left-unsettled",
                                   "journal-unfaithful"}


def test_a_carried_tool_call_is_fine_but_a_carried_turn_end_or_approval_is_caught() -> None:
    events = [dataclasses.replace(e, carried=e.kind in ("turn_started", "tool_call", "tool_result")) for e in log()]
    assert check_session(clean(log=events)) == []
    for kind in ("turn_settled", "approval_needed"):
        bad = [dataclasses.replace(e, carried=e.kind == kind) for e in log()]
        found = carried_out_of_turn(clean(log=bad))
        assert len(found) == 1 and repr(kind) in found[0].message


def test_a_zombie_s_carry_after_its_replacement_s_events_is_caught() -> None:
    events = log()[:4] + [dataclasses.replace(e, generation=GEN + 1) for e in log(start=5)[:2]]
    events.append(Seen(7, "tool_call", 1, {"i": 9}, GEN, carried=True))  # the old generation, after the new one
    found = carried_out_of_turn(clean(log=events, committed_cursor=7))
    assert len(found) == 1 and "no longer attached" in found[0].message


def journal_of(*runs: list[tuple[str, Any]], turn: int = 1) -> list[dict[str, Any]]:
    """Journal outline records: each run a turn_started, then ("call", digest) / ("answer", ok) / ("gap", None)."""
    out: list[dict[str, Any]] = []
    for run in runs:
        out.append({"seq": len(out), "turn": turn, "kind": "turn_started"})
        index = 0
        for what, value in run:
            if what == "call":
                out.append({"seq": len(out), "turn": turn, "kind": "model_call", "index": index, "digest": value})
            elif what == "answer":
                out.append({"seq": len(out), "turn": turn, "kind": "model_result", "index": index, "ok": value})
                index += 1
            else:
                out.append({"seq": len(out), "turn": None, "kind": what})
    return out


FIRST_RUN = [("call", "d0"), ("answer", True), ("call", "d1"), ("answer", True), ("call", "d2")]


def test_a_rerun_that_took_its_recorded_answers_passes_and_one_that_asked_again_is_caught() -> None:
    rerun = [("call", "d0"), ("answer", True), ("call", "d1"), ("answer", True), ("call", "d2"), ("answer", True)]
    journal = journal_of(FIRST_RUN, rerun)
    assert check_session(clean(journal=journal, reused=[(1, 0), (1, 1)])) == []
    found = model_asked_again(clean(journal=journal, reused=[(1, 0)]))  # call 1 was asked of the model again
    assert [v.subject for v in found] == ["sess/t1/call1"] and "asked again" in found[0].message


def test_a_rerun_whose_request_differs_or_whose_answer_was_never_durable_may_ask() -> None:
    differs = [("call", "d0"), ("answer", True), ("call", "other"), ("answer", True)]
    assert model_asked_again(clean(journal=journal_of(FIRST_RUN, differs), reused=[(1, 0)])) == []
    errored = [("call", "d0"), ("answer", False)]  # the first run's answer was an error: asking again is right
    assert model_asked_again(clean(journal=journal_of(errored, [("call", "d0"), ("answer", True)]))) == []
    after_gap = journal_of(FIRST_RUN, [("gap", None), ("call", "d0"), ("answer", True)])
    assert model_asked_again(clean(journal=after_gap)) == []  # the gap may have lost what it needed: not judged


def test_every_rerun_counts_and_a_third_run_takes_the_seconds_answers() -> None:
    second = [("call", "d0"), ("answer", True), ("call", "d1b"), ("answer", True)]  # asked anew from call 1
    third = [("call", "d0"), ("answer", True), ("call", "d1b"), ("answer", True)]
    journal = journal_of(FIRST_RUN, second, third)
    assert model_asked_again(clean(journal=journal, reused=[(1, 0), (1, 0), (1, 1)])) == []
    found = model_asked_again(clean(journal=journal, reused=[(1, 0), (1, 1)]))
    assert [v.subject for v in found] == ["sess/t1/call0"] and "2 re-run(s)" in found[0].message


def test_records_without_an_int_call_index_are_no_evidence_and_never_crash_the_check() -> None:
    journal = journal_of(FIRST_RUN, [("call", "d0"), ("answer", True)])
    for record in journal[1:3]:
        record["index"] = None if record["kind"] == "model_call" else "0"
    journal.append({"seq": 99, "turn": 1, "kind": "model_call", "index": True, "digest": "d0"})
    assert model_asked_again(clean(journal=journal, reused=[(1, 0)])) == []


def steer_journal(*items: tuple[str, int | None, str | None]) -> list[dict[str, Any]]:
    """Journal outline records (kind, turn, steer id) in order, numbered."""
    return [{"seq": i, "turn": turn, "kind": kind, "id": steer_id} for i, (kind, turn, steer_id) in enumerate(items)]


def test_an_accepted_steer_its_settled_turn_delivered_passes_and_one_it_did_not_is_caught() -> None:
    delivered = steer_journal(("turn_started", 1, None), ("steer_received", 1, "k1"), ("steer", 1, "k1"),
                              ("turn_settled", 1, None))
    assert check_session(clean(journal=delivered)) == []
    dropped = steer_journal(("turn_started", 1, None), ("steer_received", 1, "k1"), ("steer_received", 1, "k2"),
                            ("steer", 1, "k2"), ("turn_settled", 1, None))
    found = steer_dropped(clean(journal=dropped))
    assert [v.subject for v in found] == ["sess/t1/k1"] and "journaled at seq 1" in found[0].message
    elsewhere = steer_journal(("steer_received", 1, "k1"), ("turn_settled", 1, None), ("steer", 2, "k1"),
                              ("turn_settled", 2, None))  # delivered in another turn: not the turn it was taken for
    assert names(steer_dropped(clean(journal=elsewhere))) == {"steer-dropped"}


def test_a_lost_runs_steer_delivered_by_the_rerun_passes_and_an_unsettled_turn_is_not_judged() -> None:
    rerun = steer_journal(("turn_started", 1, None), ("steer_received", 1, "k1"), ("turn_started", 1, None),
                          ("steer", 1, "k1"), ("turn_settled", 1, None))
    assert steer_dropped(clean(journal=rerun)) == []
    unsettled = steer_journal(("turn_started", 1, None), ("steer_received", 1, "k1"))  # parked, or still running
    assert steer_dropped(clean(journal=unsettled)) == []


def test_a_turn_a_gap_or_cut_may_have_lost_a_delivery_of_is_not_judged() -> None:
    for loss in ("gap", "truncated"):
        before = steer_journal(("steer_received", 1, "k1"), (loss, None, None), ("turn_settled", 1, None))
        assert steer_dropped(clean(journal=before)) == []
        after = steer_journal(("turn_settled", 1, None), (loss, None, None), ("steer_received", 2, "k2"),
                              ("turn_settled", 2, None))  # the gap names records lost before it: turn 2's own
        assert steer_dropped(clean(journal=after)) == []
    later = steer_journal(("gap", None, None), ("turn_settled", 1, None), ("steer_received", 2, "k2"),
                          ("turn_settled", 2, None))  # a turn wholly after the loss is judged
    assert [v.subject for v in steer_dropped(clean(journal=later))] == ["sess/t2/k2"]


def test_steer_records_without_an_id_or_an_int_turn_are_no_evidence_and_never_crash_the_check() -> None:
    journal = steer_journal(("steer_received", 1, None), ("steer_received", "1", "k9"), ("steer", 1, None),  # type: ignore[arg-type]
                            ("turn_settled", 1, None))
    journal.append({"seq": 9, "turn": 1, "kind": "steer_received", "id": 7})
    assert steer_dropped(clean(journal=journal)) == []


def test_a_rerun_that_held_back_its_repeats_passes_and_one_that_published_them_again_is_caught() -> None:
    first = log()[:5]  # turn 1 up to its approval, then a new runtime goes on with the turn
    marker = Seen(6, "turn_resumed", 1, {"not_repeated": 5, "asks": ["d"]}, GEN + 1)
    rest = [dataclasses.replace(e, cursor=e.cursor + 1, generation=GEN + 1) for e in log()[5:]]
    held = [*first, marker, *rest]
    assert published_twice(clean(log=held)) == [] and carried_out_of_turn(clean(log=held)) == []
    # a run that published the turn from its start again
    again = [*first, *[dataclasses.replace(e, cursor=e.cursor + 5, generation=GEN + 1) for e in log()]]
    found = published_twice(clean(log=again, committed_cursor=len(again)))
    assert [v.subject for v in found] == ["sess/t1"] and "turn_started at cursors [1, 6]" in found[0].message
    # a marker followed by the very event it says the log holds at that place
    early = dataclasses.replace(marker, data={"not_repeated": 2, "asks": []})
    repeat = [*first, early, dataclasses.replace(first[2], cursor=7, generation=GEN + 1)]
    found = published_twice(clean(log=repeat, committed_cursor=len(repeat)))
    assert [v.subject for v in found] == ["sess@7"] and "to be held back" in found[0].message
    # an unanswered ask published again after the marker is by design
    ask = [*first, dataclasses.replace(early, data={"not_repeated": 4, "asks": []}),
           dataclasses.replace(first[4], cursor=7, generation=GEN + 1)]
    assert published_twice(clean(log=ask, committed_cursor=len(ask))) == []


def test_a_steer_published_again_after_a_marker_is_a_repeat_whichever_run_delivered_it() -> None:
    """The check's equality is the runtime's (execution.repeats.event_key): a re-run's delivery of the same steer at
    the same point, flagged ``redelivered``, published after the marker, is the repeat it should have held back."""
    first = [Seen(1, "turn_started", 1, {"prompt": "p"}, GEN), Seen(2, "steered", 1, {"text": "s", "at_call": 1,
                                                                                     "redelivered": False}, GEN)]
    again = [*first, Seen(3, "turn_resumed", 1, {"not_repeated": 1, "asks": []}, GEN + 1),
             Seen(4, "steered", 1, {"text": "s", "at_call": 1, "redelivered": True}, GEN + 1)]
    found = published_twice(clean(log=again, committed_cursor=len(again)))
    assert [v.subject for v in found] == ["sess@4"]


# -- (i) nothing after an answered cancel --------------------------------------------------------------------------

def cancelled(at: int, **changes: Any) -> SessionHistory:
    """A run whose cancel was answered done at cursor ``at`` (the log's first ``at`` events: where it landed, the
    last of them the turn's settlement — the runtime's, or the one the cancel committed)."""
    events = log()[:at]
    if events and events[-1].kind != "turn_settled":
        events[-1] = Seen(at, "turn_settled", 1, {"status": "cancelled"}, GEN)
    return clean(**{"state": "cancelled", "committed_cursor": at, "log": events, "reads": [Read("s", 0, tuple(events),
                 at, "cancelled")], "views": [], "reference": Reference("cancelled", "interrupted"),
                 "cancelled_at": at, **changes})


@pytest.mark.parametrize("at", [0, 3, 5, 7])
def test_a_cancel_that_landed_anywhere_ends_the_log_there(at) -> None:
    """Wherever it landed (before the turn's end was published, in an approval wait…), a cancelled session whose log
    ends where the cancel was answered is clean — its last settlement is not compared with the reference's."""
    assert check_session(cancelled(at)) == []


def test_an_event_committed_after_the_cancel_was_answered_is_caught() -> None:
    from ouroactors.faults.session_checks import published_after_cancel

    late = cancelled(3, committed_cursor=4, log=log()[:4])
    assert names(published_after_cancel(late)) == {"published-after-cancel"}
    assert names(published_after_cancel(cancelled(3, state="suspended"))) == {"published-after-cancel"}
    assert published_after_cancel(clean()) == []  # no cancel answered: nothing to judge


# -- (j) an ended session leaves no turn open --------------------------------------------------------------------

def test_an_ended_session_whose_log_ends_mid_turn_is_caught() -> None:
    """The gap this check was written for: a session cancelled in an approval wait whose log ended with the
    ``approval_needed`` — a subscriber saw the turn start and never end."""
    from ouroactors.faults.session_checks import turn_left_unsettled

    open_turn = cancelled(3, log=log()[:3])
    assert open_turn.log[-1].kind != "turn_settled"
    [violation] = turn_left_unsettled(open_turn)
    assert violation.invariant == "turn-left-unsettled" and "cursor 3" in violation.message
    assert turn_left_unsettled(cancelled(3)) == [] and turn_left_unsettled(cancelled(0)) == []  # settled; no turn
    assert turn_left_unsettled(clean(state="suspended", log=log()[:3])) == []  # not ended: its turn may go on


# -- (k) a journal is evidence ------------------------------------------------------------------------------------

VERIFIED = {"verified": True, "broken_seq": None, "reason": "", "divergence": None, "boundary": None,
            "verified_turns": 1}


def test_a_journal_that_verifies_and_replays_passes_and_so_does_an_honest_stop_or_no_journal() -> None:
    from ouroactors.faults.session_checks import journal_unfaithful

    assert journal_unfaithful(clean(journal_check=VERIFIED)) == []
    assert journal_unfaithful(clean(journal_check={**VERIFIED, "boundary": "unsettled_turn"})) == []
    assert journal_unfaithful(clean()) == []  # no journal (no runtime ever ran): nothing to judge


def test_a_journal_that_does_not_verify_or_whose_replay_diverges_is_caught_naming_where() -> None:
    from ouroactors.faults.session_checks import journal_unfaithful

    broken = clean(journal_check={**VERIFIED, "verified": False, "broken_seq": 7, "reason": "hash mismatch"})
    [violation] = journal_unfaithful(broken)
    assert violation.invariant == "journal-unfaithful" and "seq 7: hash mismatch" in violation.message
    diverged = clean(journal_check={**VERIFIED, "divergence": "Divergence(seq=9, field='request_digest')"})
    [violation] = check_session(diverged)
    assert "diverged after 1 verified turn(s)" in violation.message and "seq=9" in violation.message


def test_a_silent_gap_the_ledger_proves_is_caught_and_a_named_one_is_not() -> None:
    from ouroactors.faults.session_checks import journal_unfaithful

    assert journal_unfaithful(clean(journal_check={**VERIFIED, "unjournaled": [], "gaps": 1})) == []
    line = "effect 's/t1/c1': the ledger has it, the journal has no tool_result for turn 1 call 'c1', and no gap ..."
    [violation] = check_session(clean(journal_check={**VERIFIED, "unjournaled": [line], "gaps": 0}))
    assert violation.invariant == "journal-unfaithful"
    assert violation.message.startswith("a silent gap: effect 's/t1/c1'")
