"""Commands that look at a running system: status, tree, events, metrics."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime
from typing import Any

import click

from ..core.generation_text import format_generation
from ..supervision.child_info import ChildInfo
from ..system import marker as markers
from . import common, main
from .common import connect, connect_client, data_dir_option, reports_errors, resolve_data_dir, say

json_option = click.option("--json", "as_json", is_flag=True, help="one JSON document instead of text")


def _child_json(path: str, info: ChildInfo) -> dict[str, Any]:
    return {"path": path, "id": info.id, "status": info.status, "pid": info.pid, "generation": info.generation,
            "generation_text": format_generation(info.generation), "type": info.type, "actor": info.actor,
            "restarts": info.restarts, "last_exit": info.last_exit, "node": info.node}


@main.command()
@data_dir_option
@json_option
@reports_errors
def status(data_dir: str, as_json: bool) -> None:
    """One line per tree, and children counted by status."""
    system = connect_client(data_dir)  # the thin client: a look needs no specs, supervisor or event log
    found = system.marker
    assert found is not None
    trees = system.trees()
    children = system.walk(trees=trees)  # one look at the trees for both (and no second round of asks)
    if as_json:
        rows = [{"name": t.name, "status": t.status, "pid": t.pid,
                 "children": [_child_json(p, c) for p, c in children if p.startswith(t.name + "/")]}
                for t in trees]
        click.echo(json.dumps({"system": asdict(found), "trees": rows}, indent=2))
        return
    started = datetime.fromtimestamp(found.started_ns / 1e9).strftime("%Y-%m-%d %H:%M:%S")
    say(f"system {found.name} on {found.base}: admin pid {found.admin_pid}, port {found.admin_port}, "
        f"started {started} by pid {found.owner_pid}{' (detached)' if found.detached else ''}, "
        f"node epoch {found.node_epoch}")
    for tree in trees:
        counts: dict[str, int] = {}
        for path, info in children:
            if path.startswith(tree.name + "/"):
                counts[info.status] = counts.get(info.status, 0) + 1
        summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no children"
        pid = f"pid {tree.pid}" if tree.pid is not None else "no pid yet" if tree.status == "starting" else "no pid"
        say(f"tree {tree.name}: {tree.status}, {pid} — {summary}")


@main.command()
@data_dir_option
@click.argument("root", required=False)
@json_option
@reports_errors
def tree(data_dir: str, root: str | None, as_json: bool) -> None:
    """The tree: path, status, pid, generation, restarts, last exit."""
    system = connect_client(data_dir)
    if as_json:
        click.echo(json.dumps([_child_json(path, info) for path, info in system.walk(root)], indent=2))
        return
    from .render import print_tree

    print_tree(system.walk(root))


@main.command()
@data_dir_option
@click.option("--follow", "-f", is_flag=True, help="keep printing new events")
@click.option("--all-runs", is_flag=True, help="include events of earlier system runs")
@click.option("--json", "as_json", is_flag=True, help="raw JSON lines")
@click.option("--path", "paths", multiple=True, metavar="PATH",
              help="only events of the actor at PATH and those below it (repeatable)")
@click.option("--kind", "kinds", multiple=True, metavar="KIND",
              help="only events of this kind: started, exited, restarting, escalated, ... (repeatable)")
@click.option("-n", "--last", "last", type=click.IntRange(min=0), default=None, metavar="N",
              help="only the last N events that match (then, with --follow, every new one)")
def events(data_dir: str, follow: bool, all_runs: bool, as_json: bool, paths: tuple[str, ...],
           kinds: tuple[str, ...], last: int | None) -> None:
    """The supervision events (reads the event log; works even if the system is gone)."""
    from ..supervision.events import EventReader
    from .render import event_line

    data_dir = resolve_data_dir(data_dir)
    if not os.path.isdir(data_dir):
        common.get_console(stderr=True).print(
            f"no data directory {data_dir!r}: nothing has run there (give --data-dir the directory of the system "
            "whose events you want)", style="red", markup=False, highlight=False)
        sys.exit(5)
    found = markers.read_marker_quietly(data_dir)  # type: ignore[arg-type]
    epoch = found.node_epoch if found is not None else None
    reader = EventReader(f"{data_dir}/events.jsonl")

    wanted = event_filter(paths, kinds)
    seen: dict[str, None] = {}  # the kinds of this run's events: what a filter that kept none could have wanted

    def show(batch: list, keep: int | None = None) -> int:
        chosen = []
        for event in batch:
            if all_runs or epoch is None or event.epoch == epoch:
                seen.setdefault(event.kind)
                if wanted(event):
                    chosen.append(event)
        for event in chosen[len(chosen) - keep:] if keep is not None and keep < len(chosen) else chosen:
            common.get_console().print(json.dumps(event.to_json()) if as_json else event_line(event),
                                       markup=False, highlight=False, soft_wrap=True)
        return len(chosen)

    if not show(reader.poll(), last) and (paths or kinds) and seen:
        common.get_console(stderr=True).print(
            f"no event matches {' and '.join(filter(None, (_either('--path', paths), _either('--kind', kinds))))}; "
            f"the kinds logged: {', '.join(sorted(seen))}", markup=False, highlight=False)
    while follow:
        time.sleep(0.2)  # tail -f cadence
        show(reader.poll())


def _either(option: str, values: tuple[str, ...]) -> str:
    return " or ".join(f"{option} {v}" for v in values)


def event_filter(paths: tuple[str, ...], kinds: tuple[str, ...]) -> Callable[[Any], bool]:
    """Whether an event is wanted: its path (or the actor it is about, :attr:`~ouroactors.supervision.events.Event
    .subject`) is one of ``paths`` or below one (a whole part: ``app/a`` is not below ``app/ab``), and its kind one of
    ``kinds``; an empty tuple wants every one."""
    prefixes = tuple(p.strip("/") for p in paths)

    def wanted(event: Any) -> bool:
        if kinds and event.kind not in kinds:
            return False
        return not prefixes or any(where == p or where.startswith(p + "/")
                                   for where in {event.path, event.subject} for p in prefixes)
    return wanted


@main.command()
@data_dir_option
@reports_errors
def metrics(data_dir: str) -> None:
    """Supervision metrics in the Prometheus text format."""
    from ..runtime.execution.metrics import render as runtime_metrics
    from ..system.metrics import render

    system = connect(data_dir)
    click.echo(render(system.events.all(), system.walk(), system.context.node_epoch, sections=(runtime_metrics,)),
               nl=False)
