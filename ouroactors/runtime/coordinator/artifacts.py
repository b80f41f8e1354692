"""A session's artifacts: the content it left in its workspace, named by content, read from the ledger (pure).

Seed 001 asks the durable record to carry the session's artifact identifiers. The evidence of what a session
produced is already durable, and only in one place: every file change (``write``, ``edit``, an operator's
``compensation``) is a ledger effect whose start keeps its intent — the path, the content's SHA-256 before and
after — and whose settlement says it happened. So an artifact is derived from those entries rather than copied
into the session record a second time (two copies could disagree; the ledger is the gate every effect went
through): ``sha256:<after>`` names the content, with the path, the effect that made it, and the content it
replaced. Only ``ok`` effects count — a started or ambiguous one may not have happened, a failed one did not.
The last artifact of a path is its current content as far as the session knows (:attr:`Artifact.current`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["Artifact", "artifacts_of"]


@dataclass(frozen=True)
class Artifact:
    artifact_id: str  # "sha256:<hex>" of the content, or "deleted" when the effect removed the file
    path: str
    effect_id: str
    kind: str  # the ledger kind of the effect that produced it
    replaced: str | None  # the content it replaced ("sha256:<hex>"), None when the file was new
    settled_ns: int | None
    current: bool  # the latest artifact of its path in this session


def artifacts_of(entries: Iterable[Any]) -> list[Artifact]:
    """The artifacts of the ledger ``entries`` of one session (any order; non-file effects are skipped)."""
    found: list[tuple[int, Artifact]] = []
    for entry in entries:
        intent = (entry.evidence or {}).get("intent")
        status = getattr(entry.status, "value", entry.status)
        if status != "ok" or not isinstance(intent, dict) or not isinstance(intent.get("path"), str) \
                or "after" not in intent:
            continue
        after, before = intent.get("after"), intent.get("before")
        found.append((entry.seq, Artifact(
            artifact_id=f"sha256:{after}" if isinstance(after, str) else "deleted", path=intent["path"],
            effect_id=entry.effect_id, kind=entry.kind,
            replaced=f"sha256:{before}" if isinstance(before, str) else None, settled_ns=entry.settled_ns,
            current=False)))
    found.sort(key=lambda pair: pair[0])
    latest = {artifact.path: seq for seq, artifact in found}
    return [Artifact(**{**artifact.__dict__, "current": latest[artifact.path] == seq}) for seq, artifact in found]
