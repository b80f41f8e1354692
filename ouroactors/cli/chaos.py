"""``ouroactors chaos TREE --workload W --seeds N``: a seeded chaos campaign with invariant checks.

Every seed draws a fault plan (random kills, storage faults, delays; same seed → same plan), runs
the workload with it armed in every worker, lets the tree restart and recover, and checks every
invariant. A progress bar while it runs; a summary table at the end; every violation printed with
its seed, the exact plan (TOML, for ``ouroactors faults arm``) and the command that replays it.

Exit codes: 0 no violation · 1 a violation was found · 2 bad input (nothing was started or armed; a --data-dir
that is not empty, or a live system's, is bad input: every campaign gets a fresh one)
· 3 the harness could not run some seed (and no violation was found).
"""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..core.errors import OuroactorsError, SpecError
from ..core.faults import FaultPlan, load_plan
from ..system.config import load_tree
from . import main
from .common import console, err_console, not_nan

EXIT_OK, EXIT_VIOLATION, EXIT_BAD_INPUT, EXIT_HARNESS = 0, 1, 2, 3

WORKLOADS: dict[str, str] = {
    "sessions": "lease a workspace root, then per effect: fence check → grant → record_started → "
                "the world → record_settled (leases only when the tree has a real workspace)",
    "ledger": "the same without workspace leases: grant → record_started → the world → record_settled",
    "runtime": "real sessions of the real runtime (multiproc only; the tree needs an execution supervisor of "
               "runtimes): lease → OpenSession with a scripted model → per turn SendText → the runtime's http "
               "tool calls the world (grants → record_started → the call → settled) → drain; plus 2 SIGKILLs "
               "of a runtime or the ledger per seed",
}
RUNTIME_KILLS = 2  # the runtime workload's own kills per seed (on top of the seed's plan)


def _fail(message: str) -> NoReturn:
    err_console.print(message, style="red", markup=False, highlight=False, soft_wrap=True)
    sys.exit(EXIT_BAD_INPUT)


def fresh_data_dir(data_dir: str | None) -> None:
    """Exit 2 naming ``--data-dir`` when it is not empty, or a live system's (:mod:`ouroactors.faults.preflight`)."""
    from ..faults.preflight import data_dir_problem

    if data_dir is not None and (problem := data_dir_problem(data_dir)) is not None:
        _fail(problem)


MAX_SEEDS = 10_000_000  # a campaign's seeds are listed up front: a larger count is a typo, not a campaign


def seeds_and_plan(count: int | None, seed_text: str | None, first_text: str, plan_file: str | None
                   ) -> tuple[list[int], FaultPlan | None]:
    """The seeds a campaign runs (``--seeds`` from ``--first-seed``, or the one ``--seed``), or the one plan file
    (``--plan``: run once, under the first seed's name); a bad combination or value exits 2 naming it."""
    from ..faults.chaos import parse_seed

    seeds: list[int] = []
    try:
        first = parse_seed(first_text)
        if seed_text is not None:
            if count is not None:
                _fail("--seed replays one seed; it cannot be combined with --seeds")
            seeds = [parse_seed(seed_text)]
        else:
            total = 100 if count is None else count
            if not 1 <= total <= MAX_SEEDS:
                _fail(f"--seeds: must be from 1 to {MAX_SEEDS:,}, got {total}")
            seeds = list(range(first, first + total))
    except ValueError as exc:
        _fail(f"--seed: {exc}")
    if plan_file is None:
        return seeds, None
    if seed_text is not None or count is not None:
        _fail("--plan runs one plan file; it cannot be combined with --seed or --seeds")
    try:
        return [first], load_plan(plan_file)
    except ValueError as exc:
        _fail(str(exc))


@main.command()
@click.argument("tree_file", type=click.Path(dir_okay=False))
@click.option("--workload", "workload", default=None, metavar="NAME",
              help=f"the workload to drive: {', '.join(WORKLOADS)} (or --scenario)")
@click.option("--scenario", "scenario", default=None, metavar="MODULE:FUNCTION",
              help="drive your own scenario instead of a workload: a function taking the system")
@click.option("--check", "check", default=None, metavar="MODULE:FUNCTION",
              help="with --scenario: what must hold after each seed, once the tree has recovered")
@click.option("--seeds", "count", type=int, default=None, help="how many seeds to run (default 100)")
@click.option("--seed", "seed_text", default=None, metavar="S", help="run (replay) only seed S")
@click.option("--first-seed", "first_text", default="0", show_default=True, metavar="S",
              help="the first seed of the campaign")
@click.option("--plan", "plan_file", type=click.Path(dir_okay=False), default=None,
              help="run this plan file once (e.g. one a violation printed) instead of a seed's plan")
@click.option("--sessions", type=int, default=2, show_default=True, help="sessions per run")
@click.option("--effects", type=int, default=2, show_default=True, help="effects per session")
@click.option("--base", type=click.Choice(["multiproc", "simple"]), default=None,
              help="override [system] base (simple: a simulated system on virtual time, kills simulated)")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="where the campaign's system keeps its state: a new or empty directory (default: a temp dir, "
                   "removed after)")
@click.option("--ask-timeout", type=click.FloatRange(min=0, min_open=True, max=86400), default=0.4,
              show_default=True, callback=not_nan, help="seconds per request (a kill mid-request costs one timeout)")
@click.option("--drive-timeout", type=click.FloatRange(min=0, min_open=True, max=86400), default=120.0,
              show_default=True, metavar="SECONDS", callback=not_nan,
              help="a run whose --scenario has not returned by then is a violation (the system is shut down under it)")
@click.option("--raises", is_flag=True, default=False,
              help="seeds also draw `raise` rules: an exception at a point, in the code that reaches it (every "
                   "seed's plan differs from the one it has without)")
def chaos(tree_file: str, workload: str | None, scenario: str | None, check: str | None, count: int | None,
          seed_text: str | None, first_text: str, plan_file: str | None, sessions: int, effects: int,
          base: str | None, data_dir: str | None, ask_timeout: float, drive_timeout: float, raises: bool) -> None:
    """Seeded chaos on TREE_FILE: random kills, storage faults and delays; every invariant checked."""
    from ..faults.chaos import Campaign
    from ..faults.runner import BenchError, tree_targets
    from ..faults.runtime_driver import RUNTIME_ACTOR, execution_path
    from ..faults.workload import WorkloadConfig

    # -- everything is checked before anything starts or is armed ------------------------------------------
    if scenario is not None or check is not None:
        from .chaos_scenario import scenario_chaos

        if workload is not None:
            _fail("--scenario drives your own scenario: it cannot be combined with --workload")
        if scenario is None:
            _fail("--check needs --scenario (the function that drives the tree)")
        scenario_chaos(tree_file, scenario, check, count, seed_text, first_text, base, data_dir, raises, plan_file,
                       drive_timeout)
        return
    if click.get_current_context().get_parameter_source("drive_timeout") != click.core.ParameterSource.DEFAULT:
        _fail("--drive-timeout bounds your own scenario's drive: it needs --scenario (the workload's requests have "
              "--ask-timeout)")
    if workload is None:
        _fail(f"--workload: required (one of {', '.join(WORKLOADS)}), or --scenario MODULE:FUNCTION")
    if workload not in WORKLOADS:
        _fail(f"--workload: unknown workload {workload!r}; known workloads: {', '.join(WORKLOADS)}")
    try:
        tree = load_tree(tree_file)
    except SpecError as exc:
        _fail(str(exc))
    seeds, plan = seeds_and_plan(count, seed_text, first_text, plan_file)
    fresh_data_dir(data_dir)
    base = base or tree.system.base
    runtime = workload == "runtime"
    if runtime and base != "multiproc":
        _fail(f"--workload runtime needs the multiproc base, not {base!r}: the session runtime runs its turns in "
              "a thread beside the actor, which the simulated simple base cannot host")
    try:
        config = WorkloadConfig(sessions=sessions, effects=effects, leases=workload != "ledger",
                                ask_timeout=ask_timeout, lease_wait=15.0 if runtime else 3.0, op_deadline=10.0,
                                driver="runtime" if runtime else "synthetic", kills=RUNTIME_KILLS if runtime else 0)
        tree_targets(tree.tree, sessions)
        if runtime and execution_path(tree.tree) is None:
            raise BenchError(f"{tree_file}: --workload runtime needs an execution supervisor whose child template "
                             f"is the session runtime ({RUNTIME_ACTOR})")
    except (ValueError, BenchError) as exc:
        _fail(str(exc))

    replay = _replay_command(tree_file, workload, sessions, effects, base, tree.system.base, ask_timeout, raises)
    if plan_file is not None:
        replay = replay.replace("--seed {seed}", f"--plan {shlex.quote(plan_file)}")
    campaign = Campaign(tree.tree, config, base=base, data_dir=data_dir, replay_command=replay,
                        warn=lambda message: None, raises=raises)  # plan warnings are printed below, before the start
    if plan is not None:
        from ..faults.chaos import check_plan

        if base != "multiproc" and any(r.action.value == "exit" for r in plan.rules):
            _fail(f"{plan_file}: exit rules end the whole process: they need the multiproc base "
                  "(kill rules run on both)")
        for warning in check_plan(plan, campaign.declared_points()):
            err_console.print(f"warning: {warning}", markup=False, highlight=False, soft_wrap=True)
    try:
        with campaign:
            results = _run(campaign, seeds, plan, tree.tree.id, workload)
    except OuroactorsError as exc:
        err_console.print(f"the campaign could not run: {type(exc).__name__}: {exc}", style="red",
                          markup=False, highlight=False, soft_wrap=True)
        sys.exit(EXIT_HARNESS)
    stats = campaign.stats
    console.print(_summary(stats, tree_file, workload, base))
    failing = [r for r in results if r.violations]
    for result in failing:
        _print_violation(result)
    for note in stats.anomalies:
        err_console.print(f"intervention: {note}", style="yellow", markup=False, highlight=False, soft_wrap=True)
    errors = [r for r in results if r.error]
    for result in errors:
        err_console.print(f"seed {result.seed}: the harness failed: {result.error}", style="yellow",
                          markup=False, highlight=False, soft_wrap=True)
    if failing:
        seeds_text = ", ".join(str(r.seed) for r in failing)
        console.print(f"{len(failing)} seed(s) broke an invariant: {seeds_text}", style="bold red", markup=False)
        sys.exit(EXIT_VIOLATION)
    if errors:
        sys.exit(EXIT_HARNESS)
    console.print(f"no violation in {stats.seeds} schedule(s)", style="green", markup=False)


def _run(campaign: Any, seeds: list[int], plan: FaultPlan | None, root: str, workload: str) -> list[Any]:
    results = []
    began = time.monotonic()
    with Progress(TextColumn("[bold]chaos[/]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[status]}"), console=console, transient=False,
                  disable=not console.is_terminal) as progress:
        task = progress.add_task("seeds", total=len(seeds), status="")
        for seed in seeds:
            result = campaign.run_seed(seed, plan)
            results.append(result)
            bad = sum(1 for r in results if r.violations)
            rate = 60.0 * len(results) / max(time.monotonic() - began, 1e-9)
            progress.update(task, advance=1,
                            status=f"seed {seed} · {bad} failing · {rate:.0f}/min")
            if not console.is_terminal and result.violations:
                console.print(f"seed {seed}: {len(result.violations)} violation(s)", markup=False)
    return results


def _summary(stats: Any, tree_file: str, workload: str, base: str) -> Table:
    table = Table(title=f"chaos: {tree_file} · workload {workload} · {base}", show_header=True)
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row("schedules (seeds) run", str(stats.seeds))
    table.add_row("schedules per minute", f"{stats.per_minute:.0f}")
    table.add_row("fault firings", str(stats.firings))
    table.add_row("processes killed" if base == "multiproc" else "actors killed (simulated deaths)", str(stats.kills))
    table.add_row("tree escalations", str(stats.escalations))
    table.add_row("effects by final status", _counts(stats.statuses))
    table.add_row("effects by driver outcome", _counts(stats.outcomes))
    table.add_row("harness errors", str(stats.errors))
    table.add_row("harness interventions", str(len(stats.anomalies)), style="yellow" if stats.anomalies else None)
    table.add_row("violations", str(stats.violations), style="red" if stats.violations else "green")
    return table


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {count}" for name, count in sorted(counts.items())) or "-"


def _print_violation(result: Any) -> None:
    console.rule(f"seed {result.seed}", style="red")
    for violation in result.violations:
        console.print(f"seed {result.seed}: {violation}", markup=False, highlight=False, soft_wrap=True)
    if result.run is not None and result.run.firings:
        console.print("fired: " + ", ".join(result.fired()), markup=False, highlight=False, soft_wrap=True)
    console.print("plan (arm it with `ouroactors faults arm FILE`):", markup=False)
    console.print(result.plan_toml(), markup=False, highlight=False, soft_wrap=True)
    if result.replay:
        console.print(f"replay: {result.replay}", markup=False, highlight=False, soft_wrap=True)


def _replay_command(tree_file: str, workload: str, sessions: int, effects: int, base: str,
                    file_base: str, ask_timeout: float, raises: bool = False) -> str:
    parts = ["ouroactors", "chaos", str(Path(tree_file)), "--workload", workload, "--seed", "{seed}"]
    if sessions != 2:
        parts += ["--sessions", str(sessions)]
    if effects != 2:
        parts += ["--effects", str(effects)]
    if base != file_base:
        parts += ["--base", base]
    if ask_timeout != 0.4:
        parts += ["--ask-timeout", str(ask_timeout)]
    if raises:
        parts.append("--raises")
    return " ".join(shlex.quote(p) if p != "{seed}" else p for p in parts)


__all__ = ["WORKLOADS", "chaos"]
