"""The session invariants, checked on what a session run left behind (pure: no thespian, no LMDB).

A :class:`SessionHistory` is what was read after (and during) one run of a session: the durable record and
event log (:class:`~ouroactors.runtime.coordinator.store.SessionStore`), the accepted and rejected resume
events, what each subscriber received batch by batch (:class:`Read`), every view of the record a client took
along the way (:class:`View`), the resume events the client sent (with retries), and the terminal state of the
crash-free run of the same scenario (:class:`Reference`). Eleven invariants, one function each:

(a) :func:`published_beyond_commit` — nothing reaches a subscriber beyond the committed cursor: every event a
    reader got is at or below the committed cursor its read reported, and is the durable log's event at that
    cursor, unchanged; the log itself holds cursors 1..committed and nothing after.
(b) :func:`cursor_went_back` — cursors never go back: the committed cursor, state version and revision seen by
    a client never decrease; each subscriber's stream goes 1, 2, 3… (a repeat is the cursor going back, a hole a
    gap) across its reconnects.
(c) :func:`terminal_diverged` — a session that met a crash ends where the crash-free run ended (same state,
    same status of its last settled turn), or parks visibly with a reason. Anything else (failed where the
    reference completed, stuck running, parked without a reason) is a violation.
(d) :func:`resume_twice` — no resume event acted on twice: an event id is accepted at most once, durably and
    in what the client was answered (a retry of an accepted event must be refused, as a duplicate, or lost with
    a dying coordinator — never taken again), and a runtime generation starts at most one turn: a runtime is
    started per turn and after a crash (:mod:`ouroactors.runtime.execution.runtime`), so a second turn in one
    generation is a resume event (a message, an answered approval) acted on again by the same runtime; and no
    more turn numbers start than resume events were accepted (a replacement re-runs a lost turn under its own
    number, in a new generation: allowed; a new turn for an event whose turn already ran is the event acted
    on twice).

(e) :func:`carried_out_of_turn` — a runtime carries only what it may (``publication.carry``): no event the
    coordinator decides on (``turn_settled``, ``approval_needed``, ``turn_resumed``) is carried, and along the log
    the runtime generations never go back — a zombie runtime's carry, committed after its replacement's events, would.

(f) :func:`model_asked_again` — a re-run turn never asks the model what an earlier run of it recorded (seed 001):
    when a later run of a turn makes model call *i* with the request digest an earlier run's durable, successful
    answer was for (and did so for every call before *i*), a ``model_call_reused`` event took it from the journal
    (:mod:`ouroactors.runtime.execution.reuse`). Counted per (turn, call): a re-run whose records a crash left out of
    the journal is not counted, its event may be; a turn after a ``gap`` or ``truncated`` record is not judged.

(g) :func:`steer_dropped` — an answered steer is never dropped: every steer a runtime accepted for a turn (its
    ``steer_received``, committed before the steer was answered) is named by a ``steer`` delivery of that turn once
    the journal settles it — delivered before a model call, put in the conversation after the turn stopped
    (``at_end``), or delivered by a re-run of a lost run (:mod:`ouroactors.runtime.execution.reuse`). Judged on the
    turns the journal settles; a turn a ``gap`` or ``truncated`` record may have lost a delivery of is not.

(h) :func:`published_twice` — a turn run again publishes nothing twice (:mod:`ouroactors.runtime.execution.repeats`):
    a turn's ``turn_started`` is in the log once, and the event after a ``turn_resumed`` marker is never the one the
    log's latest run of the turn holds at the marker's ``not_repeated`` (a repeat the runtime should have held
    back) — except an ``approval_needed``, which an unanswered ask publishes again by design.

(i) :func:`published_after_cancel` — a cancel answered done ends the session there: it is ``cancelled`` and its log
    ends at the cursor of the record the cancel was answered with (a running turn is interrupted and its end
    published *before* the answer); nothing is committed after it — no runtime of it goes on, no recovery runs it.

(j) :func:`turn_left_unsettled` — an ended session leaves no turn open: the log of a ``completed``, ``failed`` or
    ``cancelled`` session is empty or ends with a ``turn_settled`` (a turn a cancel cut short — in an approval wait,
    parked — is settled by the coordinator in the cancel's own commit), so a subscriber sees every turn it saw start
    end.

(k) :func:`journal_unfaithful` — DESIGN's invariant 4, a journal is evidence whatever crashed while it was
    written: its chain verifies to its anchored head and against every hash the ledger's settlements keep
    (``journal verify``), and a replay of it through the loop (``journal replay``) diverges nowhere. A replay may
    stop at an honest boundary (a gap, a turn a crash left unsettled): that is the journal saying what it cannot
    prove, not a lie. And no gap is silent: every ``tool_call`` (and runner settlement's ``tool_result``) the
    ledger's entries of the session prove was committed is in the journal, or a ``gap`` record names its loss
    (:mod:`ouroactors.runtime.execution.ledger_witness`).

Violations reuse :class:`~.checks.Violation` (invariant name, subject, detail), so reports and the CLI print
them like the ledger's. Every check is tested on hand-made histories with a planted violation
(``tests/faults/test_session_checks.py``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..runtime.execution.repeats import RESUMED, event_key, published_run
from .checks import Violation
from .session_history import PARKED, TERMINAL, Read, Reference, Seen, SessionHistory, View


def published_beyond_commit(h: SessionHistory) -> list[Violation]:
    """(a) see the module docstring."""
    out: list[Violation] = []
    durable = {e.cursor: e for e in h.log}
    cursors = sorted(durable)
    if cursors != list(range(1, len(cursors) + 1)):
        out.append(Violation("published-beyond-commit", h.session_id, f"the durable log is not 1..n: {cursors[:20]}"))
    if cursors and cursors[-1] != h.committed_cursor:
        out.append(Violation("published-beyond-commit", h.session_id,
                             f"the log ends at cursor {cursors[-1]}, the record committed {h.committed_cursor}"))
    for read in h.reads:
        for event in read.events:
            where = f"{h.session_id}@{event.cursor}"
            if event.cursor > read.committed:
                out.append(Violation("published-beyond-commit", where,
                                     f"{read.subscriber} got cursor {event.cursor} from a read that reported "
                                     f"{read.committed} committed"))
            if event.cursor > h.committed_cursor:
                out.append(Violation("published-beyond-commit", where,
                                     f"{read.subscriber} got cursor {event.cursor}; the session committed "
                                     f"{h.committed_cursor} in the end"))
            found = durable.get(event.cursor)
            if found is None:
                out.append(Violation("published-beyond-commit", where,
                                     f"{read.subscriber} got {event.kind!r}, which is not in the durable log"))
            elif not found.same(event):
                out.append(Violation("published-beyond-commit", where,
                                     f"{read.subscriber} got {event.kind!r} (turn {event.turn}); the durable log "
                                     f"holds {found.kind!r} (turn {found.turn}) there"))
    return out


def cursor_went_back(h: SessionHistory) -> list[Violation]:
    """(b) see the module docstring."""
    out: list[Violation] = []
    for name in ("committed_cursor", "state_version", "revision"):
        last: int | None = None
        for index, view in enumerate(h.views):
            value = getattr(view, name)
            if last is not None and value < last:
                out.append(Violation("cursor-went-back", h.session_id,
                                     f"view {index}: {name} {value} after {last}"))
            last = value if last is None else max(last, value)
    streams: dict[str, list[Read]] = {}
    for read in h.reads:
        streams.setdefault(read.subscriber, []).append(read)
    for subscriber, reads in streams.items():
        last_committed = 0
        position: int | None = None  # the last cursor this subscriber received
        for read in reads:
            if read.committed < last_committed:
                out.append(Violation("cursor-went-back", f"{h.session_id}:{subscriber}",
                                     f"a read reported {read.committed} committed after {last_committed}"))
            last_committed = max(last_committed, read.committed)
            expected = read.after if position is None else position
            if position is not None and read.after < position:
                out.append(Violation("cursor-went-back", f"{h.session_id}:{subscriber}",
                                     f"resumed after {read.after}, having received {position}"))
            for event in read.events:
                if event.cursor <= expected:
                    out.append(Violation("cursor-went-back", f"{h.session_id}:{subscriber}",
                                         f"received cursor {event.cursor} again (had {expected}): a duplicate"))
                elif event.cursor != expected + 1:
                    out.append(Violation("cursor-went-back", f"{h.session_id}:{subscriber}",
                                         f"received cursor {event.cursor} after {expected}: a gap"))
                expected = max(expected, event.cursor)
            position = expected
    return out


def terminal_diverged(h: SessionHistory) -> list[Violation]:
    """(c) see the module docstring. Without a reference only the parked-needs-a-reason part is checked."""
    if h.state == PARKED:
        if not (h.reason or "").strip():
            return [Violation("terminal-diverged", h.session_id, "parked without a reason")]
        return []
    ref = h.reference
    if ref is None:
        return []
    if h.state != ref.state:
        return [Violation("terminal-diverged", h.session_id,
                          f"ended {h.state!r} (reason {h.reason!r}); the crash-free run ended {ref.state!r}")]
    if h.last_settled() != ref.last_settled and ref.state != "cancelled":  # a cancel lands where it lands: (i)
        return [Violation("terminal-diverged", h.session_id,
                          f"its last turn settled {h.last_settled()!r}; in the crash-free run {ref.last_settled!r}")]
    return []


def resume_twice(h: SessionHistory) -> list[Violation]:
    """(d) see the module docstring."""
    out: list[Violation] = []
    ids = Counter(str(a.get("event_id")) for a in h.accepted)
    for event_id, count in sorted(ids.items()):
        if count > 1:
            out.append(Violation("resume-twice", f"{h.session_id}/{event_id}", f"accepted {count} times"))
    taken = Counter(event_id for event_id, answer in h.sent if answer == "done")
    for event_id, count in sorted(taken.items()):
        if count > 1:
            out.append(Violation("resume-twice", f"{h.session_id}/{event_id}",
                                 f"the client was told {count} times that this event was taken"))
    starts: dict[int, list[int]] = {}
    for event in h.log:
        if event.kind == "turn_started":
            starts.setdefault(event.generation, []).append(event.turn)
    for generation, turns in sorted(starts.items()):
        if len(turns) > 1:
            out.append(Violation("resume-twice", f"{h.session_id}/g{generation}",
                                 f"runtime generation {generation} started {len(turns)} turns {turns}: one runtime "
                                 "serves one turn"))
    turns = sorted({turn for numbers in starts.values() for turn in numbers})
    if len(turns) > len(h.accepted) + h.resumed:
        out.append(Violation("resume-twice", h.session_id,
                             f"{len(turns)} turns started ({turns}) for {len(h.accepted)} accepted resume events"
                             + (f" and {h.resumed} resume(s)" if h.resumed else "")))
    return out


DECIDED_BY_COORDINATOR = ("turn_settled", "approval_needed", RESUMED)  # publication.DECIDED_BY_COORDINATOR


def carried_out_of_turn(h: SessionHistory) -> list[Violation]:
    """(e) see the module docstring."""
    out: list[Violation] = []
    highest = 0
    for event in sorted(h.log, key=lambda e: e.cursor):
        where = f"{h.session_id}@{event.cursor}"
        if event.carried and event.kind in DECIDED_BY_COORDINATOR:
            out.append(Violation("carried-out-of-turn", where,
                                 f"{event.kind!r} was carried by a runtime; the coordinator commits it"))
        if event.generation < highest:
            out.append(Violation("carried-out-of-turn", where,
                                 f"generation {event.generation} after generation {highest}: "
                                 f"{'carried by a runtime no longer attached' if event.carried else 'went back'}"))
        highest = max(highest, event.generation)
    return out


def model_asked_again(h: SessionHistory) -> list[Violation]:
    """(f) see the module docstring."""
    runs: dict[int, list[dict[int, list[Any]]]] = {}  # turn → its runs in order: index → [digest, answered]
    unprovable: set[int] = set()  # turns whose records a gap or a cut may have lost
    for r in sorted(h.journal, key=lambda r: int(r["seq"])):
        kind, turn = r["kind"], r.get("turn")
        if kind in ("gap", "truncated"):
            unprovable.update(runs)  # what follows may lack an answer the runs before it recorded
            continue
        raw = r.get("index")
        index = raw if type(raw) is int else -1
        if not isinstance(turn, int) or (kind != "turn_started" and index < 0):
            continue  # a record replay would not take (no int turn or call index) is no evidence either way
        if kind == "turn_started":
            runs.setdefault(turn, []).append({})
        elif kind == "model_call" and runs.get(turn):
            runs[turn][-1][index] = [r.get("digest"), False]
        elif kind == "model_result" and runs.get(turn) and r.get("ok"):
            call = runs[turn][-1].get(index)
            if call is not None:
                call[1] = True
    due: Counter[tuple[int, int]] = Counter()
    for turn, turn_runs in runs.items():
        if turn in unprovable:
            continue
        answered: dict[int, Any] = {}  # index → the request digest an earlier run recorded an answer for
        for n, run in enumerate(turn_runs):
            index = 0
            while n and index in run and answered.get(index) == run[index][0]:
                due[(turn, index)] += 1  # the same request again, its answer durable: taken from the journal
                index += 1
            answered.update((i, digest) for i, (digest, ok) in run.items() if ok)
    taken = Counter(h.reused)
    return [Violation("model-asked-again", f"{h.session_id}/t{turn}/call{index}",
                      f"{count} re-run(s) of turn {turn} made model call {index} with the request an earlier run's "
                      f"durable answer was for, and {taken[(turn, index)]} took it from the journal: the model was "
                      "asked again")
            for (turn, index), count in sorted(due.items()) if taken[(turn, index)] < count]


def steer_dropped(h: SessionHistory) -> list[Violation]:
    """(g) see the module docstring."""
    received: dict[int, dict[str, int]] = {}  # turn → steer id → seq of its first steer_received
    delivered: dict[int, set[str]] = {}  # turn → the ids its steer records name
    settled: set[int] = set()
    unprovable: set[int] = set()  # turns a gap or a cut may have lost a delivery of
    after_loss = False  # the turn of the next record is unprovable too (a gap names records lost before it)
    for r in sorted(h.journal, key=lambda r: int(r["seq"])):
        kind, turn = r["kind"], r.get("turn")
        if kind in ("gap", "truncated"):
            unprovable.update(received, delivered, settled)
            after_loss = True
            continue
        if not isinstance(turn, int):
            continue
        if after_loss:
            unprovable.add(turn)
            after_loss = False
        steer_id = r.get("id")
        if kind == "steer_received" and isinstance(steer_id, str) and steer_id:
            received.setdefault(turn, {}).setdefault(steer_id, int(r["seq"]))
        elif kind == "steer" and isinstance(steer_id, str):
            delivered.setdefault(turn, set()).add(steer_id)
        elif kind == "turn_settled":
            settled.add(turn)
    return [Violation("steer-dropped", f"{h.session_id}/t{turn}/{steer_id}",
                      f"steer {steer_id!r} of turn {turn} was accepted (journaled at seq {seq}) and the turn settled "
                      "without delivering it: the user was told it was taken")
            for turn in sorted(settled - unprovable)
            for steer_id, seq in sorted(received.get(turn, {}).items(), key=lambda item: item[1])
            if steer_id not in delivered.get(turn, set())]


def published_twice(h: SessionHistory) -> list[Violation]:
    """(h) see the module docstring."""
    out: list[Violation] = []
    turns: dict[int, list[Seen]] = {}
    for event in sorted(h.log, key=lambda e: e.cursor):
        turns.setdefault(event.turn, []).append(event)
    for turn, events in sorted(turns.items()):
        starts = [e.cursor for e in events if e.kind == "turn_started"]
        if len(starts) > 1:
            out.append(Violation("published-twice", f"{h.session_id}/t{turn}",
                                 f"turn_started at cursors {starts}: a run of the turn published its start again"))
        for at, marker in enumerate(events[:-1]):
            held = marker.data.get("not_repeated") if marker.kind == RESUMED else None
            if not isinstance(held, int):
                continue
            before, after = published_run(events[:at], turn), events[at + 1]
            if held < len(before) and after.kind != "approval_needed" and \
                    event_key(after.kind, after.data) == event_key(*before[held]):
                out.append(Violation("published-twice", f"{h.session_id}@{after.cursor}",
                                     f"{after.kind!r} after the marker at {marker.cursor} repeats the run's event "
                                     f"{held} the log holds already: it was to be held back"))
    return out


def published_after_cancel(h: SessionHistory) -> list[Violation]:
    """(i) see the module docstring."""
    at = h.cancelled_at
    if at is None:
        return []
    out: list[Violation] = []
    if h.state != "cancelled":
        out.append(Violation("published-after-cancel", h.session_id,
                             f"a cancel was answered done, yet the session ended {h.state!r}"))
    later = [e.cursor for e in h.log if e.cursor > at]
    if h.committed_cursor != at or later:
        out.append(Violation("published-after-cancel", h.session_id,
                             f"the cancel was answered at cursor {at}; the log goes on to {h.committed_cursor} "
                             f"(events {later[:5]})"))
    return out


def turn_left_unsettled(h: SessionHistory) -> list[Violation]:
    """(j) see the module docstring."""
    if h.state not in TERMINAL or not h.log or h.log[-1].kind == "turn_settled":
        return []
    last = h.log[-1]
    return [Violation("turn-left-unsettled", h.session_id, f"the session ended {h.state!r}, yet its log ends with "
                      f"{last.kind!r} (cursor {last.cursor}) of turn {last.turn}: that turn never settles")]


def journal_problems(subject: str, check: Mapping[str, Any]) -> list[Violation]:
    """What is wrong with a journal, from what verify and replay said of it (``session_dump.journal_check``; ``{}``:
    there is none): a chain that does not verify, a replay that diverged, a record the ledger proves was due and no
    gap names (a silent gap). Shared with the runtime workload."""
    out: list[Violation] = []
    if check and not check.get("verified", False):
        out.append(Violation("journal-unfaithful", subject,
                             f"the journal does not verify at seq {check.get('broken_seq')}: {check.get('reason')}"))
    if check and check.get("divergence"):
        out.append(Violation("journal-unfaithful", subject,
                             f"a replay of the journal diverged after {check.get('verified_turns')} verified turn(s): "
                             f"{check['divergence']}"))
    for line in (check.get("unjournaled") or []) if check else []:
        out.append(Violation("journal-unfaithful", subject, f"a silent gap: {line}"))
    return out


def journal_unfaithful(h: SessionHistory) -> list[Violation]:
    """(k) see the module docstring."""
    return journal_problems(h.session_id, h.journal_check)


SESSION_CHECKS: dict[str, Callable[[SessionHistory], list[Violation]]] = {
    "published-beyond-commit": published_beyond_commit,
    "cursor-went-back": cursor_went_back,
    "terminal-diverged": terminal_diverged,
    "resume-twice": resume_twice,
    "carried-out-of-turn": carried_out_of_turn,
    "model-asked-again": model_asked_again,
    "steer-dropped": steer_dropped,
    "published-twice": published_twice,
    "published-after-cancel": published_after_cancel,
    "turn-left-unsettled": turn_left_unsettled,
    "journal-unfaithful": journal_unfaithful,
}


def check_session(h: SessionHistory, names: Iterable[str] | None = None) -> list[Violation]:
    """Every session invariant (or those named) on ``h``."""
    chosen: Sequence[str] = list(SESSION_CHECKS) if names is None else list(names)
    unknown = [n for n in chosen if n not in SESSION_CHECKS]
    if unknown:
        raise ValueError(f"session checks: unknown {unknown}; known: {', '.join(SESSION_CHECKS)}")
    return [v for name in chosen for v in SESSION_CHECKS[name](h)]


__all__ = [
    "PARKED", "SESSION_CHECKS", "TERMINAL", "Read", "Reference", "Seen", "SessionHistory", "View",
    "carried_out_of_turn", "check_session", "cursor_went_back", "journal_problems", "journal_unfaithful",
    "model_asked_again", "published_after_cancel", "published_beyond_commit", "published_twice", "resume_twice",
    "steer_dropped", "terminal_diverged", "turn_left_unsettled",
]
