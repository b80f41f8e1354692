"""Terminal rendering shared by CLI commands (rich degrades to plain text off a terminal)."""

from __future__ import annotations

from datetime import datetime

from rich.table import Table

from ..supervision.events import Event
from ..supervision.generations import epoch_of
from ..system.handle import ActorSystem


def children_table(system: ActorSystem, root: str) -> Table:
    """The tree as a table, depth first, children in start order."""
    table = Table(title=f"tree {root}", title_justify="left")
    for column in ("path", "status", "pid", "generation", "restarts", "last exit"):
        table.add_column(column)

    def walk(path: str) -> None:
        for child in reversed(system.which_children(path)):  # OTP order is newest first
            child_path = f"{path}/{child.id}"
            table.add_row(child_path, child.status, str(child.pid or "-"), format_generation(child.generation),
                          str(child.restarts), child.last_exit or "-")
            if child.type == "supervisor" and child.status == "running":
                walk(child_path)

    walk(root)
    return table


def format_generation(generation: int | None) -> str:
    """``epoch.micros``: which system start, and when in it, the incarnation began."""
    if generation is None:
        return "-"
    return f"{epoch_of(generation)}.{generation & ((1 << 48) - 1)}"


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
    return text
