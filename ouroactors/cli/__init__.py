"""The ``ouroactors`` command: run trees, inspect and steer a running system, the demo.

Exit codes: 0 clean stop · 2 bad input (tree file, arguments, data dir in use) · 3 the tree failed
to start · 4 the tree ended on its own (escalation or auto_shutdown) · 5 the system is unreachable.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console

from ..core.errors import SpecError
from ..system.config import load_tree

console = Console()

DATA_DIR_HELP = "the system's data directory (default: the tree file's, else .ouroactors)"


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
        console.print(str(exc), style="red", markup=False, highlight=False)
        sys.exit(2)
    count = _count(tree.tree)
    console.print(f"{tree_file}: ok — root {tree.tree.id!r}, {count} children, base {tree.system.base}",
                  markup=False)


def _count(spec: object) -> int:
    children = getattr(spec, "children", None) or ()
    return sum(1 + _count(child) for child in children)


from . import authorities as _authorities  # noqa: E402  (commands register themselves on ``main``)
from . import chaos as _chaos  # noqa: E402
from . import control as _control  # noqa: E402
from . import faults as _faults  # noqa: E402
from . import inspect as _inspect  # noqa: E402
from . import run as _run  # noqa: E402
from . import sandbox as _sandbox  # noqa: E402

__all__ = ["main"]
del _authorities, _chaos, _control, _faults, _inspect, _run, _sandbox
