"""Terminal rendering shared by CLI commands (rich degrades to plain text off a terminal)."""

from __future__ import annotations

from datetime import datetime

from rich.table import Table

from ..core.generation_text import format_generation
from ..supervision.children import ChildInfo
from ..supervision.events import Event
from ..system.handle import ActorSystem


def tree_table(rows: list[tuple[str, ChildInfo]], title: str = "tree") -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("path", "status", "pid", "generation", "restarts", "last exit"):
        table.add_column(column)
    for path, child in rows:
        table.add_row(path, child.status, str(child.pid or "-"), format_generation(child.generation),
                      str(child.restarts), child.last_exit or "-")
    return table


def children_table(system: ActorSystem, root: str) -> Table:
    """The tree under ``root`` as a table, depth first, children in start order."""
    return tree_table(system.walk(root), f"tree {root}")


def event_line(event: Event) -> str:
    when = datetime.fromtimestamp(event.time_ns / 1e9).strftime("%H:%M:%S.%f")[:-3]
    reason = event.fields.get("reason")
    text = f"{when} {event.kind:<20} {event.path}"
    if isinstance(reason, dict):
        text += f"  reason={reason.get('kind')}"
        if reason.get("info"):
            text += f"({reason['info']})"
        if reason.get("exc_type"):
            text += f" {reason['exc_type']}: {reason.get('message')}"
    elif isinstance(reason, str):
        text += f"  reason={reason}"
    if "due_in" in event.fields:
        text += f"  next attempt in {event.fields['due_in']:.3f}s"
    return text
