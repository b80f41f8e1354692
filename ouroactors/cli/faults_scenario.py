"""``ouroactors faults enumerate-scenario TREE_FILE DRIVE [--check CHECK]``: crash enumeration of your own scenario.

DRIVE and CHECK are ``module:function`` import paths (the current directory is on the import path, as for every
command): ``drive(system)`` sends the scenario's requests, ``check(system)`` returns (or yields) what no longer
holds once the tree has recovered — see :mod:`ouroactors.faults.scenario`. Each site is printed as it ends.
Exit codes: 0 every site kept every invariant · 1 a violation · 2 bad input (a --data-dir that is not empty or a
live system's, --points matching no site) · 3 the harness failed.
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

import click

from .common import console, err_console, not_nan
from .faults import EXIT_BAD_INPUT, EXIT_HARNESS, EXIT_OK, EXIT_VIOLATION, _bad, faults


def callable_at(path: str, option: str) -> Any:
    """The function at ``module:function``; a usage error naming ``option`` otherwise."""
    module_name, sep, name = path.partition(":")
    if not sep or not module_name or not name:
        raise click.BadParameter(f"{path!r} must look like 'module:function'", param_hint=option)
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise click.BadParameter(f"{path!r} does not import: {type(exc).__name__}: {exc} (run from the "
                                 "project's directory, or add it to PYTHONPATH)", param_hint=option) from None
    for part in name.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise click.BadParameter(f"{path!r}: {module_name!r} has no attribute {name!r}", param_hint=option)
    if not callable(target):
        raise click.BadParameter(f"{path!r} is not callable", param_hint=option)
    return target


@faults.command("enumerate-scenario")
@click.argument("tree_file", type=click.Path(dir_okay=False))
@click.argument("drive")
@click.option("--check", "check", default=None, metavar="MODULE:FUNCTION",
              help="what must hold after each crash, once the tree has recovered (returns or yields violations)")
@click.option("--base", type=click.Choice(["multiproc", "simple"]), default=None,
              help="override [system] base; simple: a simulated system, each crash a simulated death")
@click.option("--points", "points", multiple=True, metavar="GLOB",
              help="only sites at matching points (repeatable), e.g. 'message.app/*' or 'myapp.*'")
@click.option("--max-sites", type=click.IntRange(min=1), default=None, help="crash at no more than this many sites")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="keep every run's data dir here (record, site1, …): a new or empty directory (default: a temp dir, "
                   "removed after)")
@click.option("--drive-timeout", type=click.FloatRange(min=0, min_open=True, max=86400), default=120.0,
              show_default=True, metavar="SECONDS", callback=not_nan,
              help="a run whose DRIVE has not returned by then is a violation (the system is shut down under it)")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per site, then a summary object")
@click.option("--list", "list_only", is_flag=True,
              help="only record: print the sites a crash would be tried at (after --points, --max-sites), crash none")
def enumerate_scenario_command(tree_file: str, drive: str, check: str | None, base: str | None,
                               points: tuple[str, ...], max_sites: int | None, data_dir: str | None,
                               drive_timeout: float, as_json: bool, list_only: bool) -> None:
    """Crash your own scenario (DRIVE, a module:function taking the system) at every site it reaches on TREE_FILE,
    one fresh system per site; check after each (exit 0: nothing broken, 1: violations, 3: harness error)."""
    from ..core.errors import SpecError
    from ..faults.preflight import data_dir_problem, no_site_selected
    from ..faults.scenario import enumerate_scenario
    from ..system.config import load_tree

    try:
        tree = load_tree(tree_file)
    except SpecError as exc:
        err_console.print(str(exc), style="red", markup=False, highlight=False, soft_wrap=True)
        sys.exit(EXIT_BAD_INPUT)
    drive_fn, check_fn = callable_at(drive, "DRIVE"), callable_at(check, "--check") if check else None
    if data_dir is not None and (problem := data_dir_problem(data_dir)) is not None:
        _bad(problem)

    def shown(row: Any) -> None:
        entry = {"#": row.index, "actor": row.site.path, "point": row.site.point, "hit": row.site.nth,
                 "outcome": row.outcome, "violations": row.violations, "drive_error": row.drive_error,
                 "error": row.error, "seconds": round(row.duration_s, 3)}
        if as_json:
            console.print(json.dumps(entry, sort_keys=True), markup=False, highlight=False, soft_wrap=True)
            return
        console.print(f"{row.index:>3}  {row.site}  {row.outcome}", markup=False, highlight=False, soft_wrap=True)
        for text in [*row.violations, *([f"the harness failed: {row.error}"] if row.error else [])]:
            console.print(f"       {text}", markup=False, highlight=False, soft_wrap=True)

    if list_only:
        _list_sites(tree.tree, drive_fn, check_fn, base or tree.system.base, points, max_sites, data_dir, as_json)
    report = enumerate_scenario(tree.tree, drive_fn, check_fn, points=points or None,
                                base=base or tree.system.base, data_dir=data_dir, limit=max_sites, on_row=shown,
                                drive_timeout=drive_timeout,
                                warn=lambda text: err_console.print(text, style="yellow", markup=False))
    baseline = report.baseline
    if baseline.outcome != "ok":
        for text in baseline.violations or [f"the harness failed: {baseline.error}"]:
            err_console.print(f"the crash-free run: {text}", style="red", markup=False, soft_wrap=True)
        sys.exit(EXIT_VIOLATION if baseline.outcome == "VIOLATION" else EXIT_HARNESS)
    if not report.rows:  # crashed nowhere: nothing was tested, never a pass
        _bad(no_site_selected("--points", points, report.recorded))
    summary = {"sites": len(report.rows), **report.summary(), "seconds": round(report.duration_s, 1)}
    if as_json:
        console.print(json.dumps({"summary": summary}, sort_keys=True), markup=False, highlight=False)
    else:
        console.print(f"{len(report.rows)} site(s) in {report.duration_s:.1f}s: {report.summary()}", markup=False,
                      highlight=False)
    outcomes = report.summary()
    sys.exit(EXIT_VIOLATION if outcomes.get("VIOLATION") else EXIT_HARNESS if outcomes.get("error") else EXIT_OK)


def _list_sites(spec: Any, drive: Any, check: Any, base: str, points: tuple[str, ...], max_sites: int | None,
                data_dir: str | None, as_json: bool) -> None:
    """The recording run alone: the sites the scenario reaches, numbered as a crash run would aim at them."""
    import shutil
    import tempfile
    from pathlib import Path

    from ..faults.enumerate import select_sites, sites_from
    from ..faults.preflight import no_site_selected
    from ..faults.scenario import ScenarioRunner

    root = Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix="ouroactors-scenario-"))
    try:
        baseline, firings = ScenarioRunner(spec, drive, check, base, root, 20.0).record()
    finally:
        if data_dir is None:
            shutil.rmtree(root, ignore_errors=True)
    if baseline.outcome != "ok":
        for text in baseline.violations or [f"the harness failed: {baseline.error}"]:
            err_console.print(f"the crash-free run: {text}", style="red", markup=False, soft_wrap=True)
        sys.exit(EXIT_VIOLATION if baseline.outcome == "VIOLATION" else EXIT_HARNESS)
    warn = lambda text: err_console.print(text, style="yellow", markup=False)  # noqa: E731
    recorded = sites_from(firings, shared=base == "simple")
    sites = select_sites(recorded, points or None, warn)[:max_sites]
    if not sites:
        _bad(no_site_selected("--points", points, recorded))
    for index, site in enumerate(sites, start=1):
        entry = {"#": index, "actor": site.path, "point": site.point, "hit": site.nth}
        console.print(json.dumps(entry, sort_keys=True) if as_json else f"{index:>3}  {site}", markup=False,
                      highlight=False, soft_wrap=True)
    if not as_json:
        console.print(f"{len(sites)} site(s) of {len(firings)} point hit(s) recorded", markup=False, highlight=False)
    sys.exit(EXIT_OK)
