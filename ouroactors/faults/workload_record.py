"""The synthetic driver's record: everything it asked and heard, kept honestly for the checkers.

The driver runs outside the actor system, so a kill inside it never kills the driver: what it
records here (every answer of the grants authority, the ledger, the workspace and the world, per
effect and per lease) survives every fault, and the checkers (:mod:`.checks`) compare it with the
durable state after recovery. The runtime workload (:mod:`.runtime_driver`) fills the same record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..authorities.workspace.leases import Lease


@dataclass
class EffectRecord:
    """Everything the driver asked and heard about one effect."""

    effect_id: str
    key: str
    session_id: str
    expected: str  # the crash-free outcome: ok | failed | denied
    grant_answers: list[str] = field(default_factory=list)  # "allow", "deny", "ask", "error:X" (each Decide)
    start_answers: list[str] = field(default_factory=list)  # "created:started", "existing:ambiguous", "error:X"
    start_committed: bool = False  # the ledger answered the start (created or existing)
    start_seq: int | None = None
    start_generation: int | None = None  # the ledger generation the accepted start was stamped with
    effect_called: bool = False
    effect_called_ns: int | None = None
    effect_answer: dict[str, Any] | None = None  # None: no answer (timeout or transport error)
    settle_answers: list[str] = field(default_factory=list)  # "created:ok", "existing:ok", "error:X"
    settled: str | None = None  # the settlement status the ledger confirmed (created or existing)
    settle_created: int = 0  # how many settlement requests the ledger answered "created"
    outcome: str = "pending"  # settled-ok | settled-failed | denied | left-started | left-ambiguous |
    #                          already-<status> | abandoned: <why>


@dataclass
class LeaseRecord:
    session_id: str
    root: str
    mode: str
    grants: list[tuple[str, int, int]] = field(default_factory=list)  # (lease id, token, t_ns)
    reclaims: int = 0
    replays: int = 0  # grants answered from an earlier request with the same request_id (an answer lost)
    released: bool = False
    outcome: str = "pending"


@dataclass
class DriverRecord:
    run_id: str
    effects: dict[str, EffectRecord] = field(default_factory=dict)
    leases: dict[str, LeaseRecord] = field(default_factory=dict)
    lease_snapshots: list[list[Lease]] = field(default_factory=list)
    rebinds: int = 0
    stale_answers: int = 0
    kills: list[str] = field(default_factory=list)  # what the driver itself killed (the runtime workload)
    errors: list[str] = field(default_factory=list)
    started_ns: int = 0
    ended_ns: int = 0

    def outcomes(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for effect in self.effects.values():
            key = effect.outcome.split(":", 1)[0]
            counts[key] = counts.get(key, 0) + 1
        return dict(sorted(counts.items()))


__all__ = ["DriverRecord", "EffectRecord", "LeaseRecord"]
