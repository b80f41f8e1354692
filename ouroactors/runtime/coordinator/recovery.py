"""What recovery may do with a session, from what it can prove (pure; seed "Recovery should adopt before it repeats").

Inputs are facts the shell gathered, each from its authority: the durable record, whether the
record's last write is settled (:class:`Commit`), what the ledger says about the session's
unsettled effects (:class:`Effect`), what answered when the expected runtime was probed
(:class:`Probe`), and whether the workspace reservation is reclaimable (:class:`Reservation`).
:func:`decide` answers one :class:`Decision`; the rows, first match wins:

===  ==============================================  ==========================================
 #   facts                                           decision
===  ==============================================  ==========================================
 1   session terminal                                NONE (history)
 2   commit outcome unknown                          PARK ``commit_outcome_unknown``
 3   not running/recovering (suspended, waiting,     IDLE (resume from durable state on an
     parked) — a stray runtime is to be stopped      event; ``stop_stray`` if one answered)
 4   a runtime answers that is not the expected one  PARK ``wrong_generation``
     (other id or generation, or none expected)
 5   the expected runtime answers (id + generation)  ADOPT: reattach, drain after the cursor
 6   an ambiguous or unsettled effect, no reconciler PARK ``ambiguous_effect``
 7   reservation held by another / unauthenticated   PARK ``reservation_not_reclaimable``
     (:func:`kept_reservation` proves it)
 8   pinned to a workflow version this code does     PARK ``workflow_unavailable`` (a replacement
     not provide (:mod:`..execution.versions`)       would run another orchestration over it)
 9   pinned to a tool set whose definition this      PARK ``tool_set_unavailable`` (its calls would
     code does not have (:mod:`..execution.tool_set`) be judged by other rules)
10   otherwise                                       REPLACE: reconcile the listed effects,
                                                     reclaim the reservation, start generation
                                                     ``last_generation + 1`` from the cursor
===  ==============================================  ==========================================

A REPLACE with effects to reconcile is acted on in two steps: the session enters ``recovering``, the ledger runs
the reconcilers (:mod:`.reconciling`), and :func:`reconciled` parks it (``ambiguous_effect``) on any effect they
could not settle — only a session whose effects are all settled gets a replacement.

Adoption comes before any check of effects on purpose: a live runtime of the expected identity
still owns its in-flight effects, and replacing it would repeat them. A parked session is idle
until an operator retries it (``retry``); the retry runs this table again.

:func:`entering` and :func:`attaching` say which workflow transitions make a decision durable
(each applied by the store as a compare-and-set), so the shell does not invent its own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ...core.generation_text import format_generation
from ..execution import versions
from .publication import SETTLED_KIND
from .record import AcceptedEvent, PublishedEvent, RuntimeAttachment, SessionRecord
from .workflow import Event, State, is_terminal

__all__ = ["Action", "Commit", "Decision", "Effect", "ParkReason", "Probe", "Reservation", "attaching", "decide",
           "ends_recovered_turn", "entering", "kept_reservation", "reconciled", "text_never_sent"]


class Commit(str, Enum):
    SETTLED = "settled"  # the record was read back: what it says is what is durable
    UNKNOWN = "unknown"  # the last write's outcome could not be reconciled


class Reservation(str, Enum):
    NONE = "none"  # the session holds no workspace
    HELD = "held"  # still ours (same lease and fencing token)
    RECLAIMABLE = "reclaimable"  # ours, and the workspace authority will hand it back with its capability
    NOT_RECLAIMABLE = "not_reclaimable"  # another holder, or the claim cannot be authenticated


@dataclass(frozen=True)
class Probe:
    """What answered at the session's expected runtime (None fields: nothing answered)."""

    runtime_id: str | None = None
    generation: int | None = None

    @property
    def answered(self) -> bool:
        return self.runtime_id is not None


@dataclass(frozen=True)
class Effect:
    """An unsettled ledger entry of the session (``started``/``ambiguous``); does its kind have a reconciler?"""

    effect_id: str
    status: str
    reconciler: bool


class Action(str, Enum):
    NONE = "none"
    IDLE = "idle"
    ADOPT = "adopt"
    REPLACE = "replace"
    PARK = "park"


class ParkReason(str, Enum):
    COMMIT_OUTCOME_UNKNOWN = "commit_outcome_unknown"
    WRONG_GENERATION = "wrong_generation"
    AMBIGUOUS_EFFECT = "ambiguous_effect"
    RESERVATION_NOT_RECLAIMABLE = "reservation_not_reclaimable"
    WORKFLOW_UNAVAILABLE = "workflow_unavailable"
    TOOL_SET_UNAVAILABLE = "tool_set_unavailable"


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: ParkReason | None = None
    detail: str = ""
    runtime_id: str | None = None  # ADOPT: the runtime to reattach
    generation: int | None = None  # ADOPT: its generation; REPLACE: the replacement's
    drain_after: int = 0  # ADOPT: drain beyond this cursor; REPLACE: resume from this checkpoint
    reconcile: tuple[str, ...] = ()  # REPLACE: effects to hand to their reconcilers first
    reclaim: bool = False  # REPLACE: reclaim the workspace reservation first
    stop_stray: bool = False  # IDLE: a runtime answered although the session holds none


def kept_reservation(session_id: str, named: str, kept: dict[str, Any] | None,
                     live: Iterable[Any] | None) -> tuple[Reservation, str]:
    """Is the workspace reservation of a session whose record names lease ``named`` provably its own?

    ``kept`` is the lease kept beside the record (:func:`.configs.get_lease`), ``live`` the workspace's live leases
    (None: not asked, or no answer). The kept lease is the proof (its capability) when it is the one the record
    names. It may be a later one: a coordinator keeps a lease it acquired or reclaimed for a replacement runtime
    *before* it opens that runtime and names it in the record, so one killed in between (``coordinator.lease_kept``)
    leaves the record naming the lost lease — by then released by that reclaim — and the kept one the session's
    only lease. That one is the session's own only if the workspace shows it, live, for this session, on the kept
    root and mode, with the digest of the kept capability; anything else is not proven, and says why — except that
    when the workspace holds no live lease of this session at all (the kept one was released too: the runtime it was
    acquired for ended unopened, its coordinator having stopped on the keep's unknown outcome), nothing is reserved
    and there is nothing to prove: :attr:`Reservation.NONE`, and the replacement acquires afresh (the workspace
    still refuses it a root another holds).
    """
    if kept is None or not kept.get("capability"):
        return Reservation.NOT_RECLAIMABLE, "no lease capability is kept beside the record"
    if kept.get("lease_id") == named:
        return Reservation.RECLAIMABLE, ""
    unnamed = f"the kept lease {kept.get('lease_id')!r} is not the one the record names"
    if live is None:
        return Reservation.NOT_RECLAIMABLE, f"{unnamed}, and the workspace did not answer to prove it"
    found = next((x for x in live if getattr(x, "lease_id", None) == kept.get("lease_id")), None)
    if found is None:
        held = sorted(str(getattr(x, "lease_id", "?")) for x in live if getattr(x, "session_id", None) == session_id)
        if not held:  # neither lease, nor any other of this session's, is held: nothing is reserved to reclaim
            return Reservation.NONE, ""
        return Reservation.NOT_RECLAIMABLE, f"{unnamed}, and the workspace holds no such live lease (it holds " \
                                            f"{', '.join(held)} for this session)"
    digest = hashlib.sha256(bytes(kept["capability"])).hexdigest()
    if (getattr(found, "session_id", None) != session_id or getattr(found, "root", None) != kept.get("root")
            or getattr(found, "mode", None) != kept.get("mode")
            or getattr(found, "capability_sha256", None) != digest
            or getattr(found, "status", None) not in ("active", "reserved")):
        return Reservation.NOT_RECLAIMABLE, f"{unnamed}, and the workspace's lease of that id is not this " \
                                            "session's (session, root, mode or capability differ)"
    return Reservation.RECLAIMABLE, ""


def _park(reason: ParkReason, detail: str) -> Decision:
    return Decision(Action.PARK, reason, detail)


def decide(record: SessionRecord, *, commit: Commit, effects: tuple[Effect, ...], probe: Probe,
           reservation: Reservation, provided: tuple[str, ...] | None = None, why: str = "",
           tools_changed: str | None = None) -> Decision:
    """The recovery decision for ``record`` (the table in the module docstring); ``why``: what made the
    reservation not reclaimable (:func:`kept_reservation`), said in the park reason; ``tools_changed``: why this
    code's tools are not the ones the session pinned (:mod:`ouroactors.runtime.execution.tool_set`), or None."""
    if is_terminal(record.state):
        return Decision(Action.NONE, detail=f"session is {record.state.value}")
    if commit is Commit.UNKNOWN:
        return _park(ParkReason.COMMIT_OUTCOME_UNKNOWN, "the last write to the session record could not be "
                                                         "reconciled: refusing to guess which value won")
    if record.state not in (State.RUNNING, State.RECOVERING):
        return Decision(Action.IDLE, detail=f"session is {record.state.value}: it holds no runtime",
                        stop_stray=probe.answered)
    expected = record.runtime
    if probe.answered:
        if expected is None or probe.runtime_id != expected.runtime_id or probe.generation != expected.generation:
            want = (f"runtime {expected.runtime_id!r} generation {format_generation(expected.generation)}"
                    if expected is not None else "no runtime")
            return _park(ParkReason.WRONG_GENERATION, f"runtime {probe.runtime_id!r} answered with generation "
                                                       f"{format_generation(probe.generation)}; the record expects "
                                                       f"{want}")
        return Decision(Action.ADOPT, runtime_id=expected.runtime_id, generation=expected.generation,
                        drain_after=record.committed_cursor, detail="the expected runtime answered: reattach")
    blind = [e.effect_id for e in effects if not e.reconciler]
    if blind:
        return _park(ParkReason.AMBIGUOUS_EFFECT, f"unsettled effects with no reconciler: {', '.join(blind)} "
                                                   "(an operator must settle them)")
    if reservation is Reservation.NOT_RECLAIMABLE:
        lease = record.workspace.lease_id if record.workspace else None
        return _park(ParkReason.RESERVATION_NOT_RECLAIMABLE, f"workspace reservation {lease!r} cannot be reclaimed"
                                                              + (f": {why}" if why else ""))
    if provided is not None and record.pinned.workflow not in (versions.DEFAULT, *provided):
        return _park(ParkReason.WORKFLOW_UNAVAILABLE, f"the session is pinned to workflow "
                                                       f"{record.pinned.workflow!r}; this code provides "
                                                       f"{', '.join(repr(p) for p in provided)}")
    if tools_changed is not None:
        return _park(ParkReason.TOOL_SET_UNAVAILABLE, tools_changed)
    return Decision(Action.REPLACE, generation=record.last_generation + 1, drain_after=record.committed_cursor,
                    reconcile=tuple(e.effect_id for e in effects), reclaim=reservation is Reservation.RECLAIMABLE,
                    detail="no live runtime of the expected identity: replace from the checkpoint")


def reconciled(decision: Decision, left: tuple[str, ...]) -> Decision:
    """A REPLACE after its effects went to their reconcilers: any still unsettled parks the session instead."""
    if decision.action is not Action.REPLACE or not left:
        return decision
    return _park(ParkReason.AMBIGUOUS_EFFECT, f"unsettled effects their reconcilers could not settle: "
                                               f"{', '.join(left)} (an operator must settle them)")


Step = tuple[Event, dict[str, Any]]


def entering(record: SessionRecord, decision: Decision) -> tuple[Step, ...]:
    """The transitions that make ``decision`` durable before anything acts on it (in order, each a CAS).

    PARK: into ``recovering`` if running, then ``park`` with the reason. REPLACE: into
    ``recovering`` (the old runtime is gone; reconcile and reclaim happen there). ADOPT of a
    recovering session: ``recovered`` (the runtime it expected answered). Else nothing.
    """
    lost: tuple[Step, ...] = ((Event.RUNTIME_LOST, {}),) if record.state is State.RUNNING else ()
    if decision.action is Action.PARK:
        reason = f"{decision.reason.value if decision.reason else 'refused'}: {decision.detail}"
        return (*lost, (Event.PARK, {"reason": reason}))
    if decision.action is Action.REPLACE:
        return lost
    if decision.action is Action.ADOPT and record.state is State.RECOVERING:
        return ((Event.RECOVERED, {"reason": None}),)
    return ()


def text_never_sent(record: SessionRecord, *, running: bool, produced: int) -> bool:
    """ADOPT: did the runtime never get its turn's text? The coordinator that opened it died after naming it in the
    record and before sending it: the session is running, yet the runtime runs no turn and has produced nothing
    past the committed cursor. Any turn it had run would have left output there, and a turn whose output is all
    committed has settled (or parked) the session in the same transaction, so it would not be running."""
    return record.state is State.RUNNING and not running and produced <= record.committed_cursor


def ends_recovered_turn(last: PublishedEvent, started_by: AcceptedEvent | None) -> bool:
    """REPLACE: is the log's ``last`` event the end of the turn being recovered (it stopped on an effect of unknown
    outcome, since settled by its reconciler: nothing re-runs)?

    Only an ``ambiguous`` settlement leaves a session recovering — any other moved it on (suspended, completed) in
    the commit that published it — so any other belongs to an earlier turn. An ambiguous one ends this turn only if
    it was committed after ``started_by``, the resume event that started this turn: else it ended an earlier turn
    (recovered since), and this turn's runtime was lost before it published anything — the turn must run, or its
    message is lost. "After" is the log's order: the event's cursor is past the cursor the acceptance saw (both read
    inside LMDB's serialised write transactions). An event accepted before the cursor was kept has only its time,
    compared with the settlement's commit time (the node's clock: a clock stepped back can mislead it). No resume
    event (a session's first turn) leaves no earlier turn to confuse."""
    if last.kind != SETTLED_KIND or last.data.get("status") != "ambiguous":
        return False
    if started_by is None:
        return True
    if started_by.at_cursor is not None:
        return last.cursor > started_by.at_cursor
    return last.committed_ns >= started_by.at_ns


def attaching(decision: Decision, runtime_id: str) -> Step:
    """The transition that attaches the replacement ``runtime_id`` once it resumed from the checkpoint."""
    if decision.action is not Action.REPLACE or decision.generation is None:
        raise ValueError(f"only a REPLACE decision attaches a new runtime, not {decision.action.value}")
    attachment = RuntimeAttachment(runtime_id=runtime_id, generation=decision.generation)
    return (Event.RECOVERED, {"runtime": attachment, "last_generation": decision.generation, "reason": None})
