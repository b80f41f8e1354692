"""The invariant checks of a runtime-workload run (:mod:`.runtime_driver`): :mod:`.checks`, read for real sessions.

A runtime session's id is ``<run>:s<i>`` (a journal key: no ``/``), so its effect ids and world keys start with
``<run>:`` (:class:`RuntimeObservation`). Two readings differ from the synthetic driver's, because the runtime is
not that driver: its ledger writes are direct (invariant 6 ends a generation where the writer's fence ends it,
:func:`stale_generation_direct`), and its effect ids carry the turn number (invariant 2 is also checked per model
call across effect ids, :func:`call_delivered_once`). Pure: tested on hand-made data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .checks import CHECKS, Observation, Violation, check_all, generation_windows
from .session_checks import journal_problems


def run_prefix(run_id: str) -> str:
    """What every effect id and world key of a runtime-workload run starts with."""
    return f"{run_id}:"


@dataclass
class RuntimeObservation(Observation):
    """An :class:`~.checks.Observation` of a runtime-workload run: its entries are the sessions' (``<run>:``), and
    ``journals`` what ``journal verify`` and ``journal replay`` said of each session's journal once it ended."""

    journals: dict[str, dict[str, Any]] = field(default_factory=dict)

    def run_entries(self) -> list[Any]:
        prefix = run_prefix(self.run_id)
        return [e for e in self.entries if e.effect_id.startswith(prefix)]


def stale_generation_direct(obs: Observation) -> list[Violation]:
    """Invariant 6 for a **direct** writer (the runtime's :class:`~ouroactors.authorities.ledger.LedgerWriter`).

    :func:`.checks.stale_generation` ends a ledger generation's window at its actor's exit: right for requests
    the ledger actor acts on. A direct writer is fenced by its transaction instead (``ledger/direct.py``): its
    stamp stays good until the *next* generation's recovery transaction commits, which turns every start
    committed before it ``ambiguous`` and makes every later one ``StaleGeneration``. So a start committed a few
    ms after a killed ledger's exit, before its successor started, is what the design promises, not a stale act
    (the runtime workload meets it whenever a ledger dies mid-turn). The window here ends at the successor's
    ``started`` event (after its recovery); an older stamp recorded after a newer one is still a violation.
    """
    out: list[Violation] = []
    windows = generation_windows(obs.events, obs.ledger_path)
    if not windows:
        return out
    starts = sorted(w.start_ns for w in windows.values() if w.start_ns is not None)
    highest: tuple[int, str] | None = None
    for entry in obs.run_entries():
        stamp = entry.authority.get("ledger")
        if stamp is None:
            continue
        window = windows.get(stamp)
        if window is None:
            out.append(Violation("stale-generation", entry.effect_id,
                                 f"stamped with ledger generation {stamp}, which {obs.ledger_path} never had"))
            continue
        successor = next((t for t in starts if window.start_ns is not None and t > window.start_ns), None)
        if successor is not None and entry.started_ns >= successor:
            out.append(Violation("stale-generation", entry.effect_id,
                                 f"recorded {(entry.started_ns - successor) / 1e6:.3f} ms after the generation "
                                 f"that followed {stamp} (its stamp) had started: the fence should have refused it"))
        if highest is not None and stamp < highest[0]:
            out.append(Violation("stale-generation", entry.effect_id,
                                 f"stamped with generation {stamp}, recorded after {highest[1]} which was "
                                 f"stamped {highest[0]}: an older generation acted after a newer one"))
        if highest is None or stamp > highest[0]:
            highest = (stamp, entry.effect_id)
    return out


def call_delivered_once(obs: Observation) -> list[Violation]:
    """Invariant 2 across effect ids: one model call (``<session>/t<n>/<call>``) reaches the world under one id.

    The world dedups by key, and the key is the effect id, which holds the turn number: a runtime that re-ran a
    crashed turn's call under a *new* turn number would deliver it again under another key, unseen by
    :func:`.checks.double_settlement`. Here deliveries are grouped by session and call id.
    """
    calls: dict[tuple[str, str], set[str]] = {}
    for key in obs.deliveries():
        session, _, rest = key.partition("/")
        _turn, _, call = rest.partition("/")
        if call:
            calls.setdefault((session, call), set()).add(key)
    return [Violation("double-settlement", f"{session}/{call}",
                      f"one model call reached the world under {len(keys)} effect ids: {sorted(keys)}")
            for (session, call), keys in sorted(calls.items()) if len(keys) > 1]


def journal_unfaithful(obs: Observation) -> list[Violation]:
    """A journal is evidence whatever the kills did: each session's verifies and replays without divergence
    (:func:`.session_checks.journal_problems`; an honest stop, e.g. a turn a kill left unsettled, is allowed)."""
    journals = obs.journals if isinstance(obs, RuntimeObservation) else {}
    return [v for sid, check in sorted(journals.items()) for v in journal_problems(sid, check)]


def check_runtime_run(obs: Observation) -> list[Violation]:
    """Every invariant of :mod:`.checks`, with invariant 6 judged as the direct writer's fence defines it,
    invariant 2 also across effect ids (:func:`call_delivered_once`), and the sessions' journals faithful."""
    return [*check_all(obs, [name for name in CHECKS if name != "stale-generation"]), *stale_generation_direct(obs),
            *call_delivered_once(obs), *journal_unfaithful(obs)]


__all__ = ["RuntimeObservation", "call_delivered_once", "check_runtime_run", "journal_unfaithful", "run_prefix",
           "stale_generation_direct"]
