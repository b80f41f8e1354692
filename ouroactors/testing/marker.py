"""``@pytest.mark.crash_enumeration``: a test that passes only if every crash site keeps every invariant.

Crash enumeration (:mod:`ouroactors.faults.enumerate`) records the fault points a scenario reaches,
runs it again once per crash site with a real SIGKILL there, lets the tree restart and recover, and
checks every invariant. The scenario is the workload driver (a :class:`WorkloadConfig`) on a tree.
The test body is not run once per site: it cannot be the scenario (each site needs a fresh system
and the driver's deterministic interleaving), and the sites are known only after a recording run,
too costly at collection to parametrize over. So a marked test *is* one enumeration:

1. **collection** — the marker's arguments are checked; a bad one is a ``pytest.UsageError`` naming
   the test and the argument (an unknown name gets the nearest valid one);
2. **setup** — the ``crash_report`` fixture (set up for every marked test, asked for or not) runs the
   enumeration, its data under ``tmp_path``; every system and world it starts must be gone after
   the test (``track_fault_processes``);
3. **call, before the body** — the verdict: an invariant violated at any site, a site the harness
   could not run, a crash-free baseline that already violates, or no crash at all fails the test,
   listing each site, its violations, the plan that reproduces it and where its data is;
4. **the body** runs only then, with the :class:`~ouroactors.faults.enumerate.EnumerationReport` as
   ``crash_report`` for assertions of its own.

**Your own scenario**: ``scenario=drive`` (and ``check=check``) enumerates crashes of what ``drive(system)`` does on
your tree instead of the workload, and checks what ``check(system)`` says must hold once the tree has recovered
(:mod:`ouroactors.faults.scenario`); ``crash_report`` is then a :class:`~ouroactors.faults.scenario.ScenarioReport`.
The tree is required (a spec or a TOML path) and needs no ledger; ``config`` and ``fresh`` do not apply.

``base`` is ``"multiproc"`` (a crash is a SIGKILL of one actor's process) or ``"simple"``: a
simulated system (one process on virtual time) where a crash is the simulated death of the actor —
its supervisor sees ``killed``, its memory is gone, LMDB keeps what was committed — at a fraction of
the cost, deterministic to the delivery. A tree file's ``[system]`` table is not used. Build trees
with ``enumeration_tree()`` or ``workload_tree(heartbeat_s=60.0, owner_lost_after_s=120.0)``: a fast
heartbeat makes message counts drift between runs, and sites come out ``not reached``.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import os
import warnings
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ..faults.enumerate import CrashRow, EnumerationReport
    from ..faults.scenario import ScenarioReport
    from ..faults.workload import WorkloadConfig
    from ..supervision.specs import ChildSpec

MARKER = "crash_enumeration"
ARGUMENTS = ("tree", "config", "points", "max_sites", "fresh", "base", "scenario", "check", "drive_timeout")
MARKER_HELP = (f"{MARKER}(tree=None, config=None, *, points=None, max_sites=None, fresh=True, base='multiproc', "
               "scenario=None, check=None, drive_timeout=120): run the workload (or scenario(system), checked by "
               "check(system)) on tree, kill at each crash site in turn (SIGKILL on multiproc, a simulated death on "
               "simple), fail on any invariant violated; the test gets the report as the crash_report fixture (see "
               "ouroactors.testing.marker)")


class BadArgument(ValueError):
    """One marker argument is wrong; the message names it."""

    def __init__(self, argument: str, problem: str) -> None:
        super().__init__(f"@pytest.mark.{MARKER}: {argument}: {problem}")


@dataclass(frozen=True)
class Enumeration:
    """The marker's arguments, validated."""

    tree: ChildSpec
    config: WorkloadConfig
    points: tuple[str, ...] | None = None
    max_sites: int | None = None
    fresh: bool = True
    base: str = "multiproc"
    scenario: Callable[[Any], Any] | None = None  # the user's drive (.faults.scenario): no workload then
    check: Callable[[Any], Any] | None = None
    drive_timeout: float = 120.0  # seconds a scenario's drive may take (.faults.scenario)


@dataclass
class _Outcome:
    enumeration: Enumeration
    report: EnumerationReport | ScenarioReport
    data_dir: Path
    warned: list[str]


_ENUMERATION = pytest.StashKey[Enumeration]()
_OUTCOME = pytest.StashKey[_Outcome]()


def parse_marker(mark: pytest.Mark, rootpath: Path) -> Enumeration:
    """Validate ``mark``'s arguments (a relative tree file path is from ``rootpath``)."""
    kwargs = dict(mark.kwargs)
    if len(mark.args) > 1:
        raise BadArgument("arguments", f"the tree is the only positional argument, got {len(mark.args)}")
    if mark.args:
        if "tree" in kwargs:
            raise BadArgument("tree", "given both positionally and by keyword")
        kwargs["tree"] = mark.args[0]
    for name in kwargs:
        _known(name, ARGUMENTS, name, "argument")
    if kwargs.get("scenario") is not None or kwargs.get("check") is not None:
        return _scenario(kwargs, rootpath)
    if "drive_timeout" in kwargs:
        raise BadArgument("drive_timeout", "bounds a scenario of your own (scenario=...): the workload's requests "
                                           "have their own timeouts")
    config = _config(kwargs.get("config"))
    fresh, max_sites = kwargs.get("fresh", True), kwargs.get("max_sites")
    if not isinstance(fresh, bool):
        raise BadArgument("fresh", f"must be True or False, got {fresh!r}")
    if max_sites is not None and (type(max_sites) is not int or max_sites < 1):
        raise BadArgument("max_sites", f"must be an int >= 1 or None, got {max_sites!r}")
    return Enumeration(_tree(kwargs.get("tree"), rootpath, config), config, _points(kwargs.get("points")),
                       max_sites, fresh, _base(kwargs.get("base", "multiproc")))


def _scenario(kwargs: dict[str, Any], rootpath: Path) -> Enumeration:
    """The marker of a user's own scenario: a tree (no ledger needed), ``scenario`` and optionally ``check``."""
    from ..faults.enumerate import DEFAULT_CONFIG
    from ..faults.scenario import DRIVE_TIMEOUT_S, check_timeouts

    for name in ("config", "fresh"):
        if name in kwargs:
            raise BadArgument(name, "does not apply to a scenario of your own (scenario=...): each site is a fresh "
                                    "system, and there is no workload to configure")
    for name in ("scenario", "check"):
        if kwargs.get(name) is not None and not callable(kwargs[name]):
            raise BadArgument(name, f"must be a callable taking the ActorSystem, got {type(kwargs[name]).__name__}")
    if kwargs.get("scenario") is None:
        raise BadArgument("check", "needs scenario=...: the callable that drives the tree")
    if kwargs.get("tree") is None:
        raise BadArgument("tree", "a scenario of your own needs its tree (a ChildSpec or a tree TOML path)")
    max_sites = kwargs.get("max_sites")
    if max_sites is not None and (type(max_sites) is not int or max_sites < 1):
        raise BadArgument("max_sites", f"must be an int >= 1 or None, got {max_sites!r}")
    drive_timeout = kwargs.get("drive_timeout", DRIVE_TIMEOUT_S)
    try:
        check_timeouts(drive_timeout=drive_timeout)
    except ValueError as exc:
        raise BadArgument("drive_timeout", str(exc).split(": ", 1)[1]) from None
    return Enumeration(_tree(kwargs["tree"], rootpath, None), DEFAULT_CONFIG, _points(kwargs.get("points")),
                       max_sites, True, _base(kwargs.get("base", "multiproc")), kwargs["scenario"], kwargs.get("check"),
                       float(drive_timeout))


def _known(name: str, known: Collection[str], argument: str, what: str) -> None:
    if name not in known:
        close = difflib.get_close_matches(str(name), known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise BadArgument(argument, f"unknown {what} {name!r}{hint}; the {what}s are {', '.join(known)}")


def _tree(value: Any, rootpath: Path, config: WorkloadConfig | None) -> ChildSpec:
    from ..core.errors import SpecError
    from ..faults.enumerate import enumeration_tree
    from ..faults.runner import BenchError, tree_targets
    from ..supervision.specs import ChildSpec
    from ..system.config import load_tree

    if value is None:
        return enumeration_tree()
    if isinstance(value, str | os.PathLike):
        path = rootpath / value  # an absolute value stays itself
        try:
            spec = load_tree(path).tree
        except SpecError as exc:
            problems = "; ".join(f"{where}: {what}" if where else what for where, what in exc.problems)
            raise BadArgument("tree", f"{path} (relative paths are from the rootdir): {problems}") from None
    elif isinstance(value, ChildSpec):
        spec = value
    else:
        raise BadArgument("tree", f"must be a ChildSpec or a tree TOML path, got {type(value).__name__}")
    if not spec.is_supervisor:
        raise BadArgument("tree", f"the root {spec.id!r} must be a supervisor")
    if config is None:  # a scenario of its own: any tree
        return spec
    try:
        tree_targets(spec, config.sessions)  # it has a ledger for the workload to record effects in
    except BenchError as exc:
        raise BadArgument("tree", f"{exc} (or scenario=drive, check=check: a scenario of your own)") from None
    return spec


def _config(value: Any) -> WorkloadConfig:
    from ..faults.enumerate import DEFAULT_CONFIG
    from ..faults.workload import WorkloadConfig

    if value is None:
        return DEFAULT_CONFIG
    if isinstance(value, WorkloadConfig):
        return value
    if not isinstance(value, Mapping):
        raise BadArgument("config", f"must be a WorkloadConfig or a dict of its fields, got {type(value).__name__}")
    for name in value:
        _known(name, [f.name for f in dataclasses.fields(WorkloadConfig)], "config", "field")
    try:  # a dict overrides the enumeration defaults (small, short timeouts), not WorkloadConfig's
        return dataclasses.replace(DEFAULT_CONFIG, **value)
    except ValueError as exc:
        raise BadArgument("config", str(exc)) from None


def _points(value: Any) -> tuple[str, ...] | None:
    patterns = (value,) if isinstance(value, str) else value
    if value is not None and (not isinstance(patterns, Sequence) or not patterns
                              or not all(isinstance(p, str) and p for p in patterns)):
        raise BadArgument("points", f"must be a point glob or a non-empty list of them, got {value!r}")
    return None if value is None else tuple(patterns)


def _base(value: Any) -> str:
    from ..system.handle import BASES

    if not isinstance(value, str) or value not in BASES:
        raise BadArgument("base", f"must be one of {', '.join(sorted(BASES))}, got {value!r}")
    if value != "multiproc" and not _takes_base():
        raise BadArgument("base", f"crash enumeration runs on the multiproc base only, got {value!r}")
    return value


def _takes_base() -> bool:
    from ..faults.enumerate import enumerate_crashes

    return "base" in inspect.signature(enumerate_crashes).parameters


# -- hooks and fixtures (imported into ouroactors.testing.plugin) ------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Check every marker before anything runs: all the bad ones in one usage error."""
    problems = []
    for item in items:
        if (mark := item.get_closest_marker(MARKER)) is not None:
            try:
                item.stash[_ENUMERATION] = parse_marker(mark, config.rootpath)
            except BadArgument as exc:
                problems.append(f"{item.nodeid}: {exc}")
    if problems:
        raise pytest.UsageError("\n".join(problems))


@pytest.fixture(autouse=True)
def _crash_enumeration_marker(request: pytest.FixtureRequest) -> None:
    """A marked test runs the enumeration even when it does not ask for the report."""
    if request.node.get_closest_marker(MARKER) is not None:
        request.getfixturevalue("crash_report")


@pytest.fixture
def crash_report(request: pytest.FixtureRequest, tmp_path: Path,
                 track_fault_processes: Any) -> EnumerationReport | ScenarioReport:
    """The enumeration the test's ``crash_enumeration`` marker asks for (run once, at setup)."""
    from ..faults.enumerate import enumerate_crashes
    from ..faults.scenario import enumerate_scenario

    enumeration = request.node.stash.get(_ENUMERATION, None)
    if enumeration is None:
        pytest.fail(f"the crash_report fixture needs @pytest.mark.{MARKER}(...) on the test", pytrace=False)
    data_dir = tmp_path / "crash-enumeration"
    warned: list[str] = []
    report: EnumerationReport | ScenarioReport
    if enumeration.scenario is not None:
        report = enumerate_scenario(enumeration.tree, enumeration.scenario, enumeration.check,
                                    points=enumeration.points, base=enumeration.base, data_dir=data_dir,
                                    limit=enumeration.max_sites, warn=warned.append,
                                    drive_timeout=enumeration.drive_timeout)
    else:
        extra: dict[str, Any] = {"base": enumeration.base} if _takes_base() else {}
        report = enumerate_crashes(enumeration.tree, enumeration.config, points=enumeration.points,
                                   fresh=enumeration.fresh, data_dir=data_dir, warn=warned.append,
                                   limit=enumeration.max_sites, **extra)
    for message in warned:
        warnings.warn(f"{MARKER}: {message}", UserWarning, stacklevel=2)
    request.node.stash[_OUTCOME] = _Outcome(enumeration, report, data_dir, warned)
    request.node.add_report_section("setup", "crash enumeration", render_table(report))
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    """The verdict, before the test body: the body runs only on an enumeration that kept every invariant."""
    outcome = item.stash.get(_OUTCOME, None)
    if outcome is not None and (message := verdict(outcome)) is not None:
        pytest.fail(message, pytrace=False)


# -- verdict and rendering --------------------------------------------------------------------------------------


def verdict(outcome: _Outcome) -> str | None:
    """Why the enumeration fails the test (None: it passes)."""
    from ..faults.scenario import ScenarioReport
    from .scenario_verdict import rows_verdict, scenario_verdict

    if isinstance(outcome.report, ScenarioReport):
        return scenario_verdict(outcome.report, outcome.data_dir, outcome.warned)
    report, enumeration = outcome.report, outcome.enumeration
    head = (f"crash enumeration of tree {enumeration.tree.id!r} "
            f"(sessions={enumeration.config.sessions}, effects={enumeration.config.effects})")
    if report.baseline.violations:
        lines = "\n".join(f"  {v}" for v in report.baseline.violations)
        return f"{head}: the crash-free recording run already violates; no site was crashed at:\n{lines}"
    return rows_verdict(head, report.rows, outcome.warned, lambda row: _describe(row, enumeration, outcome.data_dir))


def _describe(row: CrashRow, enumeration: Enumeration, data_dir: Path) -> str:
    from ..faults.chaos import plan_to_toml

    site = row.site
    lines = [f"site {row.index}: {site}  (outcome {row.outcome}, killed: {', '.join(row.killed) or 'nothing'})"]
    lines += [f"    {v}" for v in row.violations]
    if row.error is not None:
        lines.append(f"    the harness failed: {row.error}")
    plan = plan_to_toml(site.plan()).strip().replace("\n", "\n      ")
    if site.shared:  # a simulated system: one process, the plan armed in every worker alike
        lines.append(f"    reproduce: this plan armed in every worker of a simulated system, then the same "
                     f"workload:\n      {plan}")
        lines.append(f"      with Bench(tree, config, base='simple') as bench: bench.run('replay', "
                     f"CrashSite({site.path!r}, {site.point!r}, {site.nth}, shared=True).plan())")
    else:
        lines.append(f"    reproduce: this plan armed in {site.path} only, then the same workload:\n      {plan}")
        lines.append(f"      with Bench(tree, config) as bench: bench.run('replay', CrashSite({site.path!r}, "
                     f"{site.point!r}, {site.nth}).plan(), at=[{site.path!r}])")
    lines.append(f"    data (events.jsonl, LMDB): {data_dir / (f'site{row.index}' if enumeration.fresh else 'record')}")
    return "\n".join(lines)


def render_table(report: EnumerationReport | ScenarioReport) -> str:
    """site → outcome, one line per site (shown with the test's report)."""
    from ..faults.scenario import ScenarioReport
    from .scenario_verdict import scenario_table

    if isinstance(report, ScenarioReport):
        return scenario_table(report)
    lines = [f"{len(report.rows)} site(s) in {report.duration_s:.1f}s: {report.summary()}",
             f"{'#':>3}  {'actor':<20} {'point':<30} {'hit':>3}  {'outcome':<11} {'statuses':<24} seconds"]
    for row in report.rows:
        statuses = ", ".join(f"{k}={v}" for k, v in row.statuses.items())
        lines.append(f"{row.index:>3}  {row.site.path:<20} {row.site.point:<30} {row.site.nth:>3}  "
                     f"{row.outcome:<11} {statuses:<24} {row.duration_s:.2f}")
    return "\n".join(lines)
