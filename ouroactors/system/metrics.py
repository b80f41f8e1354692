"""Supervision metrics in the Prometheus text format, derived from events and the live tree.

Counters come from the event log of the current system run (its node epoch), so they survive the
death of any actor and need no state of their own; gauges come from ``which_children``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

from ..supervision.children import ChildInfo
from ..supervision.events import Event


def _labels(**labels: str) -> str:
    inner = ",".join(f'{key}="{_escape(value)}"' for key, value in labels.items())
    return "{" + inner + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


Section = Callable[[Sequence[Event], int], list[str]]  # more metric lines from the same events and node epoch


def render(events: Iterable[Event], children: Iterable[tuple[str, ChildInfo]], epoch: int,
           dropped_frames: Mapping[str, int] | None = None, sections: Sequence[Section] = ()) -> str:
    """The metrics text; ``dropped_frames`` (by reason, from the data dir's counter) is included
    for a multiproc system: inbound frames refused unread (bad MAC, oversize, malformed). ``sections`` add the
    metrics of higher layers (the runtime's, :func:`ouroactors.runtime.execution.metrics.render`), which this layer
    does not import: the caller — the CLI — composes them."""
    events = list(events)  # read once per section
    restarts: Counter[tuple[str, str]] = Counter()
    exits: Counter[tuple[str, str]] = Counter()
    escalations: Counter[str] = Counter()
    generation_changes: Counter[str] = Counter()
    last_exit: dict[str, str] = {}
    for event in events:
        if event.epoch != epoch:
            continue
        if event.kind == "exited":
            kind = (event.reason or {}).get("kind", "unknown")
            last_exit[event.path] = kind
            exits[(event.path, kind)] += 1
        elif event.kind == "restarting":
            restarts[(event.path, last_exit.get(event.path, "unknown"))] += 1
        elif event.kind == "escalated":
            escalations[event.supervisor] += 1
        elif event.kind == "generation_changed":
            generation_changes[event.path] += 1
    status: Counter[tuple[str, str]] = Counter()
    for path, info in children:
        status[(path.rpartition("/")[0], info.status)] += 1
    lines = [
        "# HELP ouroactors_restarts_total Automatic restarts by child and the exit reason that caused them.",
        "# TYPE ouroactors_restarts_total counter",
        *(f"ouroactors_restarts_total{_labels(path=p, reason=r)} {n}" for (p, r), n in sorted(restarts.items())),
        "# HELP ouroactors_exits_total Exits by child and reason.",
        "# TYPE ouroactors_exits_total counter",
        *(f"ouroactors_exits_total{_labels(path=p, reason=r)} {n}" for (p, r), n in sorted(exits.items())),
        "# HELP ouroactors_intensity_reached_total Times a supervisor reached its restart intensity.",
        "# TYPE ouroactors_intensity_reached_total counter",
        *(f"ouroactors_intensity_reached_total{_labels(supervisor=s)} {n}" for s, n in sorted(escalations.items())),
        "# HELP ouroactors_generation_changes_total Generation changes announced without a crash.",
        "# TYPE ouroactors_generation_changes_total counter",
        *(f"ouroactors_generation_changes_total{_labels(path=p)} {n}" for p, n in sorted(generation_changes.items())),
        "# HELP ouroactors_children Children by supervisor and status.",
        "# TYPE ouroactors_children gauge",
        *(f"ouroactors_children{_labels(supervisor=s, status=st)} {n}" for (s, st), n in sorted(status.items())),
    ]
    for section in sections:  # e.g. ouroactors_runtime_*: carried by the runtimes' turn_settled events
        lines += section(events, epoch)
    if dropped_frames is not None:
        lines += [
            "# HELP ouroactors_frames_dropped_total Inbound frames dropped before unpickling, by reason "
            "(mac: no valid tag of the system's secret; oversize: over the frame cap; malformed).",
            "# TYPE ouroactors_frames_dropped_total counter",
            *(f"ouroactors_frames_dropped_total{_labels(reason=r)} {n}" for r, n in sorted(dropped_frames.items())),
        ]
    return "\n".join(lines) + "\n"
