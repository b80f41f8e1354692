"""Commands that steer a running system: kill, restart, terminate, start-child, stop."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import click

from ..core import procs
from ..core.errors import ChildNotFound, NoSuchActor, OuroactorsError, SimpleOneForOneOnly
from ..system import marker as markers
from . import main
from .common import (
    connect,
    console,
    data_dir_option,
    err_console,
    json_literal,
    not_nan,
    reports_errors,
    resolve_data_dir,
)


def _split(path: str) -> tuple[str, str]:
    parent, _, child = path.strip("/").rpartition("/")
    if not parent:
        raise click.BadParameter(f"{path!r} is a tree root; give the path of a child, e.g. {path}/worker")
    return parent, child


def _no_such_child(system: Any, path: str) -> str:
    """``ChildNotFound`` said only the last id: name the full path and the children that do exist."""
    parent = path.strip("/").rpartition("/")[0]
    try:
        here = sorted(f"{parent}/{c.id}" for c in system.which_children(parent)) if parent else \
            sorted(t.name for t in system.trees())
    except OuroactorsError:
        here = []
    listed = ", ".join(here) if here else "none"
    return f"no actor at {path!r}; {'children of ' + parent if parent else 'trees'}: {listed}"


@main.command()
@data_dir_option
@click.argument("path")
@click.option("--force", is_flag=True, help="also kill a tree's root (the whole tree ends)")
@reports_errors
def kill(data_dir: str, path: str, force: bool) -> None:
    """SIGKILL the process of the actor at PATH (fault injection by hand)."""
    if "/" not in path.strip("/") and not force:
        err_console.print(f"{path!r} is a tree's root: killing it ends the whole tree (its supervisor above is the "
                          "host, which does not restart trees). Pass --force to do it anyway.", markup=False)
        sys.exit(2)
    system = connect(data_dir)
    try:
        pid = system.kill(path)
    except (ChildNotFound, NoSuchActor):
        err_console.print(_no_such_child(system, path), style="red", markup=False, highlight=False)
        sys.exit(2)
    console.print(f"killed {path} (pid {pid})", markup=False)


@main.command()
@data_dir_option
@click.argument("path")
@reports_errors
def terminate(data_dir: str, path: str) -> None:
    """Terminate the child at PATH (OTP terminate_child); its spec is kept unless temporary."""
    parent, child = _split(path)
    system = connect(data_dir)
    try:
        system.terminate_child(parent, child)
    except ChildNotFound:
        err_console.print(_no_such_child(system, path), style="red", markup=False, highlight=False)
        sys.exit(2)
    console.print(f"terminated {path}", markup=False)


@main.command()
@data_dir_option
@click.argument("path")
@reports_errors
def restart(data_dir: str, path: str) -> None:
    """Terminate the child at PATH if it runs, then start it again (OTP restart_child)."""
    parent, child = _split(path)
    system = connect(data_dir)
    try:
        system.terminate_child(parent, child)
        info = system.restart_child(parent, child)
    except SimpleOneForOneOnly:
        err_console.print(f"{parent} is simple_one_for_one: dynamic children cannot be restarted by id; "
                          "use `kill` (it is restarted by its restart type) or `terminate`", markup=False)
        sys.exit(2)
    except ChildNotFound:
        err_console.print(_no_such_child(system, path), style="red", markup=False, highlight=False)
        sys.exit(2)
    console.print(f"restarted {path} (pid {info.pid})", markup=False)


def _literal(text: str, index: int = 0) -> object:
    """An argument of ``start-child`` as the value it spells (see :func:`.common.json_literal`)."""
    return json_literal(text, f"'ARGS' (argument {index + 1})")


@main.command("start-child")
@data_dir_option
@click.argument("supervisor_path")
@click.argument("args", nargs=-1)
@reports_errors
def start_child(data_dir: str, supervisor_path: str, args: tuple[str, ...]) -> None:
    """Start a dynamic child of a simple_one_for_one supervisor with extra ARGS (JSON literals)."""
    values = tuple(_literal(a, i) for i, a in enumerate(args))  # all of them before the system is reached
    info = connect(data_dir).start_child(supervisor_path, values)
    console.print(f"started {supervisor_path}/{info.id} (pid {info.pid})", markup=False)


@main.command()
@data_dir_option
@click.option("--timeout", type=click.FloatRange(0, 86400, min_open=True), default=60.0, show_default=True,
              callback=not_nan,
              help="seconds for the orderly stop, all trees together; what is still stopping then is killed "
                   "(exit 1, and `stop_forced` in the event log)")
@reports_errors
def stop(data_dir: str, timeout: float) -> None:
    """Stop the system serving DATA_DIR: trees in reverse order, then every process."""
    data_dir = resolve_data_dir(data_dir)
    directory = Path(data_dir)
    found = markers.read_marker(directory)
    if found is None or not markers.is_live(found):
        err_console.print(f"no live system serves {data_dir}", markup=False)
        sys.exit(5)
    # Nothing is signalled on the marker's word alone: its processes must be this system's.
    markers.verify_processes(directory, found)
    owner_alive = markers.process_start_ticks(found.owner_pid) is not None
    forced: list[str] = []
    if owner_alive and not found.detached and found.owner_pid != os.getpid():
        markers.verify_owner(directory, found)
        os.kill(found.owner_pid, signal.SIGTERM)  # the foreground `run` shuts down in order
        deadline = time.monotonic() + timeout
        while markers.process_start_ticks(found.owner_pid) is not None and time.monotonic() < deadline:
            time.sleep(0.05)  # waiting for another process to finish, bounded
    else:
        system = connect(data_dir)
        current = system.marker or found
        if current != found:  # swapped since it was verified: verify what will be signalled
            markers.verify_processes(directory, current)
        system.shutdown(timeout=timeout)
        forced = system.forced
    mark = procs.system_mark(found.admin_pid, found.admin_start_ticks) if found.admin_pid is not None else None
    if left := procs.left_behind(found.admin_pgid, mark):
        err_console.print(f"system still running (session {found.admin_pgid}: pids {', '.join(map(str, left))})",
                          markup=False)
        sys.exit(1)
    if forced:  # ended, but not in order: what was still stopping did not run its on_stop to the end
        err_console.print(f"the orderly stop did not finish within {timeout:g}s (still stopping: tree "
                          f"{', '.join(forced)}): every process of the system in {data_dir} was killed; "
                          "`ouroactors events` shows how far it got", markup=False)
        sys.exit(1)
    console.print(f"stopped the system in {data_dir}", markup=False)
