"""``ouroactors session export``: a session's whole durable history as one JSON file (see
:mod:`ouroactors.runtime.coordinator.export` for what it holds and why)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from .common import choices_hint, console, data_dir_option, reports_errors, write_new_file
from .session import SESSION_ID, session
from .store_damage import reports_damaged_store


@session.command("export")
@data_dir_option
@click.argument("session_id", type=SESSION_ID)
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None,
              help="the file to write (default: SESSION_ID.session.json here); an existing file is not overwritten")
@reports_errors
@reports_damaged_store
def session_export(data_dir: str, session_id: str, output: str | None) -> None:
    """Write the session's durable history to one JSON file: its record (state, version, pinned versions, waits
    and their expiry, identifiers), the next valid transitions, every committed event, the accepted and rejected
    resume events, its ledger effects (idempotency keys, evidence), its approvals, its artifacts and its journal
    (verdict, head, and the archive `journal import` takes back).

    Reads the data dir's files (the session's records in one snapshot), with the system up or down: the data
    dir's owner only."""
    from ..authorities.storage.env import StorageConfig, open_env
    from ..runtime.coordinator.export import export_session

    config = StorageConfig.under(data_dir)
    if not (Path(config.path) / "data.mdb").is_file():
        raise click.BadParameter(
            f"{data_dir}: no ouroactors data here (no {config.path}/data.mdb){choices_hint(data_dir)}",
            param_hint="--data-dir")
    target = Path(output if output is not None else f"{session_id}.session.json")
    if target.exists():  # before the export's work (write_new_file refuses it anyway, atomically)
        raise click.BadParameter(f"{target} exists already (choose another file)", param_hint="--output")
    document = export_session(open_env(config), session_id)
    write_new_file(target, (json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode())
    journal = document["journal"]
    if journal is None:
        chain = "no journal"
    else:
        verdict = "ok" if journal["ok"] else f"BROKEN at seq {journal['broken_seq']}"
        chain = f"journal {journal['records']} records, chain {verdict}"
    console.print(f"{target}: session {session_id} ({document['session']['state']}, version "
                  f"{document['session']['state_version']}): {len(document['events'])} events, "
                  f"{len(document['effects'])} effects, {len(document['approvals'])} approvals, {chain}"
                  + (f"; {len(document['unreadable'])} record(s) unreadable" if document["unreadable"] else ""),
                  markup=False, highlight=False)


__all__ = ["session_export"]
