"""``ouroactors chaos TREE_FILE --scenario MODULE:FUNCTION [--check MODULE:FUNCTION]``: seeded chaos on your own
scenario (:mod:`ouroactors.faults.scenario_chaos`), each seed printed as it ends, every failing one with its plan and
the command that replays it. Exit codes: 0 every seed kept every invariant · 1 a violation · 2 bad input · 3 the
harness failed."""

from __future__ import annotations

import shlex
import sys
from typing import Any, NoReturn

from ..faults.scenario import DRIVE_TIMEOUT_S
from .chaos import fresh_data_dir, seeds_and_plan
from .common import console, err_console
from .faults import EXIT_BAD_INPUT, EXIT_HARNESS, EXIT_OK, EXIT_VIOLATION
from .faults_scenario import callable_at


def _fail(message: str) -> NoReturn:
    err_console.print(message, style="red", markup=False, highlight=False, soft_wrap=True)
    sys.exit(EXIT_BAD_INPUT)


def scenario_chaos(tree_file: str, scenario: str, check: str | None, count: int | None, seed_text: str | None,
                   first_text: str, base: str | None, data_dir: str | None, raises: bool,
                   plan_file: str | None = None, drive_timeout: float = DRIVE_TIMEOUT_S) -> NoReturn:
    from ..core.errors import SpecError
    from ..faults.chaos_plans import plan_to_toml
    from ..faults.scenario_chaos import SeedRow, chaos_scenario, replay_hint
    from ..system.config import load_tree

    try:
        tree = load_tree(tree_file)
    except SpecError as exc:
        _fail(str(exc))
    seeds, plan = seeds_and_plan(count, seed_text, first_text, plan_file)
    drive_fn, check_fn = callable_at(scenario, "--scenario"), callable_at(check, "--check") if check else None
    fresh_data_dir(data_dir)
    chosen_base = base or tree.system.base

    def shown(row: SeedRow) -> None:
        if row.outcome == "ok":
            return
        label = f"plan {plan_file}" if plan_file is not None else f"seed {row.seed}"
        console.print(f"{label}: {row.outcome}", markup=False, highlight=False, soft_wrap=True)
        for text in [*row.violations, *([f"the harness failed: {row.run.error}"] if row.run.error else [])]:
            console.print(f"    {text}", markup=False, highlight=False, soft_wrap=True)
        fired = ", ".join(f"{action} at {point} ({actor})" for actor, point, action in row.fired) or "nothing"
        console.print(f"    fired: {fired}", markup=False, highlight=False, soft_wrap=True)
        plan = "\n".join(f"      {line}" if line else "" for line in plan_to_toml(row.plan).strip().splitlines())
        console.print(f"    plan:\n{plan}", markup=False, highlight=False, soft_wrap=True)
        replay = replay_hint(row, tree_file, scenario, check, chosen_base, raises, drive_timeout)
        if plan_file is not None:
            replay = replay.replace(f"--seed {row.seed}", f"--plan {shlex.quote(plan_file)}")
        console.print(f"    replay: {replay}", markup=False, highlight=False, soft_wrap=True)

    campaign: Any = chaos_scenario(tree.tree, drive_fn, check_fn, seeds=seeds, base=chosen_base, raises=raises,
                                   plan=plan, data_dir=data_dir, on_row=shown, drive_timeout=drive_timeout,
                                   warn=lambda text: err_console.print(f"warning: {text}", markup=False,
                                                                       highlight=False, soft_wrap=True))
    baseline = campaign.baseline
    if baseline.outcome != "ok":
        for text in baseline.violations or [f"the harness failed: {baseline.error}"]:
            err_console.print(f"the crash-free run: {text}", style="red", markup=False, soft_wrap=True)
        sys.exit(EXIT_VIOLATION if baseline.outcome == "VIOLATION" else EXIT_HARNESS)
    summary = campaign.summary()
    runs = f"{len(campaign.rows)} seed(s)" if plan_file is None else f"plan {plan_file}"
    console.print(f"{runs} on {chosen_base} in {campaign.duration_s:.1f}s: {summary}", markup=False,
                  highlight=False)
    sys.exit(EXIT_VIOLATION if summary.get("VIOLATION") else EXIT_HARNESS if summary.get("error") else EXIT_OK)
