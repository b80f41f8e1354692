"""Invariant checkers: pure functions over what a run left behind.

Each checker takes an :class:`Observation` — the ledger entries recorded since the run began (after
recovery), the world's log of deliveries, the workspace lease tables seen, the supervision events
and the driver's record of every answer it got — and returns a list of :class:`Violation`. Nothing
here talks to a live system, so every checker is tested on hand-made data.

Invariants checked (DESIGN.md numbering where it has one):

=========================  =====================================================================
``effect-without-start``   1. no effect ran without a committed ``started`` record (world log vs ledger)
``double-settlement``      2. no effect settled twice; no effect delivered to the world twice
``ambiguous-not-failed``   2. an unsettled entry becomes ``ambiguous`` on recovery, never ``failed``
``reconciled-matches``     settled (by reconciler or runner) entries agree with the world
``overlapping-leases``     5. no two live leases overlap unless both are shared_read
``stale-generation``       6. no request stamped with a gone generation was acted on
``record-lost``            no committed record is lost (every answered commit is in the ledger)
``outcome-diverged``       7. a terminal outcome equals the crash-free one (else it stops visibly)
=========================  =====================================================================

Invariant 4 (every journal verifies) needs real sessions: ``journal-unfaithful`` checks it after every run of the
runtime workload (:mod:`.runtime_checks`) and of a session crash enumeration (:mod:`.session_checks`, (k)).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..authorities.ledger.domain import RESTARTED_BEFORE_SETTLEMENT, Entry, Status
from ..authorities.workspace.leases import Lease, invariant_violations
from ..supervision.events import Event
from .workload import EFFECT_KIND, DriverRecord

INVARIANTS: dict[str, str] = {
    "effect-without-start": "no effect runs without a committed started record (invariant 1)",
    "double-settlement": "no effect is settled twice or delivered twice (invariant 2)",
    "ambiguous-not-failed": "unsettled entries become ambiguous on recovery, never failed (invariant 2)",
    "reconciled-matches": "settled entries agree with the world (reconcilers and runners)",
    "overlapping-leases": "no two live leases overlap unless both are shared_read (invariant 5)",
    "stale-generation": "no request stamped with a gone generation is acted on (invariant 6)",
    "record-lost": "no committed record is lost",
    "outcome-diverged": "terminal outcomes match the crash-free run (invariant 7)",
}


@dataclass(frozen=True)
class Violation:
    """One broken invariant: which, about what, and what exactly was seen."""

    invariant: str
    subject: str
    message: str

    def __str__(self) -> str:
        return f"[{self.invariant}] {self.subject}: {self.message}"


@dataclass
class Observation:
    """What one run left behind, gathered after the tree recovered."""

    run_id: str
    entries: list[Entry]  # every ledger entry with seq >= first_seq, in seq order
    first_seq: int
    world_log: list[dict[str, Any]]  # the world's deliveries and refusals of this run's keys
    leases: list[Lease] = field(default_factory=list)  # the final live lease table
    lease_snapshots: list[list[Lease]] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)  # the system's events (all of them)
    driver: DriverRecord | None = None
    ledger_path: str = "agent/ledger"
    recovered: bool = True  # recovery ran after the workload: nothing may still be ``started``
    # The world stamps deliveries with the real wall clock; a simulated system records virtual
    # times. This maps a world stamp onto the system's clock (None: they share the real clock).
    world_time: Callable[[int], int] | None = None

    def world_ns(self, real_ns: int) -> int:
        return real_ns if self.world_time is None else self.world_time(real_ns)

    def run_entries(self) -> list[Entry]:
        prefix = f"{self.run_id}/"
        return [e for e in self.entries if e.effect_id.startswith(prefix)]

    def effect_entries(self) -> dict[str, Entry]:
        return {e.idempotency_key: e for e in self.run_entries() if e.kind == EFFECT_KIND}

    def deliveries(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for item in self.world_log:
            if item.get("event") == "delivered":
                out.setdefault(item["key"], []).append(item)
        return out

    def refusals(self) -> set[str]:
        return {item["key"] for item in self.world_log if item.get("event") == "refused"}


Checker = Callable[[Observation], list[Violation]]


def effect_without_start(obs: Observation) -> list[Violation]:
    """Every key the world saw has a committed start in the ledger, recorded before the delivery."""
    out: list[Violation] = []
    entries = obs.effect_entries()
    for key, deliveries in sorted(obs.deliveries().items()):
        entry = entries.get(key)
        first = min(obs.world_ns(d["t_ns"]) for d in deliveries)
        if entry is None:
            out.append(Violation("effect-without-start", key,
                                 f"the world saw {len(deliveries)} delivery(ies) but the ledger has no committed "
                                 "start for this idempotency key"))
        elif entry.status is Status.DENIED:
            out.append(Violation("effect-without-start", entry.effect_id,
                                 "the effect was denied but the world saw it"))
        elif entry.started_ns > first:
            out.append(Violation("effect-without-start", entry.effect_id,
                                 f"the start was recorded {(entry.started_ns - first) / 1e6:.3f} ms after the "
                                 "world saw the effect"))
    if obs.driver is not None:
        for record in obs.driver.effects.values():
            if record.effect_called and not record.start_committed:
                out.append(Violation("effect-without-start", record.effect_id,
                                     "the driver ran the effect without a committed start answer"))
    return out


def double_settlement(obs: Observation) -> list[Violation]:
    """No effect delivered twice; no effect's settlement committed twice."""
    out: list[Violation] = []
    for key, deliveries in sorted(obs.deliveries().items()):
        if len(deliveries) > 1:
            out.append(Violation("double-settlement", key,
                                 f"the effect reached the world {len(deliveries)} times (a duplicate)"))
    entries = {e.effect_id: e for e in obs.run_entries()}
    if obs.driver is not None:
        for record in obs.driver.effects.values():
            if record.settle_created > 1:
                out.append(Violation("double-settlement", record.effect_id,
                                     f"the ledger answered 'created' to {record.settle_created} settlements"))
            entry = entries.get(record.effect_id)
            if (record.settle_created and entry is not None and entry.settled_by is not None
                    and entry.settled_by != "runner"):
                out.append(Violation("double-settlement", record.effect_id,
                                     f"the runner's settlement was answered 'created', yet the entry carries a "
                                     f"settlement by {entry.settled_by} (settled twice, or the runner's lost)"))
    return out


def ambiguous_not_failed(obs: Observation) -> list[Violation]:
    """Failed only on a definite refusal; after recovery nothing is still ``started``."""
    out: list[Violation] = []
    deliveries = obs.deliveries()
    refused = obs.refusals()
    for entry in obs.run_entries():
        if entry.status is Status.STARTED and obs.recovered:
            out.append(Violation("ambiguous-not-failed", entry.effect_id,
                                 "still 'started' after recovery: an unsettled entry must become ambiguous"))
        if entry.status is not Status.FAILED:
            continue
        if entry.settled_by is None or entry.reason == RESTARTED_BEFORE_SETTLEMENT:
            out.append(Violation("ambiguous-not-failed", entry.effect_id,
                                 "an unsettled entry was turned into 'failed' by recovery"))
        elif entry.kind == EFFECT_KIND:
            seen = len(deliveries.get(entry.idempotency_key, ()))
            if seen:
                out.append(Violation("ambiguous-not-failed", entry.effect_id,
                                     f"settled 'failed' by {entry.settled_by} but the world saw the effect "
                                     f"{seen} time(s)"))
            elif entry.settled_by == "runner" and entry.idempotency_key not in refused:
                out.append(Violation("ambiguous-not-failed", entry.effect_id,
                                     "settled 'failed' by the runner without a refusal from the world"))
    return out


def reconciled_matches(obs: Observation) -> list[Violation]:
    """An ``ok`` effect entry was seen by the world; a reconciler's evidence names the right key."""
    out: list[Violation] = []
    deliveries = obs.deliveries()
    for entry in obs.run_entries():
        if entry.kind != EFFECT_KIND or entry.status is not Status.OK:
            continue
        seen = len(deliveries.get(entry.idempotency_key, ()))
        if not seen:
            out.append(Violation("reconciled-matches", entry.effect_id,
                                 f"settled 'ok' by {entry.settled_by} but the world never saw the key"))
        if entry.settled_by and entry.settled_by.startswith("reconciler"):
            evidence = entry.evidence or {}
            if evidence.get("key") != entry.idempotency_key:
                out.append(Violation("reconciled-matches", entry.effect_id,
                                     f"reconciled with evidence for another key: {evidence.get('key')!r}"))
            if int(evidence.get("deliveries", 0)) > seen:
                out.append(Violation("reconciled-matches", entry.effect_id,
                                     f"reconciled on {evidence.get('deliveries')} delivery(ies); the world "
                                     f"logged {seen}"))
    return out


def overlapping_leases(obs: Observation) -> list[Violation]:
    """No lease table the workspace answered (nor the final one) holds two conflicting live leases."""
    out: list[Violation] = []
    seen: set[tuple[str, str]] = set()
    for table in [*obs.lease_snapshots, obs.leases]:
        for a, b in invariant_violations(table):
            pair = (min(a.lease_id, b.lease_id), max(a.lease_id, b.lease_id))
            if pair in seen:
                continue
            seen.add(pair)
            out.append(Violation("overlapping-leases", f"{a.lease_id} & {b.lease_id}",
                                 f"{a.mode} {a.root!r} ({a.status}, session {a.session_id}) overlaps "
                                 f"{b.mode} {b.root!r} ({b.status}, session {b.session_id})"))
    return out


@dataclass
class _Window:
    start_ns: int | None = None
    end_ns: int | None = None


def generation_windows(events: Iterable[Event], path: str) -> dict[int, _Window]:
    """When each generation of the actor at ``path`` was live, from its supervision events."""
    windows: dict[int, _Window] = {}
    for event in events:
        if event.path != path:
            continue
        generation = event.generation
        if event.kind == "started" and generation is not None:
            windows.setdefault(generation, _Window()).start_ns = event.time_ns
        elif event.kind in ("exited", "terminated") and generation is not None:
            window = windows.setdefault(generation, _Window())
            window.end_ns = window.end_ns or event.time_ns
        elif event.kind == "generation_changed" and generation is not None:
            previous = event.fields.get("previous")
            if isinstance(previous, int):
                old = windows.setdefault(previous, _Window())
                old.end_ns = old.end_ns or event.time_ns
            windows.setdefault(generation, _Window()).start_ns = event.time_ns
    return windows


def stale_generation(obs: Observation) -> list[Violation]:
    """Every entry was recorded by the ledger generation it was stamped with, while that one lived."""
    out: list[Violation] = []
    windows = generation_windows(obs.events, obs.ledger_path)
    if not windows:
        return out
    highest: tuple[int, str] | None = None
    for entry in obs.run_entries():  # seq order
        stamp = entry.authority.get("ledger")
        if stamp is None:
            continue
        window = windows.get(stamp)
        if window is None:
            out.append(Violation("stale-generation", entry.effect_id,
                                 f"stamped with ledger generation {stamp}, which {obs.ledger_path} never had"))
            continue
        if window.end_ns is not None and entry.started_ns >= window.end_ns:
            out.append(Violation("stale-generation", entry.effect_id,
                                 f"recorded {(entry.started_ns - window.end_ns) / 1e6:.3f} ms after ledger "
                                 f"generation {stamp} (its stamp) was gone"))
        if highest is not None and stamp < highest[0]:
            out.append(Violation("stale-generation", entry.effect_id,
                                 f"stamped with generation {stamp}, recorded after {highest[1]} which was "
                                 f"stamped {highest[0]}: an older generation acted after a newer one"))
        if highest is None or stamp > highest[0]:
            highest = (stamp, entry.effect_id)
    return out


def record_lost(obs: Observation) -> list[Violation]:
    """Every commit the driver was told about is in the ledger; sequence numbers have no gaps."""
    out: list[Violation] = []
    seqs = [e.seq for e in obs.entries]
    expected = list(range(obs.first_seq, obs.first_seq + len(seqs)))
    if sorted(seqs) != expected:
        missing = sorted(set(range(obs.first_seq, max(seqs, default=obs.first_seq) + 1)) - set(seqs))
        out.append(Violation("record-lost", "ledger", f"sequence gap: missing seq {missing[:10]}"))
    entries = {e.effect_id: e for e in obs.run_entries()}
    driver = obs.driver
    if driver is None:
        return out
    for record in driver.effects.values():
        entry = entries.get(record.effect_id)
        if record.start_committed:
            if entry is None:
                out.append(Violation("record-lost", record.effect_id,
                                     f"the ledger answered the start ({record.start_answers[-1]}) but has no entry"))
                continue
            if record.start_seq is not None and entry.seq != record.start_seq:
                out.append(Violation("record-lost", record.effect_id,
                                     f"answered with seq {record.start_seq}, the ledger holds seq {entry.seq}"))
            if f"{record.effect_id}/grant" not in entries:
                out.append(Violation("record-lost", f"{record.effect_id}/grant",
                                     "the permission decision committed with the start is missing"))
        if record.settled is not None and (entry is None or entry.status.value != record.settled):
            now = entry.status.value if entry is not None else "absent"
            out.append(Violation("record-lost", record.effect_id,
                                 f"the ledger answered settlement {record.settled!r}, it now says {now!r}"))
    live = {lease.lease_id for lease in obs.leases}
    for lease in driver.leases.values():
        if lease.grants and not lease.released and lease.outcome == "held" and lease.grants[-1][0] not in live:
            out.append(Violation("record-lost", lease.grants[-1][0],
                                 f"granted to {lease.session_id} and never released, but not in the lease table"))
    return out


def outcome_diverged(obs: Observation) -> list[Violation]:
    """A terminal status differs from the crash-free run's: a silent guess (invariant 7)."""
    out: list[Violation] = []
    if obs.driver is None:
        return out
    entries = {e.effect_id: e for e in obs.run_entries()}
    for record in obs.driver.effects.values():
        entry = entries.get(record.effect_id)
        if entry is None or not entry.terminal:
            continue  # not recorded, or visibly unsettled (ambiguous): allowed
        if entry.status.value != record.expected:
            out.append(Violation("outcome-diverged", record.effect_id,
                                 f"ended {entry.status.value!r}; the crash-free run ends {record.expected!r}"))
    return out


CHECKS: dict[str, Checker] = {
    "effect-without-start": effect_without_start,
    "double-settlement": double_settlement,
    "ambiguous-not-failed": ambiguous_not_failed,
    "reconciled-matches": reconciled_matches,
    "overlapping-leases": overlapping_leases,
    "stale-generation": stale_generation,
    "record-lost": record_lost,
    "outcome-diverged": outcome_diverged,
}


def check_all(obs: Observation, checks: Iterable[str] | None = None) -> list[Violation]:
    """Run every checker (or those named) and return all violations, checker by checker."""
    names = list(CHECKS) if checks is None else list(checks)
    out: list[Violation] = []
    for name in names:
        if name not in CHECKS:
            raise ValueError(f"unknown check {name!r}; known checks: {', '.join(CHECKS)}")
        out.extend(CHECKS[name](obs))
    return out
