"""The boot sweep's decisions for every recoverable session at once (pure; the directory is the shell).

A coordinator per session is what a session needs while something happens in it: a turn runs, a runtime may be
adopted or replaced, a timer is due, an approval is awaited. Most non-terminal sessions after a restart need
none of that: a suspended session waits for its next message, a parked one for an operator — each of which reaches
the directory, which starts the session's coordinator on demand. (A session waiting on an external job gets a
coordinator: its wait has an expiry to apply, as a timer has a due time.) And a
running session whose runtime died with the system, and whose recovery :func:`.recovery.decide` refuses (an
ambiguous effect with no reconciler, a reservation it cannot reclaim), only needs to be parked with the reason.

So the sweep gathers the facts the table needs for all sessions in a few asks — the execution supervisor's
live runtimes, the ledger's unsettled entries, the leases kept beside the records — and :func:`plan` sorts each
session into one of three lists:

=================================================  ===========================================================
the session                                         the sweep
=================================================  ===========================================================
waiting on an approval, a timer or a job            ``start`` a coordinator (it polls, fires the timer, expires
                                                    the job)
a live runtime answers to it (its record's, or      ``start`` a coordinator (it adopts, or stops the stray)
the last one started for it)
running/recovering, and :func:`.recovery.decide`    ``park``: the decision's transitions, applied by the sweep
PARKs it                                            itself, many sessions to one transaction
running/recovering, anything else (REPLACE)         ``start`` a coordinator (it reconciles, reclaims, replaces)
suspended, parked                                   ``idle``: left as it is (nothing changes, nothing is written)
=================================================  ===========================================================

The decision is the same table a coordinator's recovery runs (:func:`.recovery.decide`) on the same facts; the
sweep only decides the rows that need no actor, and a coordinator started later decides again from the record.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from . import recovery
from .record import Recoverable, SessionRecord
from .workflow import State

__all__ = ["SweepPlan", "plan"]

ACTIVE_WAITS = (State.WAITING_APPROVAL, State.WAITING_TIMER, State.WAITING_JOB)  # a job's wait expires
IDLE = (State.SUSPENDED, State.PARKED)


@dataclass
class SweepPlan:
    start: list[str] = field(default_factory=list)
    park: list[tuple[SessionRecord, tuple[recovery.Step, ...]]] = field(default_factory=list)
    idle: list[str] = field(default_factory=list)


def needs_record(found: Recoverable) -> bool:
    """Does the plan of this session need its whole record (the recovery table's input)?"""
    return found.state not in (*IDLE, *ACTIVE_WAITS)


def plan(sessions: Iterable[Recoverable], *, records: Mapping[str, SessionRecord], live: frozenset[int],
         located: Mapping[str, int], unsettled: Mapping[str, tuple[recovery.Effect, ...]],
         reservations: Mapping[str, recovery.Reservation]) -> SweepPlan:
    """Sort ``sessions`` (the recoverable projection; see the module docstring). ``records``: the whole record of
    each session :func:`needs_record` (one missing gets a coordinator); ``live``: the generations of the node's
    running runtimes; ``located``: per session, the generation of the last runtime started for it; ``unsettled``:
    per session, its started/ambiguous ledger entries; ``reservations``: per session, whether its workspace
    reservation is provably its own (a session missing there holds none).

    An idle session is left as it is: nothing about it changes, so nothing is written (its coordinator claims the
    record when it starts)."""
    out = SweepPlan()
    for found in sessions:
        sid = found.session_id
        if found.state in ACTIVE_WAITS or found.generation in live or located.get(sid) in live:
            out.start.append(sid)
            continue
        if found.state in IDLE:
            out.idle.append(sid)
            continue
        record = records.get(sid)
        if record is None:
            out.start.append(sid)
            continue
        decision = recovery.decide(record, commit=recovery.Commit.SETTLED, effects=unsettled.get(sid, ()),
                                   probe=recovery.Probe(),
                                   reservation=reservations.get(sid, recovery.Reservation.NONE))
        if decision.action is recovery.Action.PARK:
            out.park.append((record, recovery.entering(record, decision)))
        else:
            out.start.append(sid)
    return out
