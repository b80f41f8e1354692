"""``ouroactors workspace …``: who holds which root, which worktrees the authority made, and an operator's cleanup.

What a user looks at when a message is answered "its workspace is held by another session's turn": the live leases
(active, or reserved for a lost owner's recovery) with their session and fencing token. A lease's capability is never
shown (only its owner's recovery presents it). Cleaning up a worktree is the operator's, with the credentials kept in
the data dir (as for approvals): the authority verifies them and still refuses while a live lease or reservation
overlaps the worktree, and keeps a dirty one.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from typing import Any

import click

from ..authorities.asking import ask_authority
from . import main
from .common import connect_client, console, data_dir_option, reports_errors

path_option = click.option("--at", "actor_path", default=None, help="tree path of the workspace authority")
LEASE_FIELDS = ("root", "mode", "session_id", "status", "fencing_token", "acquired_ns", "lease_id")
WORKTREE_FIELDS = ("path", "repo", "session_id", "branch", "created_ns")


@main.group()
def workspace() -> None:
    """Workspace leases and worktrees: who holds which root; an operator's worktree cleanup."""


def _when(ns: Any) -> str:
    return datetime.fromtimestamp(ns / 1e9).strftime("%Y-%m-%d %H:%M:%S") if isinstance(ns, int) else "-"


def _read(client: Any, actor_path: str | None, what: str) -> list[Any]:
    found = client.ask(actor_path or "agent/workspace", what)  # a read: no stamp needed
    if not isinstance(found, list):
        raise click.ClickException(f"the workspace authority answered {found!r} to a {what} read")
    return found


def _rows(records: list[Any], fields: tuple[str, ...]) -> list[dict[str, Any]]:
    """The shown fields of each record (and only those: a lease's capability is never among them)."""
    return [{f: getattr(record, f) for f in fields} for record in records]


def _listing(rows: list[dict[str, Any]], as_json: bool, none: str, columns: tuple[str, ...], times: str) -> None:
    """Rows as JSON lines, or a table of ``columns`` (``times``: the one shown as a date), or ``none``."""
    if as_json:
        for row in rows:
            click.echo(json.dumps(row, default=str))
        return
    if not rows:
        console.print(none, markup=False)
        return
    from rich.markup import escape
    from rich.table import Table

    table = Table()
    for column in columns:
        table.add_column(column.removesuffix("_ns").replace("_", " "))
    for row in rows:  # escaped: a path such as "[x]" is text, not rich markup
        table.add_row(*(_when(row[c]) if c == times else escape(str(row[c])) for c in columns))
    console.print(table)


@workspace.command("leases")
@data_dir_option
@path_option
@click.option("--json", "as_json", is_flag=True, help="one JSON object per lease")
@reports_errors
def workspace_leases(data_dir: str, actor_path: str | None, as_json: bool) -> None:
    """Live leases: active, or reserved for the recovery of an owner that stopped answering."""
    rows = _rows(_read(connect_client(data_dir), actor_path, "leases"), LEASE_FIELDS)
    rows.sort(key=lambda r: (r["root"], r["fencing_token"]))
    _listing(rows, as_json, "no live leases", LEASE_FIELDS[:-1], "acquired_ns")


@workspace.command("worktrees")
@data_dir_option
@path_option
@click.option("--json", "as_json", is_flag=True, help="one JSON object per worktree")
@reports_errors
def workspace_worktrees(data_dir: str, actor_path: str | None, as_json: bool) -> None:
    """Worktrees the authority made, and the session that owns each."""
    rows = _rows(_read(connect_client(data_dir), actor_path, "worktrees"), WORKTREE_FIELDS)
    _listing(rows, as_json, "no worktrees", WORKTREE_FIELDS, "created_ns")


@workspace.command("cleanup")
@data_dir_option
@path_option
@click.argument("worktree", type=click.Path(file_okay=False))
@reports_errors
def workspace_cleanup(data_dir: str, actor_path: str | None, worktree: str) -> None:
    """Remove WORKTREE as the data dir's operator: refused while a live lease or reservation overlaps it; a dirty
    one is kept."""
    from ..authorities.grants.operators import read_credentials
    from ..authorities.workspace.messages import CleanupWorktree

    path = os.path.realpath(worktree)
    client = connect_client(data_dir)
    known = [t for t in _read(client, actor_path, "worktrees") if t.path == path]
    if not known:
        raise click.UsageError(f"the workspace authority made no worktree at {path} (see `ouroactors workspace "
                               "worktrees`)")
    name, token = read_credentials(data_dir)  # the operator's verified identity, never a claimed name
    result = ask_authority(client, actor_path or "agent/workspace",
                           CleanupWorktree(known[0].repo, path, operator=name, token=token))
    removed = getattr(result, "removed", False)
    console.print(f"{path}: " + ("removed" if removed else "kept: it has changes nobody committed"), markup=False)
