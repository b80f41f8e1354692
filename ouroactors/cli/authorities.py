"""Commands for the agent runtime's authorities: ``storage …`` and ``ledger …``."""

from __future__ import annotations

import getpass
import json
from datetime import datetime
from pathlib import Path

import click
from rich.table import Table

from . import main
from .common import connect, console, data_dir_option, reports_errors

path_option = click.option("--at", "actor_path", default=None, help="tree path of the authority")


@main.group()
def storage() -> None:
    """The storage authority (the node's LMDB environment)."""


@storage.command("status")
@data_dir_option
@path_option
@reports_errors
def storage_status(data_dir: str, actor_path: str | None) -> None:
    """Schema, generation, map size and usage."""
    info = connect(data_dir).ask(actor_path or "agent/storage", "status")
    for key, value in info.items():
        console.print(f"{key:>12}: {value}", markup=False)


@storage.command("backup")
@data_dir_option
@path_option
@click.argument("target", type=click.Path(file_okay=False))
@reports_errors
def storage_backup(data_dir: str, actor_path: str | None, target: str) -> None:
    """Write a consistent, compacted copy of the environment into the empty directory TARGET."""
    from ..authorities.storage.actor import Backup

    written = connect(data_dir).ask(actor_path or "agent/storage", Backup(str(Path(target).resolve())), timeout=600)
    console.print(f"backup written to {written}", markup=False)


@main.group()
def ledger() -> None:
    """The write-ahead effect ledger: list, show and settle effects."""


@ledger.command("list")
@data_dir_option
@path_option
@click.option("--status", type=click.Choice(["started", "ok", "failed", "denied", "ambiguous"]), default=None)
@click.option("--session", default=None)
@click.option("--kind", default=None)
@click.option("--limit", type=click.IntRange(1, 10_000), default=100, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@reports_errors
def ledger_list(data_dir: str, actor_path: str | None, status: str | None, session: str | None, kind: str | None,
                limit: int, as_json: bool) -> None:
    """Effects in the order they were recorded."""
    from ..authorities.ledger.actor import ListEntries

    entries = connect(data_dir).ask(actor_path or "agent/ledger", ListEntries(status, session, kind, 0, limit))
    if as_json:
        for entry in entries:
            click.echo(json.dumps(entry.model_dump(mode="json")))
        return
    table = Table()
    for column in ("seq", "effect", "kind", "status", "session", "started", "reason"):
        table.add_column(column)
    for entry in entries:
        started = datetime.fromtimestamp(entry.started_ns / 1e9).strftime("%H:%M:%S")
        table.add_row(str(entry.seq), entry.effect_id, entry.kind, entry.status.value, entry.session_id or "-",
                      started, entry.reason or "-")
    console.print(table)


@ledger.command("show")
@data_dir_option
@path_option
@click.argument("effect_id")
@reports_errors
def ledger_show(data_dir: str, actor_path: str | None, effect_id: str) -> None:
    """Everything recorded about one effect."""
    from ..authorities.ledger.actor import GetEntry

    entry = connect(data_dir).ask(actor_path or "agent/ledger", GetEntry(effect_id))
    click.echo(json.dumps(entry.model_dump(mode="json"), indent=2))


@ledger.command("settle")
@data_dir_option
@path_option
@click.argument("effect_id")
@click.argument("status", type=click.Choice(["ok", "failed"]))
@click.option("--reason", required=True, help="what the operator found (recorded)")
@click.option("--operator", default=None, help="who settles it (default: your user name)")
@reports_errors
def ledger_settle(data_dir: str, actor_path: str | None, effect_id: str, status: str, reason: str,
                  operator: str | None) -> None:
    """Settle an ambiguous (or started) effect by hand; recorded with who settled it and why."""
    from ..authorities.ledger.actor import OperatorSettle

    who = operator or getpass.getuser()
    answer = connect(data_dir).ask(actor_path or "agent/ledger", OperatorSettle(effect_id, status, reason, who))
    console.print(f"{effect_id}: {answer.entry.status.value} ({answer.answer}), settled by operator:{who}",
                  markup=False)
