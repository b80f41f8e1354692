"""``ouroactors session list|show|artifacts``: what a session is and what it left, as a reader looks at it.

Registered on the ``session`` group of :mod:`.session` (imported at its end). ``show`` prints the durable record and,
beside it, what needs an answer: the approval a waiting session asks, with the command that answers it, and each
effect whose outcome the ledger does not know, with the command that settles it.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime
from typing import Any

import click

from ..authorities.grants.proposal import ELIDED
from ..core.errors import OuroactorsError
from .common import console, data_dir_option, reports_errors
from .session import SESSION_ID, _sessions, session
from .session_text import arguments_text, wait_text


def print_view(view: Any) -> None:
    from ..core.generation_text import format_generation

    runtime = f"{view.runtime_id} (generation {format_generation(view.generation)})" if view.runtime_id else "-"
    rows = [("session", view.session_id), ("state", view.state), ("state version", str(view.state_version)),
            ("committed cursor", str(view.committed_cursor)), ("runtime", runtime), ("reason", view.reason or "-"),
            ("principal", view.principal), ("rejected events", str(view.rejections)),
            ("waits on", ", ".join(wait_text(w) for w in view.waits) or "-"),
            ("next valid", ", ".join(getattr(view, "next_events", ())) or "none: terminal"),
            ("pinned", ", ".join(f"{k} {v}" for k, v in (getattr(view, "pinned", None) or {}).items()) or "-")]
    for key, value in rows:
        console.print(f"{key:>17}: {value}", markup=False, highlight=False)


def view_json(view: Any) -> dict[str, Any]:
    """A session view as plain JSON data (the fields :class:`~ouroactors.sessions.SessionView` has)."""
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(view).items()}


@session.command("list")
@data_dir_option
@click.option("--all", "show_all", is_flag=True, help="terminal sessions too")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per session")
@reports_errors
def session_list(data_dir: str, show_all: bool, as_json: bool) -> None:
    """Sessions of this node you may read (your own; the data dir's owner reads all), not terminal unless --all."""
    views = _sessions(data_dir).list(all=show_all)
    if as_json:
        for view in views:
            click.echo(json.dumps(view_json(view)))
        return
    if not views:
        console.print("no sessions" if show_all else "no live sessions (--all lists ended ones too)")
        return
    from rich.table import Table
    table = Table()
    for column, key in (("session", "session_id"), ("principal", "principal"), ("state", "state")):
        # whole, however narrow the terminal: these are what a reader copies into the next command
        table.add_column(column, no_wrap=True, min_width=max([len(column), *(len(getattr(v, key)) for v in views)]))
    for column in ("version", "cursor", "runtime", "updated", "reason"):
        table.add_column(column)
    for view in views:
        updated = datetime.fromtimestamp(view.updated_ns / 1e9).strftime("%H:%M:%S")
        table.add_row(view.session_id, view.principal, view.state, str(view.state_version),
                      str(view.committed_cursor), (view.runtime_id or "-")[:12], updated, view.reason or "-")
    console.print(table)


@session.command("show")
@data_dir_option
@click.argument("session_id", type=SESSION_ID)
@click.option("--json", "as_json", is_flag=True, help="one JSON object: the view, its pending approvals and its "
              "unknown outcomes")
@reports_errors
def session_show(data_dir: str, session_id: str, as_json: bool) -> None:
    """A session's durable state: workflow state, version, cursor, runtime, reason (and what an approval it waits
    on asks for, and each effect whose outcome is unknown, with the commands that answer them)."""
    api = _sessions(data_dir)
    view = api.show(session_id)
    approvals = api.approvals(session_id) if view.state == "waiting:approval" else []
    if as_json:  # the same facts for a script; an unanswered ledger is an error here, not a line
        click.echo(json.dumps({
            **view_json(view),
            "approvals": [{"approval_id": a.approval_id, "tool": a.tool, "arguments": a.arguments,
                           "state_version": a.state_version} for a in approvals],
            "unknown_outcomes": [{"effect_id": e.effect_id, "kind": e.kind, "reason": e.reason}
                                 for e in api.unknown_effects(session_id)]}, default=repr))
        return
    print_view(view)
    for approval in approvals:
        console.print(f"{'approval':>17}: {approval.approval_id} {approval.tool} "
                      f"{arguments_text(approval.arguments)} (asked at version {approval.state_version})",
                      markup=False, highlight=False)
        if ELIDED in json.dumps(approval.arguments, default=repr):  # a large write's content: its size and digest
            console.print(f"{'whole call':>17}: shown by its SHA-256 and first characters; every byte is in its "
                          f"tool_call event: ouroactors session events {session_id} --json", markup=False,
                          highlight=False)
        console.print(f"{'answer':>17}: ouroactors session approve|deny {session_id} {approval.approval_id}",
                      markup=False, highlight=False)
    try:
        unknown = api.unknown_effects(session_id)  # an unknown outcome is said where the session is looked at
    except OuroactorsError as exc:  # the record is shown even while the ledger does not answer
        console.print(f"{'unknown outcome':>17}: not known now (the ledger did not answer: {exc})", markup=False,
                      highlight=False)
        unknown = []
    for entry in unknown:
        console.print(f"{'unknown outcome':>17}: {entry.effect_id} ({entry.kind}): {entry.reason or 'ambiguous'}",
                      markup=False, highlight=False)
        console.print(f"{'settle':>17}: ouroactors ledger settle {entry.effect_id} ok|failed --reason 'what you "
                      "found'", markup=False, highlight=False)


@session.command("artifacts")
@data_dir_option
@click.argument("session_id", type=SESSION_ID)
@click.option("--json", "as_json", is_flag=True, help="one JSON object per artifact")
@reports_errors
def session_artifacts(data_dir: str, session_id: str, as_json: bool) -> None:
    """What the session left in its workspace, named by content (sha256), from its settled ledger effects."""
    found = _sessions(data_dir).artifacts(session_id)
    if as_json:
        for artifact in found:
            click.echo(json.dumps(artifact.__dict__))
        return
    from rich.table import Table
    table = Table()
    for column in ("artifact", "path", "effect", "replaced", "current"):
        table.add_column(column)
    for a in found:
        table.add_row(a.artifact_id[:19], a.path, a.effect_id, (a.replaced or "-")[:19], "yes" if a.current else "")
    console.print(table)


__all__ = ["print_view", "view_json"]
