"""A session's workflow states and the one table of transitions between them (pure).

The coordinator never decides "can this session go from A to B" in code paths of its own: every
move is a lookup in :data:`TRANSITIONS`, a small table in the OTP manner (state × event → state).
A move the table does not declare raises :class:`InvalidTransition` naming the state, the event and
(when the caller asked for one) the target, and changes nothing — the store applies a transition
only inside the write transaction that also checks the record's revision, so a refused move never
reaches disk.

States (DESIGN.md "Coordinator", seed 001): ``running`` (a runtime holds the live turn),
``suspended`` (a turn completed, nothing to do until the next message), ``waiting:*`` (on an
approval, a timer or an external job: no runtime, no model), ``recovering`` (the runtime was lost;
effects are being reconciled before a replacement starts), ``parked`` (recovery could not be proven
safe: visible, with a reason, until an operator retries or ends it) and the terminal
``completed``/``failed``/``cancelled``, which absorb every event (a terminal session is history).

``parked`` is not in the seed's diagram: it is the "refuse and say why" of recovery given a state
of its own, so that a refused recovery is neither Running (it is not) nor Failed (an operator who
settles the ambiguous effect may retry it).

The state version grows by one on every transition (:func:`apply`); the store keeps it next to
the state, and resume events name the version they were issued against.
"""

from __future__ import annotations

from enum import Enum

from ...core.errors import OuroactorsError

__all__ = [
    "TERMINAL",
    "TRANSITIONS",
    "Event",
    "InvalidTransition",
    "State",
    "allowed_events",
    "apply",
    "check",
    "holds_runtime",
    "is_terminal",
    "next_state",
]


class State(str, Enum):
    RUNNING = "running"
    SUSPENDED = "suspended"
    WAITING_APPROVAL = "waiting:approval"
    WAITING_TIMER = "waiting:timer"
    WAITING_JOB = "waiting:external_job"
    RECOVERING = "recovering"
    PARKED = "parked"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def phase(self) -> str:
        """``waiting`` for the three waiting states, else the value."""
        return self.value.partition(":")[0]

    @property
    def wait(self) -> str | None:
        """What a waiting state waits on (``approval``, ``timer``, ``external_job``), else None."""
        return self.value.partition(":")[2] or None


class Event(str, Enum):
    MESSAGE = "message"  # a user message or trigger starts the next turn
    RESUME = "resume"  # an operator resumes a suspended session
    TURN_COMPLETE = "turn_complete"
    SUSPEND = "suspend"  # an operator suspends a running session (its runtime is stopped)
    WAIT_APPROVAL = "wait_approval"
    WAIT_TIMER = "wait_timer"
    WAIT_JOB = "wait_job"
    APPROVAL_ANSWERED = "approval_answered"
    TIMER_FIRED = "timer_fired"
    JOB_COMPLETED = "job_completed"
    JOB_EXPIRED = "job_expired"  # the external job's expiry passed before it completed (see .waits)
    RUNTIME_LOST = "runtime_lost"  # worker, model or tool failure: the runtime is gone
    EFFECT_UNKNOWN = "effect_unknown"  # a turn stopped on a tool call whose outcome is unknown: reconcile first
    RECOVERED = "recovered"  # a replacement resumed from the checkpoint (or the live one was adopted)
    PARK = "park"  # recovery refused: not provably safe
    RETRY = "retry"  # an operator retries a parked recovery
    COMPLETE = "complete"
    FAIL = "fail"
    CANCEL = "cancel"


S, E = State, Event
NON_TERMINAL = (S.RUNNING, S.SUSPENDED, S.WAITING_APPROVAL, S.WAITING_TIMER, S.WAITING_JOB, S.RECOVERING, S.PARKED)
TERMINAL = frozenset({S.COMPLETED, S.FAILED, S.CANCELLED})

# The table. Every (state, event) pair absent from it is invalid.
TRANSITIONS: dict[tuple[State, Event], State] = {
    (S.SUSPENDED, E.MESSAGE): S.RUNNING,
    (S.SUSPENDED, E.RESUME): S.RUNNING,
    (S.RUNNING, E.TURN_COMPLETE): S.SUSPENDED,
    (S.RUNNING, E.SUSPEND): S.SUSPENDED,
    (S.SUSPENDED, E.WAIT_TIMER): S.WAITING_TIMER,  # between turns: the next one starts when the timer fires
    (S.SUSPENDED, E.WAIT_JOB): S.WAITING_JOB,  # … or when the external job completes (see .waits)
    (S.RUNNING, E.WAIT_APPROVAL): S.WAITING_APPROVAL,
    (S.RUNNING, E.WAIT_TIMER): S.WAITING_TIMER,
    (S.RUNNING, E.WAIT_JOB): S.WAITING_JOB,
    (S.WAITING_APPROVAL, E.APPROVAL_ANSWERED): S.RUNNING,
    (S.WAITING_TIMER, E.TIMER_FIRED): S.RUNNING,
    (S.WAITING_JOB, E.JOB_COMPLETED): S.RUNNING,
    # no turn runs on an expiry (no model call nobody asked for): the session waits, with the reason, for a message
    (S.WAITING_JOB, E.JOB_EXPIRED): S.SUSPENDED,
    (S.RUNNING, E.RUNTIME_LOST): S.RECOVERING,
    (S.RUNNING, E.EFFECT_UNKNOWN): S.RECOVERING,
    (S.RECOVERING, E.RECOVERED): S.RUNNING,
    (S.RECOVERING, E.PARK): S.PARKED,
    # a turn that stopped on an effect of unknown outcome had settled: once recovery settled the effect, no runtime
    # is started for it (nothing re-runs) and the session waits for the next message
    (S.RECOVERING, E.TURN_COMPLETE): S.SUSPENDED,
    (S.PARKED, E.RETRY): S.RECOVERING,
    (S.RUNNING, E.COMPLETE): S.COMPLETED,
    (S.RUNNING, E.FAIL): S.FAILED,
    (S.RECOVERING, E.FAIL): S.FAILED,
    (S.PARKED, E.FAIL): S.FAILED,
    **{(state, E.CANCEL): S.CANCELLED for state in NON_TERMINAL},
}


class InvalidTransition(OuroactorsError):
    """``event`` is not declared from ``state`` (or leads elsewhere than ``to``); nothing changed."""

    def __init__(self, state: State, event: Event, to: State | None = None) -> None:
        self.state = state
        self.event = event
        self.to = to
        declared = TRANSITIONS.get((state, event))
        if declared is None:
            allowed = ", ".join(e.value for e in allowed_events(state)) or "none: the state is terminal"
            text = f"invalid transition: {event.value!r} from {state.value!r} (allowed: {allowed})"
        else:
            text = (f"invalid transition: {event.value!r} from {state.value!r} leads to {declared.value!r}, "
                    f"not {to.value if to else None!r}")
        super().__init__(text)

    def __reduce__(self) -> tuple[object, ...]:
        return (self.__class__, (self.state, self.event, self.to))


def next_state(state: State, event: Event) -> State:
    """The state ``event`` leads to from ``state``; :class:`InvalidTransition` if undeclared."""
    target = TRANSITIONS.get((State(state), Event(event)))
    if target is None:
        raise InvalidTransition(State(state), Event(event))
    return target


def check(state: State, event: Event, to: State) -> None:
    """Refuse unless the table declares ``state --event--> to`` exactly."""
    if TRANSITIONS.get((State(state), Event(event))) != to:
        raise InvalidTransition(State(state), Event(event), State(to))


def apply(state: State, version: int, event: Event) -> tuple[State, int]:
    """The transition and the next state version (always ``version + 1``)."""
    return next_state(state, event), version + 1


def allowed_events(state: State) -> tuple[Event, ...]:
    """The events declared from ``state``, in table order (what the record calls "next valid transitions")."""
    return tuple(event for (source, event) in TRANSITIONS if source == state)


def is_terminal(state: State) -> bool:
    return State(state) in TERMINAL


def holds_runtime(state: State) -> bool:
    """Only a running session holds a runtime; suspended, waiting, parked and terminal ones hold none.

    ``recovering`` holds none either: the old runtime is gone and the replacement is attached by
    the transition back to ``running``.
    """
    return State(state) is S.RUNNING
