"""``ouroactors sandbox``: inspect the command sandbox (bubblewrap) on this machine."""

from __future__ import annotations

import sys

import click

from ..runtime.sandbox import describe, probe
from . import main


@main.group()
def sandbox() -> None:
    """The command sandbox (bubblewrap)."""


@sandbox.command("check")
@click.option("--bwrap", "bwrap_path", type=str, default=None, help="probe this bwrap binary instead of PATH's")
def check(bwrap_path: str | None) -> None:
    """Probe bwrap once with the exact flags commands use; exit 0 if it works here, else 1."""
    found = probe(bwrap_path)
    click.echo(describe(found))
    sys.exit(0 if found.available else 1)
