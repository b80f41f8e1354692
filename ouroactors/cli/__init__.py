"""The ``ouroactors`` command."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

import click
from rich.console import Console

from ..core.errors import OuroactorsError, SpecError
from ..system.config import load_tree
from .render import children_table, event_line

console = Console()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ouroactors")
def main() -> None:
    """OTP-grade supervision trees for Python actors on thespian."""


@main.command()
@click.option("--base", type=click.Choice(["multiproc", "simple"]), default="multiproc", show_default=True)
@click.option("--data-dir", type=click.Path(file_okay=False), default=".ouroactors/demo", show_default=True)
def demo(base: str, data_dir: str) -> None:
    """Boot an example tree and show supervision at work: crash, kill, generation change, shutdown."""
    from .demo import run_demo

    sys.exit(run_demo(console, base, Path(data_dir)))


@main.command()
@click.argument("tree_file", type=click.Path(dir_okay=False))
def check(tree_file: str) -> None:
    """Validate a tree file without starting anything."""
    try:
        tree = load_tree(tree_file)
    except SpecError as exc:
        console.print(f"[red]{exc}[/red]", highlight=False)
        sys.exit(2)
    count = _count(tree.tree)
    console.print(f"{tree_file}: ok — root {tree.tree.id!r}, {count} children, base {tree.system.base}")


def _count(spec: object) -> int:
    children = getattr(spec, "children", None) or ()
    return sum(1 + _count(child) for child in children)


@main.command()
@click.argument("tree_file", type=click.Path(dir_okay=False))
@click.option("--base", type=click.Choice(["multiproc", "simple"]), default=None)
@click.option("--data-dir", type=click.Path(file_okay=False), default=None)
def run(tree_file: str, base: str | None, data_dir: str | None) -> None:
    """Boot TREE_FILE and serve it until Ctrl-C or SIGTERM, printing supervision events."""
    from ..system.handle import ActorSystem

    try:
        tree = load_tree(tree_file)
    except SpecError as exc:
        console.print(f"[red]{exc}[/red]", highlight=False)
        sys.exit(2)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    system = ActorSystem.start(base or tree.system.base, data_dir or tree.system.data_dir,
                               capabilities=tree.system.capabilities, bind_host=tree.system.bind_host)
    code = 0
    try:
        try:
            system.start_tree(tree.tree)
        except OuroactorsError as exc:
            console.print(f"[red]failed to start: {exc}[/red]")
            sys.exit(3)
        console.print(children_table(system, tree.tree.id))
        console.print(f"serving {tree.tree.id!r} (data dir {system.data_dir}); Ctrl-C to stop")
        seen = 0
        while not stop.is_set():
            events = system.events.all()
            for event in events[seen:]:
                console.print(event_line(event), highlight=False)
                if event.kind == "tree_ended":
                    code = 4
                    stop.set()
            seen = len(events)
            stop.wait(0.2)
    finally:
        system.shutdown()
        console.print("stopped" if code == 0 else "tree ended on its own (escalation or auto_shutdown)")
    sys.exit(code)
