"""Terminal rendering shared by CLI commands (rich degrades to plain text off a terminal).

**The tree table off a terminal.** rich lays a table out cell by cell (measure, wrap, pad, crop): ~40 ms for
50 rows, as much as the rest of ``ouroactors tree`` after its imports, and growing with every child. A pipe
gets no colours and no width limit, so for cells of plain printable ASCII (nothing rich would read as
markup, emoji or whitespace to wrap) :func:`plain_table` draws the same characters rich would — a test
compares the two byte for byte — and anything else still goes through rich.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from ..core.generation_text import format_generation

if TYPE_CHECKING:  # `tree` renders rows without importing the handle or the event log
    from rich.table import Table

    from ..supervision.child_info import ChildInfo
    from ..supervision.events import Event
    from ..system.client import SystemClient

TREE_COLUMNS = ("path", "status", "pid", "generation", "restarts", "last exit")
_PLAIN_CELL = re.compile(r"[!-Z\\^-~](?:[ -Z\\^-~]*[!-Z\\^-~])?|")  # printable ASCII but '[' and ']', no edge spaces
_RICH_SPECIAL = re.compile(r":\S*?:|  ")  # an emoji code; runs of spaces (rich may wrap there)
_MAX_PLAIN_WIDTH = 10_000  # far below the pipe width: rich would never wrap such a table


def tree_rows(rows: list[tuple[str, ChildInfo]]) -> list[tuple[str, ...]]:
    """The table's cells, each on one line: a newline in a crash message (``last exit``) is shown as ``\\n``, so a
    row stays one row and the table's lines can be read one by one."""
    return [(one_line(path), one_line(child.status), str(child.pid or "-"), format_generation(child.generation),
             str(child.restarts), one_line(child.last_exit or "-")) for path, child in rows]


def one_line(text: str) -> str:
    """``text`` with newlines, carriage returns, tabs and every other control character shown as escapes
    (:func:`.visible.visible` keeping nothing): text from elsewhere (a crash message, a log message) printed where
    one line is one record cannot start another."""
    from .visible import visible

    return visible(text, keep="")


def tree_table(rows: list[tuple[str, ChildInfo]], title: str = "tree") -> Table:
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for column in TREE_COLUMNS:
        table.add_column(column)
    for cells in tree_rows(rows):
        table.add_row(*cells)
    return table


def plain_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str | None:
    """What rich prints for ``Table(title=title, title_justify="left")`` off a terminal, or None if unsure.

    None when a cell (or the title, or a header) is not plain: rich might read it as markup or an emoji code,
    measure it differently or wrap it; the caller then renders with rich.
    """
    texts = [title, *columns, *(cell for row in rows for cell in row)]
    if any(not _PLAIN_CELL.fullmatch(text) or _RICH_SPECIAL.search(text) for text in texts):
        return None
    widths = [max([len(column), *(len(row[i]) for row in rows)]) + 2 for i, column in enumerate(columns)]
    if sum(widths) + len(widths) + 1 > _MAX_PLAIN_WIDTH or len(title) > sum(widths) + len(widths) - 1:
        return None

    def line(left: str, fill: str, middle: str, right: str) -> str:
        return left + middle.join(fill * width for width in widths) + right

    def cells(edge: str, values: Sequence[str]) -> str:
        return edge + edge.join(f" {value:<{width - 2}} " for value, width in zip(values, widths, strict=True)) + edge

    out = [title, line("┏", "━", "┳", "┓"), cells("┃", columns), line("┡", "━", "╇", "┩")]
    out += [cells("│", row) for row in rows]
    out.append(line("└", "─", "┴", "┘"))
    return "\n".join(out) + "\n"


def print_tree(rows: list[tuple[str, ChildInfo]], title: str = "tree") -> None:
    """The tree table on stdout: drawn here when rich would draw the same (a pipe, plain cells)."""
    from .common import get_console, plain_stdout

    if plain_stdout():
        text = plain_table(title, TREE_COLUMNS, tree_rows(rows))
        if text is not None:
            sys.stdout.write(text)
            sys.stdout.flush()
            return
    get_console().print(tree_table(rows, title))


def children_table(system: SystemClient, root: str) -> Table:
    """The tree under ``root`` as a table, depth first, children in start order."""
    return tree_table(system.walk(root), f"tree {root}")


def event_line(event: Event) -> str:
    """One event as one line (every control character in it escaped, see :func:`one_line`)."""
    when = datetime.fromtimestamp(event.time_ns / 1e9).strftime("%H:%M:%S.%f")[:-3]
    reason = event.fields.get("reason")
    text = f"{when} {event.kind:<20} {event.subject}"
    if event.kind == "fault_fired":
        fields = event.fields
        text += f"  point={fields.get('point')} action={fields.get('action')} hit={fields.get('hit')}"
        if event.subject != event.path:
            text += f" (a plan armed in {event.path})"
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
    return one_line(text)  # one event, one line: a crash message's newline cannot forge another event's line
