"""What the ledger says a session did that its journal does not (pure): losses no ``gap`` record names.

A journal verifies on its own (its chain, its head, the ledger's anchors: :func:`.reading.verify`), but a chain that
is whole says nothing of a record that was never written: a writer that lost records and never wrote a ``gap`` for
them leaves a shorter chain that verifies just as well. The ledger is the witness that can tell, because the records
of a tool call ride in its transactions (:mod:`.effects`):

* the call's ``tool_call`` commits with its ``started`` entry (or earlier: the journal's records of the model's answer
  that asked for it are carried before an approval's wait), so every entry the ledger holds for the session has a
  ``tool_call`` with its turn and call id in the journal;
* the call's ``tool_result`` commits with the runtime's settlement (``settled_by == "runner"``), so every entry the
  runtime settled has one too. An entry settled by anybody else (recovery, a reconciler, an operator) or never
  settled needs none.

An entry whose record is missing is excused only by a ``gap`` record counting a lost record of that kind (or of a
kind it could not name: ``(other)``, ``(unknown)``), or by the session's gap marker counting one (a loss its writer
recorded before it died, which the next write will name); each excuse is used once. A journal whose old turns a size
budget dropped (a ``truncated`` record) is not judged: what it dropped is said, not lost. This is DESIGN's
invariant 4 — "gaps are recorded, never silent" — as a check (``session_dump.journal_check``, the fault-injection
invariant ``journal-unfaithful``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

_TURN = re.compile(r"t(\d+)\Z")
WILDCARDS = ("(other)", "(unknown)")


class RecordLike(Protocol):
    @property
    def kind(self) -> str: ...
    @property
    def turn(self) -> int | None: ...
    @property
    def fields(self) -> Mapping[str, Any]: ...


class EntryLike(Protocol):
    @property
    def effect_id(self) -> str: ...
    @property
    def turn_id(self) -> str | None: ...
    @property
    def call_id(self) -> str | None: ...
    @property
    def settled_by(self) -> str | None: ...


def unjournaled(entries: Iterable[EntryLike], records: Iterable[RecordLike],
                pending: Mapping[str, int] | None = None) -> list[str]:
    """One line per record the ledger proves the journal should hold, that it lacks, and that no gap excuses.
    ``pending``: the kinds a gap marker counts (:func:`.reading.pending_loss`) — a loss recorded durably that the
    session's next write will name in a gap record; it excuses as a gap does."""
    calls: set[tuple[int | None, Any]] = set()
    results: set[tuple[int | None, Any]] = set()
    excuses: Counter[str] = Counter({k: n for k, n in (pending or {}).items() if type(n) is int and n > 0})
    for r in records:
        if r.kind == "truncated":
            return []
        if r.kind == "tool_call":
            calls.add((r.turn, r.fields.get("call_id")))
        elif r.kind == "tool_result":
            results.add((r.turn, r.fields.get("call_id")))
        elif r.kind == "gap":
            kinds = r.fields.get("lost_kinds")
            for kind, n in (kinds.items() if isinstance(kinds, Mapping) else ()):
                if isinstance(kind, str) and type(n) is int and n > 0:
                    excuses[kind] += n
    missing: list[str] = []
    for entry in sorted(entries, key=lambda e: e.effect_id):
        turn = _TURN.match(entry.turn_id or "")
        if turn is None or entry.call_id is None:
            continue  # not a tool call of a turn: nothing in the journal answers for it
        key = (int(turn.group(1)), entry.call_id)
        needed = [("tool_call", key in calls)]
        if entry.settled_by == "runner":
            needed.append(("tool_result", key in results))
        for kind, present in needed:
            if present or _excused(excuses, kind):
                continue
            missing.append(f"effect {entry.effect_id!r}: the ledger has it, the journal has no {kind} for turn "
                           f"{key[0]} call {key[1]!r}, and no gap record names a lost {kind}")
    return missing


def _excused(excuses: Counter[str], kind: str) -> bool:
    for name in (kind, *WILDCARDS):
        if excuses[name] > 0:
            excuses[name] -= 1
            return True
    return False


__all__ = ["unjournaled"]
