"""What one run of a session left to check: the types :mod:`.session_checks` judges (pure data, no thespian).

:class:`SessionHistory` holds the durable record and log, every subscriber's reads (:class:`Read`, of
:class:`Seen` events), every view a client took (:class:`View`), the resume events, the journal's outline and the
crash-free run's end (:class:`Reference`); the workload (:mod:`.session_workload`) fills it in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

TERMINAL = ("completed", "failed", "cancelled")
PARKED = "parked"


@dataclass(frozen=True)
class Seen:
    """One published event as read (from the durable log, or by a subscriber)."""

    cursor: int
    kind: str
    turn: int
    data: Mapping[str, Any] = field(default_factory=dict)
    generation: int = 0
    carried: bool = False  # committed by the runtime in its own transaction (publication.carry)

    @classmethod
    def of(cls, event: Any) -> Seen:
        """From a :class:`~ouroactors.runtime.coordinator.record.PublishedEvent` or a plain dict of its fields."""
        fields: Mapping[str, Any] = event if isinstance(event, Mapping) else vars(event) if hasattr(event, "__dict__") \
            else {name: getattr(event, name, None) for name in ("cursor", "kind", "turn", "data", "generation",
                                                                "carried")}
        get = fields.get
        return cls(int(get("cursor") or 0), str(get("kind")), int(get("turn", 0) or 0), dict(get("data", {}) or {}),
                   int(get("generation", 0) or 0), bool(get("carried", False)))

    def same(self, other: Seen) -> bool:
        return (self.kind, self.turn, dict(self.data), self.generation) == \
            (other.kind, other.turn, dict(other.data), other.generation)


@dataclass(frozen=True)
class Read:
    """One read by a subscriber: events after ``after``; ``committed`` is the cursor the read reported."""

    subscriber: str
    after: int
    events: tuple[Seen, ...]
    committed: int
    state: str = ""


@dataclass(frozen=True)
class View:
    """A client's look at the record (``session show``), in the order taken."""

    committed_cursor: int
    state_version: int
    revision: int
    state: str = ""


@dataclass(frozen=True)
class Reference:
    """Where the crash-free run of the scenario ended."""

    state: str
    last_settled: str | None  # the status of the last turn_settled event (None: no turn settled)


@dataclass
class SessionHistory:
    """Everything one run of a session left to check (see the module docstring)."""

    session_id: str
    state: str
    committed_cursor: int
    reason: str | None = None
    log: list[Seen] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    views: list[View] = field(default_factory=list)
    accepted: list[Mapping[str, Any]] = field(default_factory=list)  # AcceptedEvent fields
    rejected: list[Mapping[str, Any]] = field(default_factory=list)  # RejectedEvent fields
    sent: list[tuple[str, str]] = field(default_factory=list)  # (event id, answer) per attempt: done|rejected:…|error
    reference: Reference | None = None
    # the journal's turn_started / model_call / model_result / gap / truncated records (session_dump's journal_outline:
    # seq, turn, kind, index, digest, ok) and its steer_received / steer / turn_settled records (seq, turn, kind, id),
    # in order, and the (turn, index) of each model_call_reused event
    journal: list[Mapping[str, Any]] = field(default_factory=list)
    reused: list[tuple[int, int]] = field(default_factory=list)
    resumed: int = 0  # resumes of a suspended session the client was answered done (each runs its message again)
    # the committed cursor of the record a cancel was answered with (None: no cancel was answered done)
    cancelled_at: int | None = None
    # what verify and replay said of the session's journal (session_dump's journal_check; {}: it has none)
    journal_check: Mapping[str, Any] = field(default_factory=dict)

    def last_settled(self) -> str | None:
        settled = [e for e in self.log if e.kind == "turn_settled"]
        return str(settled[-1].data.get("status")) if settled else None


__all__ = ["PARKED", "TERMINAL", "Read", "Reference", "Seen", "SessionHistory", "View"]
