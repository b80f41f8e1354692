"""Session runtime metrics: counted per turn in the runtime, carried by its ``turn_settled`` event, summed at read.

Like the supervision metrics (:mod:`ouroactors.system.metrics`), these are **derived from the event log** of the
current system run: they survive the death of any runtime and need no state of their own. A runtime does not write
an event per tool call (the log is opened per event); it counts the turn's model calls, tool calls by outcome and
tool-call latencies in a :class:`TurnStats` and puts the counts in the ``turn_settled`` event it writes anyway. A
turn whose runtime crashed before it settled is therefore not counted (its evidence is the journal and the ledger).

Exposed (Prometheus text, with the supervision metrics — ``ouroactors metrics`` and ``run --metrics-port``):

* ``ouroactors_runtime_turns_total{status}`` — settled turns by status (completed, failed, interrupted, ...);
* ``ouroactors_runtime_tool_calls_total{outcome}`` — tool calls by outcome (ok, failed, denied, unknown,
  cancelled);
* ``ouroactors_runtime_model_calls_total`` and ``ouroactors_runtime_model_retries_total`` (one per retried attempt,
  from the ``model_retry`` events);
* ``ouroactors_runtime_step_seconds`` — histogram of one tool call's effect path (grant decision → ledger start →
  the tool → settlement), the step the runtime benchmark measures.

Pure: no thespian, no clock (the caller passes durations).
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

STEP_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
FIELD = "metrics"  # the key of the counts in a turn_settled event's fields


@dataclass
class TurnStats:
    """What one turn did, counted as it runs (in the runtime's trio thread only: no locks)."""

    model_calls: int = 0
    tool_calls: Counter[str] = field(default_factory=Counter)
    step_buckets: list[int] = field(default_factory=lambda: [0] * (len(STEP_BUCKETS_S) + 1))  # last: +Inf
    step_sum_s: float = 0.0

    def model_call(self) -> None:
        self.model_calls += 1

    def tool_call(self, outcome: str, seconds: float) -> None:
        self.tool_calls[outcome] += 1
        self.step_buckets[bisect.bisect_left(STEP_BUCKETS_S, seconds)] += 1
        self.step_sum_s += seconds

    def fields(self) -> dict[str, Any]:
        """The counts as event fields (JSON)."""
        return {"model_calls": self.model_calls, "tool_calls": dict(self.tool_calls),
                "step_buckets": list(self.step_buckets), "step_sum_s": round(self.step_sum_s, 6)}

    def take(self) -> dict[str, Any]:
        """The counts so far as event fields, and start counting afresh."""
        taken = self.fields()
        self.model_calls, self.tool_calls, self.step_sum_s = 0, Counter(), 0.0
        self.step_buckets = [0] * (len(STEP_BUCKETS_S) + 1)
        return taken


def _labels(**labels: str) -> str:
    inner = ",".join(f'{key}="{value}"' for key, value in labels.items())
    return "{" + inner + "}"


def render(events: Iterable[Any], epoch: int) -> list[str]:
    """Prometheus lines for the runtime metrics of the system run ``epoch`` (events as :class:`~ouroactors.
    supervision.events.Event`). A malformed count in an event is skipped, never fatal to the whole page."""
    turns: Counter[str] = Counter()
    tools: Counter[str] = Counter()
    model_calls = retries = 0
    buckets = [0] * (len(STEP_BUCKETS_S) + 1)
    step_sum = 0.0
    for event in events:
        if event.epoch != epoch:
            continue
        if event.kind == "model_retry":
            retries += 1
            continue
        counts = event.fields.get(FIELD) if event.kind == "turn_settled" else None
        if not isinstance(counts, dict):
            continue
        turns[str(event.fields.get("status", "unknown"))] += 1
        try:
            model_calls += int(counts.get("model_calls", 0))
            for outcome, n in (counts.get("tool_calls") or {}).items():
                tools[str(outcome)] += int(n)
            got = [int(n) for n in counts.get("step_buckets") or ()]
            if len(got) == len(buckets):
                buckets = [a + b for a, b in zip(buckets, got, strict=True)]
            step_sum += float(counts.get("step_sum_s", 0.0))
        except (TypeError, ValueError, AttributeError):
            continue
    cumulative, lines = 0, []
    for bound, n in zip((*STEP_BUCKETS_S, None), buckets, strict=True):
        cumulative += n
        le = "+Inf" if bound is None else f"{bound:g}"
        lines.append(f"ouroactors_runtime_step_seconds_bucket{_labels(le=le)} {cumulative}")
    return [
        "# HELP ouroactors_runtime_turns_total Settled turns of session runtimes, by status.",
        "# TYPE ouroactors_runtime_turns_total counter",
        *(f"ouroactors_runtime_turns_total{_labels(status=s)} {n}" for s, n in sorted(turns.items())),
        "# HELP ouroactors_runtime_tool_calls_total Tool calls of settled turns, by outcome.",
        "# TYPE ouroactors_runtime_tool_calls_total counter",
        *(f"ouroactors_runtime_tool_calls_total{_labels(outcome=o)} {n}" for o, n in sorted(tools.items())),
        "# HELP ouroactors_runtime_model_calls_total Model calls of settled turns.",
        "# TYPE ouroactors_runtime_model_calls_total counter",
        f"ouroactors_runtime_model_calls_total {model_calls}",
        "# HELP ouroactors_runtime_model_retries_total Model call attempts retried (429/5xx, connect errors).",
        "# TYPE ouroactors_runtime_model_retries_total counter",
        f"ouroactors_runtime_model_retries_total {retries}",
        "# HELP ouroactors_runtime_step_seconds One tool call's effect path: grant, ledger start, tool, settlement.",
        "# TYPE ouroactors_runtime_step_seconds histogram",
        *lines,
        f"ouroactors_runtime_step_seconds_sum {step_sum:.6f}",
        f"ouroactors_runtime_step_seconds_count {cumulative}",
    ]


__all__ = ["FIELD", "STEP_BUCKETS_S", "TurnStats", "render"]
