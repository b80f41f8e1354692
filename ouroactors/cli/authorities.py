"""Commands for the agent runtime's authorities: ``storage …``, ``ledger …`` and ``approvals …``.

Every request is stamped with the generation of the authority looked up just before it
(:func:`~ouroactors.authorities.asking.ask_authority`): authorities serve no unstamped request.
An operator's settlement or answer carries the credentials in the data dir, which the authority
verifies; a name typed on the command line proves nothing.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from ..authorities.asking import ask_authority
from . import main
from .common import connect_client, console, data_dir_option, reports_errors
from .visible import visible

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
    from ..core.generation_text import format_generation

    info = connect_client(data_dir).ask(actor_path or "agent/storage", "status")  # a read: no stamp needed
    for key, value in info.items():
        shown = format_generation(value) if key == "generation" and isinstance(value, int) else value
        console.print(f"{key:>12}: {shown}", markup=False)


@storage.command("backup")
@data_dir_option
@path_option
@click.argument("target", type=click.Path(file_okay=False))
@reports_errors
def storage_backup(data_dir: str, actor_path: str | None, target: str) -> None:
    """Write a consistent, compacted copy of the environment into the empty directory TARGET."""
    from ..authorities.storage.actor import Backup

    if not target.strip():
        raise click.BadParameter("is empty: name the new directory to write the backup into", param_hint="'TARGET'")
    # absolute, links not followed: the storage authority judges the target itself (a link is refused there)
    written = ask_authority(connect_client(data_dir), actor_path or "agent/storage",
                            Backup(os.path.abspath(target)), timeout=600)
    console.print(f"backup written to {written}", markup=False)


@storage.group("quarantine")
def storage_quarantine() -> None:
    """Records an authority could not decode: list them; discard the ones it can do without (offline)."""


def _offline_env(data_dir: str) -> Any:
    """The data dir's environment, opened here — refused while a live system serves the data dir."""
    from ..authorities.storage.env import StorageConfig, open_env
    from ..system.marker import is_live, read_marker

    if not (Path(data_dir) / "lmdb").is_dir():
        raise click.UsageError(f"{data_dir} holds no LMDB environment")
    marker = read_marker(Path(data_dir))
    if marker is not None and is_live(marker):
        raise click.UsageError(f"a system serves {data_dir}: its authorities hold what they loaded; stop it first "
                               "(ouroactors stop)")
    return open_env(StorageConfig.under(data_dir))


@storage_quarantine.command("list")
@data_dir_option
@click.option("--json", "as_json", is_flag=True)
@reports_errors
def storage_quarantine_list(data_dir: str, as_json: bool) -> None:
    """Every quarantined record and what became of its original (in place, changed, gone, discarded)."""
    from ..authorities.storage.quarantine import listing

    found = listing(_offline_env(data_dir))
    if as_json:
        for item in found:
            click.echo(json.dumps(item.__dict__))
        return
    from rich.table import Table
    table = Table()
    for column in ("key", "bytes", "original", "by"):
        table.add_column(column)
    for item in found:
        table.add_row(item.key, str(item.size), item.state, item.discarded_by or "-")
    console.print(table)


@storage_quarantine.command("discard")
@data_dir_option
@click.argument("key")
@reports_errors
def storage_quarantine_discard(data_dir: str, key: str) -> None:
    """Delete the original of quarantined KEY (grants and workspace records only; the copy stays as evidence),
    as the data dir's operator, with the system stopped."""
    from ..authorities.grants.operators import read_credentials
    from ..authorities.storage.quarantine import DISCARDABLE, discard

    env = _offline_env(data_dir)
    who, _ = read_credentials(data_dir)
    done = discard(env, key, f"operator:{who}")
    console.print(f"{done.key}: discarded by {done.discarded_by} — {DISCARDABLE[done.db]}", markup=False)


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

    entries = ask_authority(connect_client(data_dir), actor_path or "agent/ledger",
                            ListEntries(status, session, kind, 0, limit))
    if as_json:
        for entry in entries:
            click.echo(json.dumps(entry.model_dump(mode="json")))
        return
    from rich.table import Table
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

    entry = ask_authority(connect_client(data_dir), actor_path or "agent/ledger", GetEntry(effect_id))
    click.echo(json.dumps(entry.model_dump(mode="json"), indent=2))


@ledger.command("settle")
@data_dir_option
@path_option
@click.argument("effect_id")
@click.argument("status", type=click.Choice(["ok", "failed"]))
@click.option("--reason", required=True, help="what the operator found (recorded)")
@click.option("--operator", default=None,
              help="expected operator name: refused unless it is the one in the data dir's credentials")
@reports_errors
def ledger_settle(data_dir: str, actor_path: str | None, effect_id: str, status: str, reason: str,
                  operator: str | None) -> None:
    """Settle an ambiguous (or started) effect by hand, as the operator whose credentials are in
    the data dir (the ledger verifies them); recorded with who settled it and why."""
    from ..authorities.grants.operators import read_credentials
    from ..authorities.ledger.actor import OperatorSettle

    who, token = read_credentials(data_dir)  # the verified identity, never a claimed name
    if operator is not None and operator != who:
        raise click.BadParameter(f"{operator!r}: the credentials in {data_dir} are {who!r}'s", param_hint="--operator")
    answer = ask_authority(connect_client(data_dir), actor_path or "agent/ledger",
                           OperatorSettle(effect_id, status, reason, who, token))
    if answer.answer == "existing":  # settled so before (by its runtime, or an operator): nothing changed now
        by = answer.entry.settled_by or "its runtime"
        console.print(f"{effect_id}: already {answer.entry.status.value} (settled by {by}); nothing changed",
                      markup=False)
        return
    console.print(f"{effect_id}: {answer.entry.status.value} ({answer.answer}), settled by operator:{who}",
                  markup=False)


@ledger.command("compensate")
@data_dir_option
@click.argument("effect_id")
@click.option("--reason", required=True, help="why the write is undone (recorded)")
@reports_errors
def ledger_compensate(data_dir: str, effect_id: str, reason: str) -> None:
    """Undo a session's file write (write, edit): the file back to its content from before, recorded in the
    ledger as a compensation; refused, nothing changed, if the file changed since or the session is running."""
    from ..sessions import Sessions

    entry = Sessions(connect_client(data_dir)).compensate(effect_id, reason)
    what = "removed" if entry.evidence.get("removed") else f"restored to {entry.evidence.get('sha256', '')[:12]}"
    console.print(f"{effect_id}: compensated by {entry.effect_id} ({entry.status.value}): {entry.evidence['path']} "
                  f"{what}", markup=False)


@main.group()
def approvals() -> None:
    """Durable approvals: list them and answer as a verified operator."""


@approvals.command("list")
@data_dir_option
@path_option
@click.option("--status", type=click.Choice(["pending", "approved", "denied", "expired", "consumed"]), default=None)
@click.option("--session", default=None)
@click.option("--json", "as_json", is_flag=True, help="one JSON object per approval")
@reports_errors
def approvals_list(data_dir: str, actor_path: str | None, status: str | None, session: str | None,
                   as_json: bool) -> None:
    """Approvals, oldest first."""
    import dataclasses

    from ..authorities.grants.actor import ListApprovals
    from .session_text import arguments_text

    rows = ask_authority(connect_client(data_dir), actor_path or "agent/grants", ListApprovals(status, session))
    if as_json:
        for a in rows:
            click.echo(json.dumps(dataclasses.asdict(a), default=str))
        return
    from rich.table import Table
    table = Table()
    for column in ("approval", "session", "tool", "arguments", "state", "status", "answered by", "refusals"):
        table.add_column(column)
    for a in rows:  # the call's own arguments (what it was judged against: `approvals show`); the console shows
        # every cell as text, control characters escaped (.visible): "- [x] done" is no markup, ESC is no command
        table.add_row(a.approval_id, a.session_id, a.tool, arguments_text(a.arguments, 120), str(a.state_version),
                      a.status, a.answered_by or "-", str(len(a.refusals)))
    console.print(table)


def _no_approval(approval_id: str) -> click.BadParameter:
    """An approval id the grants authority does not hold: bad input (exit 2), as `session approve` says it."""
    return click.BadParameter(f"no approval {approval_id!r} (`ouroactors approvals list` names them)",
                              param_hint="APPROVAL_ID")


def _arguments(arguments: Any) -> str:
    """The canonical arguments as JSON (what the operator is asked to approve)."""
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=repr)


@approvals.command("show")
@data_dir_option
@path_option
@click.argument("approval_id")
@reports_errors
def approvals_show(data_dir: str, actor_path: str | None, approval_id: str) -> None:
    """Everything about one approval, with the exact arguments of the call it approves."""
    from ..authorities.grants.actor import ListApprovals

    found = [a for a in ask_authority(connect_client(data_dir), actor_path or "agent/grants", ListApprovals())
             if a.approval_id == approval_id]
    if not found:
        raise _no_approval(approval_id)
    a = found[0]
    click.echo(visible(json.dumps({  # JSON escapes C0 controls only: a direction override would reach the terminal
        "approval": a.approval_id, "session": a.session_id, "tool": a.tool, "arguments": a.arguments,
        "call_digest": a.call_digest, "state_version": a.state_version, "status": a.status,
        "answerers": list(a.answerers), "answered_by": a.answered_by, "reason": a.reason,
        "refusals": list(a.refusals)}, indent=2, sort_keys=True, ensure_ascii=False, default=repr)))


def _answer(data_dir: str, actor_path: str | None, approval_id: str, approve: bool, reason: str | None) -> None:
    from ..authorities.grants.actor import AnswerApproval, ListApprovals
    from ..authorities.grants.operators import read_credentials

    name, token = read_credentials(data_dir)  # the operator's verified identity, never a claimed name
    system = connect_client(data_dir)
    path = actor_path or "agent/grants"
    found = [a for a in ask_authority(system, path, ListApprovals()) if a.approval_id == approval_id]
    if not found:
        raise _no_approval(approval_id)
    approval = found[0]  # the operator answers for exactly the call and state version shown
    console.print(f"{approval.tool} {_arguments(approval.arguments)}", markup=False, highlight=False)
    answered = ask_authority(system, path, AnswerApproval(approval_id, approve, name, token, approval.call_digest,
                                                          approval.state_version, reason))
    console.print(f"{approval_id}: {answered.status} by {answered.answered_by}", markup=False)


@approvals.command("approve")
@data_dir_option
@path_option
@click.argument("approval_id")
@click.option("--reason", default=None)
@reports_errors
def approvals_approve(data_dir: str, actor_path: str | None, approval_id: str, reason: str | None) -> None:
    """Approve a pending approval (with the operator credentials in the data dir)."""
    _answer(data_dir, actor_path, approval_id, True, reason)


@approvals.command("deny")
@data_dir_option
@path_option
@click.argument("approval_id")
@click.option("--reason", default=None)
@reports_errors
def approvals_deny(data_dir: str, actor_path: str | None, approval_id: str, reason: str | None) -> None:
    """Deny a pending approval."""
    _answer(data_dir, actor_path, approval_id, False, reason)
