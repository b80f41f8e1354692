"""``ouroactors faults enumerate-sessions``: crash enumeration over the demo's session scenario.

The command's body, kept beside the enumeration; ``cli/faults.py`` only declares its options and calls :func:`run`
(lazily: ``ouroactors faults points`` must not pay for the workload). The scenario is fixed (the demo's tree
and script, one session), so there is no tree file, only which points and hits.
"""

from __future__ import annotations

import json
import tempfile
from typing import Any

import click

EXIT_OK, EXIT_VIOLATION, EXIT_BAD_INPUT, EXIT_HARNESS = 0, 1, 2, 3


def run(points: tuple[str, ...] = (), only: tuple[str, ...] = (), hits: str = "first", max_sites: int | None = None,
        data_dir: str | None = None, as_json: bool = False, sample: int | None = None, seed: int = 0,
        spare_runtimes: int | None = None, suspend: bool = False, cancel: bool = False, action: str = "kill") -> int:
    """Crash the demo's session scenario at every coordinator/runtime boundary it reaches, one fresh system per
    site; check the session invariants after each; print each site; the exit code (0: no violation; 1:
    violations; 2: bad input; 3: a harness error)."""
    from .preflight import data_dir_problem
    from .session_enumerate import DEFAULT_POINTS, check_action, enumerate_session_crashes
    from .session_workload import SessionWorkload, spares_of

    try:
        check_action(action)
    except ValueError as bad:
        click.echo(f"--action: {bad}", err=True)
        return EXIT_BAD_INPUT
    for name, value in (("--max-sites", max_sites), ("--sample", sample)):
        if value is not None and value < 1:
            click.echo(f"{name}: must be >= 1, got {value}", err=True)
            return EXIT_BAD_INPUT

    def out(entry: dict[str, Any]) -> None:
        if as_json:
            click.echo(json.dumps(entry, sort_keys=True))
            return
        done = "" if entry["action"] == "kill" else f" ({entry['action']})"
        click.echo(f"{entry['#']:>3}  {entry['actor']} @ {entry['point']} #{entry['hit']}{done}  {entry['outcome']}  "
                   f"(ended {entry['state']}{': ' + entry['reason'] if entry['reason'] else ''}; "
                   f"{entry['seconds']} s)")
        for violation in entry["violations"]:
            click.echo(f"       {violation}")
        if entry["error"]:
            click.echo(f"       the harness failed: {entry['error']}")

    def row_out(row: Any) -> None:
        out({"#": row.index, "actor": row.site.path, "point": row.site.point, "hit": row.site.nth,
             "action": row.site.action.value, "outcome": row.outcome, "state": row.state, "reason": row.reason,
             "violations": [str(v) for v in row.violations], "error": row.error, "seconds": round(row.duration_s, 1)})

    if suspend and cancel:
        click.echo("--suspend and --cancel: a scenario suspends its turn or cancels its session, not both", err=True)
        return EXIT_BAD_INPUT
    if data_dir is not None and (problem := data_dir_problem(data_dir)) is not None:
        click.echo(problem, err=True)  # a used or live one: this run would read another's data, or write into it
        return EXIT_BAD_INPUT
    config = SessionWorkload(spare_runtimes=spare_runtimes, suspend=suspend, cancel=cancel)
    with tempfile.TemporaryDirectory(prefix="ouroactors-session-enum-") as scratch:
        report = enumerate_session_crashes(data_dir or scratch, points=list(points) or DEFAULT_POINTS, hits=hits,
                                           only=list(only) or None, limit=max_sites, on_row=row_out,
                                           sample_of=sample, seed=seed, config=config, action=action)
    summary = {"sites": len(report.rows), "outcomes": report.summary(), "violations": len(report.violations),
               "seconds": round(report.duration_s, 1), "reference": report.reference.history.state, "seed": seed,
               "spare_runtimes": spares_of(config), "suspend": suspend, "cancel": cancel, "action": action,
               "reference_violations": [str(v) for v in report.reference.violations]}
    if as_json:
        click.echo(json.dumps({"summary": summary}, sort_keys=True))
    else:
        for violation in report.reference.violations:
            click.echo(f"the crash-free run already violates: {violation}")
        counts = ", ".join(f"{k} {v}" for k, v in sorted(report.summary().items())) or "no site"
        click.echo(f"{len(report.rows)} site(s) in {report.duration_s:.1f}s: {counts}; "
                   f"{len(report.violations)} violation(s)")
    if not report.reference.violations and not report.rows:  # crashed nowhere: no pass
        from .preflight import no_site_selected

        click.echo(no_site_selected("--only", only, report.recorded), err=True)
        return EXIT_BAD_INPUT
    if report.reference.violations or report.violations:
        return EXIT_VIOLATION
    if any(row.outcome == "error" for row in report.rows):
        return EXIT_HARNESS
    return EXIT_OK


__all__ = ["run"]
