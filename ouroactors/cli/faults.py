"""``ouroactors faults …``: arm fault plans on a running system, by hand or from a file."""

from __future__ import annotations

import sys

import click

from ..core import faults as fault_points
from . import main
from .common import connect, console, data_dir_option, err_console, reports_errors


def _known_points() -> dict[str, str]:
    # Importing the authorities registers their points.
    from ..authorities.grants import actor as _grants  # noqa: F401
    from ..authorities.ledger import actor as _ledger  # noqa: F401
    from ..authorities.storage import commit as _commit  # noqa: F401
    from ..authorities.workspace import actor as _workspace  # noqa: F401

    return fault_points.known_points()


@main.group()
def faults() -> None:
    """Fault plans: where and how to fail (see `faults points`)."""


@faults.command("arm")
@data_dir_option
@click.argument("plan_file", type=click.Path(dir_okay=False))
@click.option("--at", "path", default=None, help="only this actor (default: every running actor)")
@reports_errors
def arm(data_dir: str, plan_file: str, path: str | None) -> None:
    """Arm PLAN_FILE (TOML, [[rules]]) in the actors' processes; every firing becomes an event."""
    try:
        plan = fault_points.load_plan(plan_file)
    except ValueError as exc:
        err_console.print(str(exc), style="red", markup=False, highlight=False)
        sys.exit(2)
    _known_points()
    system = connect(data_dir)
    actors = [p for p, info in system.walk() if info.type == "worker"]
    for warning in fault_points.validate_plan(plan, [f"message.{p}" for p in actors]):
        err_console.print(f"warning: {warning}", markup=False, highlight=False)
    armed = system.arm_faults(path, plan)
    console.print(f"armed {len(plan.rules)} rule(s) in {len(armed)} actor(s)", markup=False)


@faults.command("disarm")
@data_dir_option
@click.option("--at", "path", default=None, help="only this actor (default: every running actor)")
@reports_errors
def disarm(data_dir: str, path: str | None) -> None:
    """Disarm fault plans."""
    armed = connect(data_dir).arm_faults(path, None)
    console.print(f"disarmed {len(armed)} actor(s)", markup=False)


@faults.command("points")
def points() -> None:
    """The named fault points of the framework (plus `message.<path>` for every actor)."""
    for name, doc in sorted(_known_points().items()):
        console.print(f"{name:<32} {doc}", markup=False)
    console.print(f"{'message.<actor path>':<32} before an actor handles a message (drop, duplicate, …)", markup=False)
