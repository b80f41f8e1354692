"""What a re-run turn tells the model about a call whose effect the ledger already holds.

A turn that did not settle (its runtime died, or it waited for an approval and its runtime went away) is run again
from its start by a replacement runtime, which takes the model's recorded answers (:mod:`.reuse`), so the same
calls come again — or, for an answer that was never committed, the model asks for them again. Their effects are in the
ledger, so none runs again (:mod:`.effects`). What the model is told must be what happened, not a failure: an edit
that was made and is reported as failed invites the model to make it another way, a second time.

So the report is the ledger's status, and, when the journal holds the result recorded when the call ran (staged
before its settling commit, so it is durable whenever the settlement is), that very result — the same output the
model saw the first time, marked ``replayed``. An effect settled by someone else (an operator who looked at the
world after the runtime died) has no recorded output: the report says who settled it and why. The decision is pure
(:func:`report`); :func:`recorded_result` reads the journal.
"""

from __future__ import annotations

from typing import Any

from . import blobs
from .loop_ports import ToolResult
from .reading import records

__all__ = ["recorded_result", "report"]


def recorded_result(journal: Any, effect_id: str) -> ToolResult | None:
    """The last ``tool_result`` the session's journal holds for ``effect_id``, its fields kept as blobs (a large
    output) read back (None: none, no journal, or a blob it needs is missing: then its output is not available)."""
    if journal is None:
        return None
    for record in reversed(records(journal.env, journal.session)):
        if record.kind != "tool_result":
            continue
        evidence = record.fields.get("evidence")
        if blobs.is_reference(evidence):  # large evidence (a long effect id, an http tool's) is a blob too
            evidence = blobs.resolve(journal.env, evidence)[1]
        if isinstance(evidence, dict) and evidence.get("effect_id") == effect_id:
            fields = dict(record.fields)
            for name, value in record.fields.items():
                found, fields[name] = blobs.resolve(journal.env, value)
                if not found:
                    return None
            return ToolResult.from_fields(fields)
    return None


def report(call_id: str, tool: str, effect_id: str, status: str, recorded: ToolResult | None,
           settled_by: str | None = None, reason: str | None = None) -> ToolResult:
    """The result of a call not run again because the ledger holds its effect with ``status``."""
    evidence = {"ran": False, "effect_id": effect_id, "ledger": status}
    if recorded is not None and recorded.status == status:  # the run the ledger's settlement records
        return ToolResult(call_id, tool, recorded.status, recorded.output, recorded.truncated, recorded.error,
                          recorded.error_kind, {**recorded.evidence, **evidence, "replayed": True}, recorded.boundary)
    by = f" by {settled_by}" if settled_by else ""
    why = f": {reason}" if reason else ""
    if status == "ok":
        return ToolResult(call_id, tool, "ok", f"[this call ran before and its effect {effect_id} is recorded ok"
                                               f"{by}{why}; it is not run again, and its output is not available]",
                          evidence=evidence)
    if status == "denied":
        return ToolResult(call_id, tool, "denied", error=f"denied before{why}; not asked again",
                          error_kind="denied", evidence=evidence)
    if status == "failed":
        return ToolResult(call_id, tool, "failed", error=f"this call failed before (effect {effect_id} is recorded "
                                                         f"failed{by}{why}); it is not run again",
                          error_kind="already_recorded", evidence=evidence)
    # started / ambiguous / anything else: what happened is not known, and it is not guessed
    return ToolResult(call_id, tool, "unknown", error=f"effect {effect_id} is recorded {status} in the ledger: "
                                                      "whether it happened is not known; it is not run again",
                      error_kind="already_recorded", evidence=evidence)
