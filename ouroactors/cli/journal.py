"""``ouroactors journal …``: read a session's journal from a data dir — verify its chain, replay it, show it.

Reads only (replay runs no tool and writes nothing). Exit codes: 0 ok · 1 the chain is broken (the first bad seq is
named), replay diverged, or the LMDB environment itself is damaged (:mod:`.store_damage`) · 2 bad input (no data
dir, no such session) · 3 replay stopped at a boundary it cannot cross (the turns before it verified).
"""

from __future__ import annotations

import json
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import lmdb
from rich.table import Table

from . import main
from .common import choices_hint, console, data_dir_option, err_console, reports_errors, write_new_file
from .store_damage import reports_damaged_store, store_damaged


def _open(data_dir: str) -> lmdb.Environment:
    from ..authorities.storage.env import StorageConfig, open_env

    config = StorageConfig.under(data_dir)
    if not (Path(config.path) / "data.mdb").is_file():
        err_console.print(f"{data_dir}: no ouroactors data here (no {config.path}/data.mdb){choices_hint(data_dir)}",
                          style="red", markup=False, highlight=False)
        sys.exit(2)
    return open_env(config)


def _need(env: lmdb.Environment, session: str) -> None:
    from ..runtime.execution import reading

    if reading.head(env, session) is None:
        known = ", ".join(reading.sessions(env)[:10]) or "(none)"
        err_console.print(f"no journal for session {session!r}; sessions with a journal: {known}", style="red",
                          markup=False, highlight=False)
        sys.exit(2)


@main.group()
def journal() -> None:
    """Session journals: verify the hash chain, replay through the loop, show the records."""


@journal.command("list")
@data_dir_option
@reports_errors
@reports_damaged_store
def list_sessions(data_dir: str) -> None:
    """Sessions that have a journal in DATA_DIR."""
    from ..runtime.execution import reading

    env = _open(data_dir)
    for session in reading.sessions(env):
        head = reading.head(env, session)
        if head is None:  # listed by its head's key, and that key is not found: gone since (a removal), or damage
            if session in reading.sessions(env):
                store_damaged(data_dir, f"session {session!r} is listed with a journal head that is not found by "
                                        "its key (the anchor database's pages are out of order)")
            continue
        console.print(f"{session}  records {head.first_seq}..{head.head_seq}  {head.bytes} bytes", markup=False)


@journal.command("verify")
@data_dir_option
@click.argument("session")
@click.option("--no-ledger", is_flag=True, help="do not check the journal against the ledger (the hashes its "
              "evidence carries, the tool calls its entries prove)")
@reports_errors
@reports_damaged_store
def verify(data_dir: str, session: str, no_ledger: bool) -> None:
    """Check SESSION's hash chain against its anchor; name the first record that does not follow (exit 1). And
    against the ledger: a tool call its entries prove was journaled that the journal lacks, with no gap record
    naming the loss, is a silent gap (exit 1)."""
    from ..runtime.execution import reading

    env = _open(data_dir)
    _need(env, session)
    entries = [] if no_ledger else reading.ledger_entries(env, session)
    anchors = reading.ledger_anchors(env, session, entries) if entries else {}
    verdict = reading.verify(env, session, anchors)
    if anchors:
        console.print(f"{len(anchors)} journal hash(es) recorded in the ledger checked too", markup=False)
    head = verdict.head_hash.hex() if verdict.head_hash else "-"
    console.print(f"session {session}: {verdict.records} records verified, first seq {verdict.first_seq}, "
                  f"head seq {verdict.head_seq} ({head[:16]}…), verified through {verdict.verified_through}",
                  markup=False)
    _snapshot_line(env, session)
    if not verdict.ok:
        err_console.print(f"BROKEN at seq {verdict.broken_seq}: {verdict.reason}", style="red", markup=False,
                          highlight=False)
        sys.exit(1)
    console.print("chain ok", markup=False)
    pending = reading.pending_loss(env, session)
    if pending is not None:
        kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(pending.kinds.items()))
        console.print(f"gap marker: {pending.count} record(s) lost ({kinds}: {pending.reason}); the session's next "
                      "write names them in a gap record", markup=False)
    if entries:
        _witnessed(env, session, entries, pending)


def _witnessed(env: lmdb.Environment, session: str, entries: list[Any], pending: Any) -> None:
    """What the ledger's entries of the session prove the journal holds (exit 1 on a silent gap)."""
    from ..runtime.execution import reading
    from ..runtime.execution.ledger_witness import unjournaled

    missing = unjournaled(entries, reading.records(env, session), None if pending is None else pending.kinds)
    if missing:
        for line in missing:
            err_console.print(f"SILENT GAP: {line}", style="red", markup=False, highlight=False)
        sys.exit(1)
    console.print(f"{len(entries)} ledger entr{'y' if len(entries) == 1 else 'ies'} of the session: every tool call "
                  "they prove is journaled, or named by a gap record or the gap marker", markup=False)


def _snapshot_line(env: lmdb.Environment, session: str) -> None:
    """Say whether the session's conversation snapshot is one a runtime's open would continue from (not a verdict on
    the chain: a snapshot is a cache, and without it an open replays the whole journal)."""
    from ..runtime.execution import snapshots
    from ..runtime.execution.replay import snapshot_problem

    found, refused = snapshots.offered(env, session, 0)
    if found is None and refused is None:
        return
    problem = refused if found is None else snapshot_problem(env, session, found)
    where = "" if found is None else f" after turn {found.turns} (seq {found.seq})"
    console.print(f"conversation snapshot{where}: " + ("attested by the chain" if problem is None else
                                                       f"not usable, an open replays the whole journal ({problem})"),
                  markup=False)


@journal.command("replay")
@data_dir_option
@click.argument("session")
@click.option("--from-snapshot", is_flag=True,
              help="start from the session's conversation snapshot, as a runtime's open does (checked against the "
                   "chain); the turns before it are not replayed — the way to check a journal cut to its budget")
@reports_errors
@reports_damaged_store
def replay(data_dir: str, session: str, from_snapshot: bool) -> None:
    """Re-run SESSION's turns through the loop with the recording substituted; compare every digest."""
    from functools import partial

    import trio

    from ..runtime.execution import snapshots
    from ..runtime.execution.replay import replay_session

    env = _open(data_dir)
    _need(env, session)
    start, refused = snapshots.offered(env, session, 0) if from_snapshot else (None, None)
    report = trio.run(partial(replay_session, env, session, start=start))
    if from_snapshot:
        why = report.snapshot_refused or refused or ("the session has none" if start is None else None)
        console.print(f"from the conversation snapshot after turn {report.snapshot_turns}" if why is None else
                      f"snapshot not used ({why}): the whole journal replayed", markup=False)
    console.print(f"session {session}: {report.snapshot_turns + report.verified_turns} of "
                  f"{report.turns} turns verified ({report.records} records)", markup=False)
    if report.cut_short:
        console.print(f"{report.cut_short} of those turns were runs cut short before they settled (an approval wait "
                      "or a crash ended their runtime, and a later one ran the turn again): their records are in "
                      "the verified chain; the run that settled is the one replayed", markup=False)
    if report.ended is not None:
        e = report.ended
        console.print(f"turn {e.turn} was ended by its coordinator at seq {e.seq} ({e.status}: {e.reason}), before a "
                      "runtime settled it: its records are in the verified chain; it is not replayed (the loop left "
                      "no settlement to compare)", markup=False)
    if report.divergence is not None:
        d = report.divergence
        err_console.print(f"DIVERGED at seq {d.seq}, turn {d.turn}, field {d.field}: expected {d.expected!r}, "
                          f"got {d.actual!r}", style="red", markup=False, highlight=False)
        sys.exit(1)
    if report.boundary is not None:
        detail = f" — {report.boundary.detail}" if report.boundary.detail else ""
        console.print(f"stopped at seq {report.boundary.seq}: {report.boundary.reason}{detail} (cannot replay past "
                      "it; the turns before it are verified)", markup=False)
        if report.boundary.reason == "unsettled_turn" and (ended := _ended_by_coordinator(env, session)):
            console.print(ended, markup=False)
        sys.exit(3)
    console.print("replay ok: every request and conversation digest matches", markup=False)


def _ended_by_coordinator(env: lmdb.Environment, session: str) -> str | None:
    """Why the journal's last turn has no settlement, when the session's log says: a turn its session's end cut
    short (a cancel in an approval wait, a park) is settled in the log by the coordinator, never in the journal."""
    from ..runtime.coordinator.store import SessionStore

    store = SessionStore(env)
    record = store.get(session)
    last = store.events(session, max(record.committed_cursor - 1, 0), 1) if record is not None else []
    if not last or last[-1].kind != "turn_settled" or last[-1].data.get("settled_by") != "coordinator":
        return None
    data = last[-1].data
    return (f"the session's log ends turn {last[-1].turn} {data.get('status')} ({data.get('reason')}), settled by "
            "its coordinator: no runtime ran that turn to its end, so the journal holds no settlement to check")


class _BlobShown:
    def __init__(self, size: int) -> None:
        self.size = size

    def __repr__(self) -> str:
        return f"<blob, {self.size} bytes>"


def _blob(value: Any) -> Any:
    from ..runtime.execution import blobs

    return _BlobShown(int(value["bytes"])) if blobs.is_reference(value) else value


def _summary(kind: str, fields: dict[str, Any]) -> str:
    keys = {"prompt": ("text",), "steer": ("text", "at_call", "redelivered", "at_end"),
            "steer_received": ("id", "text"), "model_call": ("index", "request_digest"),
            "model_result": ("index", "finish", "error"), "tool_call": ("call_id", "name", "valid"),
            "tool_result": ("call_id", "status", "error"), "turn_settled": ("status", "reason"),
            "turn_ended": ("status", "reason", "settled_by"),
            "gap": ("lost_records", "lost_kinds", "reason"), "truncated": ("dropped_from_seq", "dropped_through_seq")}
    shown = {k: _blob(fields[k]) for k in keys.get(kind, tuple(fields)[:3]) if k in fields}
    text = ", ".join(f"{k}={v!r}" for k, v in shown.items())
    return text if len(text) <= 100 else text[:99] + "…"


@journal.command("show")
@data_dir_option
@click.argument("session")
@click.option("--from", "start", type=click.IntRange(0, 2**63 - 1), default=0, help="first seq to show")
@click.option("--limit", type=click.IntRange(1), default=200, show_default=True, help="most records to show")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per record (bytes as hex)")
@reports_errors
@reports_damaged_store
def show(data_dir: str, session: str, start: int, limit: int, as_json: bool) -> None:
    """SESSION's records: seq, time, turn, kind and the fields that matter."""
    from ..runtime.execution import reading

    env = _open(data_dir)
    _need(env, session)
    records = reading.records(env, session, since=start, limit=limit)
    if as_json:
        for r in records:
            print(json.dumps({"seq": r.seq, "at": r.at, "turn": r.turn, "kind": r.kind, "hash": r.hash.hex(),
                              "fields": r.fields}, default=lambda v: v.hex() if isinstance(v, bytes) else str(v)))
        return
    table = Table(title=f"journal {session}", title_justify="left")
    for column in ("seq", "time", "turn", "kind", "fields"):
        table.add_column(column)
    for r in records:
        when = datetime.fromtimestamp(r.at / 1e9, tz=UTC).strftime("%H:%M:%S.%f")[:-3] if r.at else "-"
        table.add_row(str(r.seq), when, "-" if r.turn is None else str(r.turn), r.kind, _summary(r.kind, r.fields))
    console.print(table)


# -- moving evidence: a journal as one portable file -----------------------------------------------------------

def _checked(data: bytes, session: str | None, what: str) -> tuple[str, Any]:
    """``(session id, chain verdict)`` of an archive's bytes, imported into a scratch environment of its own (so the
    verdict is of exactly these bytes); a file that is not an archive is a usage error naming ``what``."""
    import tempfile

    from ..authorities.storage.env import StorageConfig, close_env, open_env
    from ..runtime.execution import archive, reading
    from ..runtime.execution.journal import JournalError

    with tempfile.TemporaryDirectory(prefix="ouroactors-archive-") as scratch:
        config = StorageConfig.under(scratch, map_size=max(64 << 20, 4 * len(data)))
        env = open_env(config)
        try:
            name = archive.import_journal(env, data, session=session)
            return name, reading.verify(env, name)
        except JournalError as exc:
            raise click.BadParameter(f"{what}: {exc}", param_hint="ARCHIVE_FILE") from None
        finally:
            close_env(config)


def _head_text(verdict: Any) -> str:
    return f"head seq {verdict.head_seq} hash {verdict.head_hash.hex() if verdict.head_hash else '-'}"


@journal.command("export")
@data_dir_option
@click.argument("session")
@click.option("--output", "-o", type=click.Path(dir_okay=False, writable=True), default=None,
              help="the file to write (default: SESSION.journal here); an existing file is not overwritten")
@reports_errors
@reports_damaged_store
def export(data_dir: str, session: str, output: str | None) -> None:
    """Write SESSION's journal to one portable file, byte for byte (records, head, blobs).

    The file carries its own chain: `journal import` on another data dir, then `journal verify` / `replay` there,
    check it as here. It vouches for itself only: compare the head hash printed here with the one the importer
    sees (a forger who rewrites every record can recompute every hash). The verdict printed is of the file's own
    bytes. Exit 1 if its chain does not verify (the file is written anyway: a broken journal is evidence too)."""
    from ..runtime.execution import archive

    env = _open(data_dir)
    _need(env, session)
    target = Path(output if output is not None else f"{session}.journal")
    if target.exists():  # before the export's work (write_new_file refuses it anyway, atomically)
        raise click.BadParameter(f"{target} exists already (choose another file)", param_hint="--output")
    data = archive.export_journal(env, session)
    write_new_file(target, data)  # whole, synced, never over another file
    _, verdict = _checked(data, session, str(target))
    console.print(f"{target}: session {session}, {verdict.records} records verified ({len(data)} bytes), "
                  f"{_head_text(verdict)}", markup=False, highlight=False)
    if not verdict.ok:
        err_console.print(f"the chain is BROKEN at seq {verdict.broken_seq}: {verdict.reason}", style="red",
                          markup=False, highlight=False)
        sys.exit(1)
    console.print(f"chain ok; to check it elsewhere: ouroactors journal import {shlex.quote(str(target))} --data-dir "
                  f"DIR, then ouroactors journal verify {shlex.quote(session)} --data-dir DIR (the same head hash)",
                  markup=False,
                  highlight=False)


@journal.command("import")
@click.option("--data-dir", type=click.Path(file_okay=False), default=".ouroactors", show_default=True,
              help="the data directory to import into (created if it holds no ouroactors data yet)")
@click.argument("archive_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--as", "session", default=None, help="the session id to import under (default: the exported one)")
@click.option("--keep-broken", is_flag=True, help="import a journal whose chain does not verify (to inspect it)")
@reports_errors
@reports_damaged_store
def import_(data_dir: str, archive_file: str, session: str | None, keep_broken: bool) -> None:
    """Import a journal written by `journal export`, to verify, replay and show it here.

    Refused, with nothing written: a file that is not an archive, a session id that has a journal or a session
    here already (a session created under the id would continue that history as its own), and — unless
    --keep-broken — a chain that does not verify (the first bad seq is named; exit 1)."""
    from ..authorities.storage.env import StorageConfig, open_env
    from ..runtime.execution import archive
    from ..runtime.execution.journal import JournalError

    data = Path(archive_file).read_bytes()
    name, verdict = _checked(data, session, archive_file)  # checked first, apart
    if not verdict.ok and not keep_broken:
        err_console.print(f"{archive_file}: the chain is BROKEN at seq {verdict.broken_seq}: {verdict.reason}; "
                          "nothing imported (--keep-broken imports it to inspect)", style="red", markup=False,
                          highlight=False)
        sys.exit(1)
    try:  # the checks against this data dir run in the import's own write transaction
        archive.import_journal(open_env(StorageConfig.under(data_dir)), data, session=name, unless_in=b"sessions")
    except JournalError as exc:
        raise click.BadParameter(str(exc), param_hint="--as") from None
    console.print(f"imported session {name}: {verdict.records} records verified, {_head_text(verdict)}"
                  + ("" if verdict.ok else f" — BROKEN at seq {verdict.broken_seq}"), markup=False,
                  highlight=False)
    where = shlex.quote(data_dir)
    console.print(f"next: ouroactors journal verify {shlex.quote(name)} --data-dir {where}; ouroactors journal "
                  f"replay {shlex.quote(name)} --data-dir {where}", markup=False, highlight=False)
