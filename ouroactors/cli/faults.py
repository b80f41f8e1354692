"""``ouroactors faults …``: arm fault plans on a running system, by hand or from a file; enumerate
the crash sites of a tree's workload (``faults enumerate``)."""

from __future__ import annotations

import importlib
import json
import os
import shlex
import stat
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NoReturn

import click

from ..core import faults as fault_points
from . import main
from .common import connect, console, data_dir_option, err_console, not_nan, reports_errors


def _known_points() -> dict[str, str]:
    # Importing the authorities and the agent runtime (the session runtime, its coordinator) registers their points.
    from ..authorities.grants import actor as _grants  # noqa: F401
    from ..authorities.ledger import actor as _ledger  # noqa: F401
    from ..authorities.storage import commit as _commit  # noqa: F401
    from ..authorities.workspace import actor as _workspace  # noqa: F401
    from ..runtime.coordinator import actor as _coordinator  # noqa: F401
    from ..runtime.execution import runtime as _runtime  # noqa: F401

    return fault_points.known_points()


@main.group()
def faults() -> None:
    """Fault plans: where and how to fail (see `faults points`)."""


@faults.command("arm")
@data_dir_option
@click.argument("plan_file", type=click.Path(dir_okay=False))
@click.option("--at", "path", default=None, help="only this actor (default: every running actor)")
@click.option("--children", is_flag=True,
              help="not in the supervisor(s) but in each child they start from now on, at its first start (a pool's "
                   "start_child); restarts run free")
@reports_errors
def arm(data_dir: str, plan_file: str, path: str | None, children: bool) -> None:
    """Arm PLAN_FILE (TOML, [[rules]]) in the actors' processes; every firing becomes an event."""
    try:
        plan = fault_points.load_plan(plan_file)
    except ValueError as exc:
        err_console.print(str(exc), style="red", markup=False, highlight=False)
        sys.exit(2)
    _known_points()
    system = connect(data_dir)
    walked = system.walk()
    _import_actor_modules(info.actor for _, info in walked)
    actors = [p for p, info in walked if info.type == "worker"]
    for warning in fault_points.validate_plan(plan, [f"message.{p}" for p in actors]):
        err_console.print(f"warning: {warning}", markup=False, highlight=False)
    armed = system.arm_faults(path, plan, children=children)
    if children:
        console.print(f"armed {len(plan.rules)} rule(s) for the children {len(armed)} supervisor(s) start next",
                      markup=False)
    else:
        console.print(f"armed {len(plan.rules)} rule(s) in {len(armed)} actor(s)", markup=False)


def _import_actor_modules(actor_paths: Iterable[str | None]) -> None:
    """Import the modules of the running actors, so the points they declare (:func:`~ouroactors.core.faults.
    register_point` at module level) are known to the plan's check. Best effort: a module that does not import here
    declares nothing, and the check only warns.

    The directory this runs in is searched too (where ``run`` found the tree's actors), but **last**, so nothing in
    it shadows an installed module, only for these imports, and only if no other user may write to it: a module
    planted in a shared directory (``/tmp``) must not run with this process's rights."""
    here = os.getcwd()
    added = here not in sys.path and _only_ours(here)
    if added:
        sys.path.append(here)
    try:
        for path in dict.fromkeys(p for p in actor_paths if p):
            module = path.partition(":")[0] if ":" in path else path.rpartition(".")[0]
            try:
                importlib.import_module(module)
            except (Exception, SystemExit):  # a user's module may fail anywhere: the warning still names the point
                continue
    finally:
        if added:
            sys.path.remove(here)


def _only_ours(directory: str) -> bool:
    """Whether ``directory`` is ours and nobody else may write to it."""
    try:
        info = os.stat(directory)
    except OSError:
        return False
    return info.st_uid == os.geteuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


@faults.command("disarm")
@data_dir_option
@click.option("--at", "path", default=None, help="only this actor (default: every running actor)")
@click.option("--children", is_flag=True,
              help="forget the plans supervisors keep for the children they start next")
@reports_errors
def disarm(data_dir: str, path: str | None, children: bool) -> None:
    """Disarm fault plans."""
    armed = connect(data_dir).arm_faults(path, None, children=children)
    what = "supervisor(s): their children's plans forgotten" if children else "actor(s)"
    console.print(f"disarmed {len(armed)} {what}", markup=False)


@faults.command("points")
@click.argument("tree_file", type=click.Path(dir_okay=False), required=False)
def points(tree_file: str | None) -> None:
    """The named fault points of the framework (plus `message.<path>` for every actor). With TREE_FILE, also the
    points its actors' modules declare (`faults.register_point` at module level) and each of its workers'
    `message.<path>`."""
    actors: list[str] = []
    if tree_file is not None:
        from ..core.errors import SpecError
        from ..system.config import load_tree

        try:
            tree = load_tree(tree_file)  # imports every actor of the tree: their module-level points register
        except SpecError as exc:
            err_console.print(str(exc), style="red", markup=False, highlight=False)
            sys.exit(2)
        actors = _worker_paths(tree.tree)
    rows = sorted(_known_points().items())
    rows += [(f"message.{path}", f"before {path} handles a message (drop, duplicate, …)") for path in actors] or [
        ("message.<actor path>", "before an actor handles a message (drop, duplicate, …)")]
    width = max(len(name) for name, _ in rows)
    for name, doc in rows:
        console.print(f"{name:<{width}} {doc}", markup=False)


def _worker_paths(spec: Any, prefix: str = "") -> list[str]:
    """The tree paths of the workers under supervisor ``spec`` (a dynamic one's template: ``<sup>/<id>#N``)."""
    here = f"{prefix}/{spec.id}" if prefix else spec.id
    found: list[str] = []
    for child in spec.children or ():
        if child.children is not None:
            found += _worker_paths(child, here)
        elif spec.strategy is not None and spec.strategy.value == "simple_one_for_one":
            found.append(f"{here}/{child.id}#N")
        else:
            found.append(f"{here}/{child.id}")
    return found


EXIT_OK, EXIT_VIOLATION, EXIT_BAD_INPUT, EXIT_HARNESS = 0, 1, 2, 3


@faults.command("enumerate")
@click.argument("tree_file", type=click.Path(dir_okay=False))
@click.option("--workload", "workload", required=True, metavar="NAME",
              help="the workload to drive: sessions (with workspace leases) or ledger (without)")
@click.option("--base", type=click.Choice(["multiproc", "simple"]), default=None,
              help="override [system] base; simple: a simulated system, each crash a simulated death")
@click.option("--sessions", type=int, default=2, show_default=True, help="sessions per run")
@click.option("--effects", type=int, default=2, show_default=True, help="effects per session")
@click.option("--points", "points", multiple=True, metavar="GLOB",
              help="only sites at matching points (repeatable), e.g. 'ledger.*'")
@click.option("--max-sites", type=int, default=None, help="crash at no more than this many sites")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="keep every run's data (events.jsonl, LMDB) here: a new or empty directory (default: temp dirs, "
                   "removed after)")
@click.option("--ask-timeout", type=click.FloatRange(min=0, min_open=True, max=86400), default=0.5,
              show_default=True, callback=not_nan, help="seconds per request (a crash mid-request costs one timeout)")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per site, then a summary object")
@click.option("--plans-dir", type=click.Path(file_okay=False), default=None,
              help="write each site's plan to DIR/site-N.toml; each reproduce command then names its file")
def enumerate_sites(tree_file: str, workload: str, base: str | None, sessions: int, effects: int,
                    points: tuple[str, ...], max_sites: int | None, data_dir: str | None, ask_timeout: float,
                    as_json: bool, plans_dir: str | None) -> None:
    """Crash at every site of TREE_FILE's workload in turn; print each site, its outcome and its plan.

    A recording run finds the sites (every fault point each actor reaches, numbered); then each site
    is run again with a kill there, the tree restarts and recovers, and every invariant is checked.
    Exit codes: 0 every site kept every invariant · 1 a violation · 2 bad input (a --data-dir that is not empty,
    --points matching no site) · 3 the harness failed.
    """
    from ..core.errors import OuroactorsError, SpecError
    from ..faults.preflight import data_dir_problem, no_site_selected
    from ..faults.runner import BenchError, tree_targets
    from ..faults.workload import WorkloadConfig
    from ..system.config import load_tree
    from .chaos import WORKLOADS

    if workload not in WORKLOADS:
        _bad(f"--workload: unknown workload {workload!r}; known workloads: {', '.join(WORKLOADS)}")
    if max_sites is not None and max_sites < 1:
        _bad(f"--max-sites: must be at least 1, got {max_sites}")
    try:
        tree = load_tree(tree_file)
    except SpecError as exc:
        _bad(str(exc))
    try:
        config = WorkloadConfig(sessions=sessions, effects=effects, leases=workload == "sessions",
                                ask_timeout=ask_timeout, lease_wait=3.0, op_deadline=10.0)
        tree_targets(tree.tree, sessions)
    except (ValueError, BenchError) as exc:
        _bad(str(exc))
    chosen_base = base or tree.system.base
    if data_dir is not None and (problem := data_dir_problem(data_dir)) is not None:
        _bad(problem)
    if plans_dir is not None:
        try:
            Path(plans_dir).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            _bad(f"--plans-dir: cannot create {plans_dir!r}: {exc.strerror or exc}")
    try:
        report = _enumerate(tree.tree, config, chosen_base, points, max_sites, data_dir, as_json,
                            replay=(tree_file, workload, sessions, effects, chosen_base, ask_timeout, plans_dir))
    except OuroactorsError as exc:
        err_console.print(f"the enumeration could not run: {type(exc).__name__}: {exc}", style="red",
                          markup=False, highlight=False, soft_wrap=True)
        sys.exit(EXIT_HARNESS)
    if not report.baseline.violations and not report.rows:  # crashed nowhere: nothing was tested, never a pass
        _bad(no_site_selected("--points", points, report.recorded))
    sys.exit(_exit_code(report))


@faults.command("enumerate-sessions")
@click.option("--points", "points", multiple=True, metavar="GLOB", help="record these points (default: the "
              "coordinator/runtime boundaries: coordinator.* runtime.* effect.* ledger.* grants.* workspace.*)")
@click.option("--only", "only", multiple=True, metavar="GLOB", help="crash only at sites of matching points")
@click.option("--hits", type=click.Choice(["first", "all"]), default="first", show_default=True,
              help="crash each (actor, point) at its first hit, or at every hit")
@click.option("--max-sites", type=int, default=None, help="crash at no more than this many sites")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="where the runs' systems live (default: a temporary directory, removed after)")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per site, then a summary object")
@click.option("--sample", type=int, default=None, help="chaos: crash at this many sites drawn from every hit")
@click.option("--seed", type=int, default=0, show_default=True, help="what --sample draws by")
@click.option("--spare-runtimes", type=click.IntRange(0, 8), default=None,
              help="spare runtimes the session directory keeps (default: supervision_trees/agent.toml's, one)")
@click.option("--suspend", is_flag=True, help="the scenario suspends its turn right after the steer, then resumes it")
@click.option("--cancel", is_flag=True, help="the scenario cancels its session right after the steer (retried until "
                                             "answered): every run must end cancelled, with nothing after the cancel")
@click.option("--action", type=click.Choice(["kill", "raise", "exit", "commit_rejected", "commit_unknown",
                                             "map_full"]), default="kill", show_default=True,
              help="what happens at each site: SIGKILL, an exception raised there, os._exit, or a commit failing "
                   "(the storage actions go at storage.* and journal.put sites only)")
def enumerate_sessions(points: tuple[str, ...], only: tuple[str, ...], hits: str, max_sites: int | None,
                       data_dir: str | None, as_json: bool, sample: int | None, seed: int,
                       spare_runtimes: int | None, suspend: bool, cancel: bool, action: str) -> None:
    """Crash the demo's session scenario at every coordinator/runtime boundary, one fresh system per site,
    and check the session invariants after each (exit 0: none broken, 1: violations, 3: harness error)."""
    from ..faults.session_cli import run

    sys.exit(run(points, only, hits, max_sites, data_dir, as_json, sample, seed, spare_runtimes, suspend, cancel,
                 action))


def _bad(message: str) -> NoReturn:
    err_console.print(message, style="red", markup=False, highlight=False, soft_wrap=True)
    sys.exit(EXIT_BAD_INPUT)


def _enumerate(tree: Any, config: Any, base: str, points: tuple[str, ...], max_sites: int | None,
               data_dir: str | None, as_json: bool, replay: tuple[Any, ...]) -> Any:
    from ..faults.enumerate import enumerate_crashes

    def row_out(row: Any) -> None:
        entry = _row(row, base, replay)
        if as_json:
            console.print(json.dumps(entry, sort_keys=True), markup=False, highlight=False, soft_wrap=True)
            return
        statuses = ", ".join(f"{k}={v}" for k, v in entry["statuses"].items()) or "-"
        console.print(f"{entry['#']:>3}  {entry['actor']} @ {entry['point']} #{entry['hit']}  {entry['outcome']}"
                      f"  (killed: {', '.join(entry['killed']) or 'nothing'}; statuses: {statuses})",
                      markup=False, highlight=False, soft_wrap=True)
        for violation in entry["violations"]:
            console.print(f"       {violation}", markup=False, highlight=False, soft_wrap=True)
        if entry["error"]:
            console.print(f"       the harness failed: {entry['error']}", markup=False, highlight=False, soft_wrap=True)
        console.print(f"       plan: {entry['plan_line']}  reproduce: {entry['reproduce']}",
                      markup=False, highlight=False, soft_wrap=True)

    warned: list[str] = []
    report = enumerate_crashes(tree, config, points=list(points) or None, data_dir=data_dir, on_row=row_out,
                               warn=warned.append, limit=max_sites, base=base)
    for message in warned:
        err_console.print(f"warning: {message}", style="yellow", markup=False, highlight=False, soft_wrap=True)
    summary = {"sites": len(report.rows), "outcomes": report.summary(), "base": base,
               "seconds": round(report.duration_s, 1),
               "baseline_violations": [str(v) for v in report.baseline.violations]}
    if as_json:
        console.print(json.dumps({"summary": summary}, sort_keys=True), markup=False, highlight=False,
                      soft_wrap=True)
    else:
        for violation in report.baseline.violations:
            console.print(f"the crash-free recording run already violates: {violation}", style="red",
                          markup=False, highlight=False, soft_wrap=True)
        counts = ", ".join(f"{k} {v}" for k, v in sorted(report.summary().items())) or "no site"
        console.print(f"{len(report.rows)} site(s) on {base} in {report.duration_s:.1f}s: {counts}",
                      markup=False, highlight=False, soft_wrap=True)
    return report


def _row(row: Any, base: str, replay: tuple[Any, ...]) -> dict[str, Any]:
    """One site as plain data: what happened there and the plan (and command) that reproduces it."""
    from ..faults.chaos import plan_to_toml

    site = row.site
    plan = plan_to_toml(site.plan()).strip()
    rule = "; ".join(line for line in plan.splitlines() if line and not line.startswith("["))
    plans_dir = replay[-1]
    plan_file = "PLAN.toml"
    if plans_dir is not None:  # the plan as a file, so that the reproduce command runs as printed
        plan_file = str(Path(plans_dir) / f"site-{row.index}.toml")
        Path(plan_file).write_text(plan + "\n")
    return {"#": row.index, "actor": site.path, "point": site.point, "hit": site.nth, "outcome": row.outcome,
            "fired": row.fired, "killed": list(row.killed), "statuses": dict(row.statuses),
            "violations": [str(v) for v in row.violations], "error": row.error, "plan": plan + "\n",
            "plan_line": rule, "plan_file": plan_file if plans_dir is not None else None,
            "reproduce": _reproduce(site, base, replay, plan_file), "seconds": round(row.duration_s, 3)}


def _reproduce(site: Any, base: str, replay: tuple[Any, ...], plan_file: str) -> str:
    """The command that replays one site from its plan saved as ``plan_file`` (PLAN.toml: the user saves it)."""
    tree_file, workload, sessions, effects, _, ask_timeout, _ = replay
    parts = ["ouroactors", "chaos", str(tree_file), "--workload", workload, "--plan", plan_file, "--base", base,
             "--ask-timeout", str(ask_timeout)]
    if sessions != 2:
        parts += ["--sessions", str(sessions)]
    if effects != 2:
        parts += ["--effects", str(effects)]
    command = " ".join(shlex.quote(p) for p in parts)
    if site.shared:  # a simulated system arms every worker alike, exactly as the enumeration did
        return command
    return (f"start the tree, `ouroactors faults arm {shlex.quote(plan_file)} --at {shlex.quote(site.path)}`, "
            f"then drive the same workload (or: {command}, which arms every worker)")


def _exit_code(report: Any) -> int:
    if report.baseline.violations or any(row.outcome == "VIOLATION" for row in report.rows):
        return EXIT_VIOLATION
    if any(row.outcome == "error" for row in report.rows):
        return EXIT_HARNESS
    return EXIT_OK


from . import faults_scenario as _faults_scenario  # noqa: E402,F401  (registers faults enumerate-scenario)
