"""A lost runtime's unsettled effects, as recovery needs them: found, then handed to their reconcilers.

Seed 001: when a runtime dies, "unsettled effects are reconciled (ledger reconcilers) or left ambiguous and
surfaced", and only then may a replacement resume. So recovery asks the ledger two things, both as jobs' asks:

* :func:`unsettled` — the session's ``started``/``ambiguous`` entries, each flagged with whether its kind has a
  reconciler registered in the ledger (:class:`~ouroactors.authorities.ledger.messages.ReconcilerKinds`). The
  pure table (:func:`.recovery.decide`) parks a session with an effect nobody can reconcile, and otherwise
  chooses REPLACE with those effects to reconcile first.
* :func:`reconcile` — after the session moved to ``recovering``: the ledger sweeps dead writers (the runtime that
  just died left its starts ``started``), runs the reconcilers over the session's ambiguous entries, and names what
  is still unsettled. :func:`.recovery.reconciled` parks the session on any of those: an effect whose outcome its
  reconciler could not establish is as unproven as one without a reconciler, and a replacement would re-run the
  turn around it.

The ledger answers for itself; nothing here guesses an outcome.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Generator
from typing import Any

from ...authorities.ledger.messages import ListEntries, Reconcile, ReconcilerKinds, SessionReconciled
from ...core.errors import OuroactorsError
from . import recovery
from .calls import Ask, OffThread, TimedOut

UNSETTLED = ("started", "ambiguous")
LIST_TIMEOUT_S = 10.0
RECONCILE_ATTEMPTS = 3
RECONCILE_PAUSE_S = 1.0
RECONCILE_TIMEOUT_S = 60.0  # reconcilers ask the world (the http one waits up to 5 s per effect)

LedgerAsk = Callable[[Any, float], Ask]  # (request, timeout) -> the stamped ask to the ledger


def unsettled(ledger: LedgerAsk, session: str) -> Generator[Ask, Any, tuple[recovery.Effect, ...]]:
    """The session's unsettled effects, each with whether its kind has a reconciler."""
    entries = yield ledger(ListEntries(None, session, None, 0, 10_000), LIST_TIMEOUT_S)
    if isinstance(entries, BaseException | TimedOut):
        raise OuroactorsError(f"the ledger did not list the session's effects: {entries!r}")
    found = [e for e in entries if e.status.value in UNSETTLED]
    if not found:
        return ()
    kinds = yield from reconciler_kinds(ledger)
    return tuple(recovery.Effect(e.effect_id, e.status.value, e.kind in kinds) for e in found)


def reconciler_kinds(ledger: LedgerAsk) -> Generator[Ask, Any, frozenset[str]]:
    kinds = yield ledger(ReconcilerKinds(), LIST_TIMEOUT_S)
    if isinstance(kinds, BaseException | TimedOut) or not isinstance(kinds, tuple):
        raise OuroactorsError(f"the ledger did not name its reconcilers: {kinds!r}")
    return frozenset(kinds)


def reconcile(ledger: LedgerAsk, session: str) -> Generator[Ask, Any, tuple[str, ...]]:
    """Hand the session's ambiguous effects to their reconcilers; the effect ids still unsettled afterwards."""
    answer = yield ledger(Reconcile(session), RECONCILE_TIMEOUT_S)
    if not isinstance(answer, SessionReconciled):
        raise OuroactorsError(f"the ledger did not reconcile the session's effects: {answer!r}")
    return tuple(effect_id for effect_id, _status in answer.unsettled)


def settle(ledger: LedgerAsk, session: str) -> Generator[Ask | OffThread, Any, tuple[str, ...]]:
    """:func:`reconcile`, asked again (up to :data:`RECONCILE_ATTEMPTS` times, :data:`RECONCILE_PAUSE_S` apart)
    while an effect stays unsettled: a reconciler that could not reach the world a moment after the runtime died
    answers nothing, which proves nothing — only what is still unsettled after the last attempt parks the session."""
    left = yield from reconcile(ledger, session)
    for _ in range(RECONCILE_ATTEMPTS - 1):
        if not left:
            break
        yield OffThread(functools.partial(time.sleep, RECONCILE_PAUSE_S))  # a retry's backoff, not a synchronisation
        left = yield from reconcile(ledger, session)
    return left


__all__ = ["RECONCILE_ATTEMPTS", "UNSETTLED", "reconcile", "reconciler_kinds", "settle", "unsettled"]
