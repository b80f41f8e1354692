"""The verdict and table of a ``crash_enumeration(scenario=...)`` test (:mod:`ouroactors.faults.scenario`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from ..faults.scenario import ScenarioReport, ScenarioRow, aimed_plan

R = TypeVar("R")


def scenario_verdict(report: ScenarioReport, data_dir: Path, warned: list[str]) -> str | None:
    """Why the enumeration fails the test (None: it passes): the crash-free run failing, a site that violates or
    that the harness could not run, no site, or no site reached."""
    head = f"crash enumeration of your scenario on tree {report.tree!r} ({report.base})"
    baseline = report.baseline
    if baseline.outcome != "ok":
        why = baseline.violations or [f"the harness failed: {baseline.error}"]
        return "\n".join([f"{head}: the crash-free recording run already fails; no site was crashed at:",
                          *(f"  {v}" for v in why), f"  data: {data_dir / 'record'}"])
    return rows_verdict(head, report.rows, warned, _describe)


def rows_verdict(head: str, rows: Sequence[R], warned: Sequence[str], describe: Callable[[R], str]) -> str | None:
    """The sites' part of a verdict, for either kind of enumeration: none selected, any that violated or that the
    harness could not run (each described), or none reached (nothing was checked)."""
    if not rows:
        return f"{head}: no crash site selected ({'; '.join(warned) or 'the scenario reached no point'})"
    bad = [row for row in rows if getattr(row, "outcome", None) in ("VIOLATION", "error")]
    if bad:
        return "\n".join([f"{head}: {len(bad)} of {len(rows)} site(s) failed", *(describe(row) for row in bad)])
    if not any(getattr(row, "fired", False) for row in rows):
        return f"{head}: no selected site was reached when crashed at, so nothing was checked"
    return None


def _describe(row: ScenarioRow) -> str:
    from ..faults.chaos import plan_to_toml

    assert row.site is not None
    at, plan = aimed_plan(row.site)
    lines = [f"site {row.index}: {row.site}  (outcome {row.outcome}; exits: "
             f"{', '.join(f'{p} ({k})' for p, k in row.exits) or 'none'})"]
    lines += [f"    {v}" for v in row.violations]
    if row.error is not None:
        lines.append(f"    the harness failed: {row.error}")
    if row.drive_error is not None:
        lines.append(f"    the scenario's drive raised (not a violation by itself): {row.drive_error}")
    where = "every worker (one process: a simulated system)" if at is None else at
    lines.append(f"    reproduce: this plan armed in {where}, then the scenario:\n      "
                 + plan_to_toml(plan).strip().replace("\n", "\n      "))
    lines.append(f"    data (events.jsonl, admin.out, LMDB): {row.data_dir}")
    return "\n".join(lines)


def scenario_table(report: ScenarioReport) -> str:
    """site → outcome, one line per site (the report's own text)."""
    return str(report)


__all__ = ["rows_verdict", "scenario_table", "scenario_verdict"]
