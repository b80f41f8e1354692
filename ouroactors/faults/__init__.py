"""Fault injection: fault plans, an observable world, a workload, invariant checkers, crash
enumeration and seeded chaos campaigns.

* **Fault plans** (re-exported from :mod:`ouroactors.core.faults`): named points in production
  code (``point("storage.before_commit")``), rules that raise, exit, delay, SIGKILL a named actor,
  drop or duplicate a message, or make a commit rejected / unknown / map-full; plans load from TOML.
* :mod:`.world` — :class:`World`, a small HTTP service in its own process that counts deliveries
  per idempotency key (a duplicate effect is visible) and answers look-ups (reconcilers ask it).
* :mod:`.workload` — :class:`Driver`, N sessions driving the authorities as the runtime will:
  lease → grant → record_started → effect on the world → record_settled, honestly under errors.
* :mod:`.checks` — pure invariant checkers over an :class:`Observation`.
* :mod:`.runner` — :class:`Bench`: a system + the world; one run → recovery → observation → checks.
* :mod:`.enumerate` — :func:`enumerate_crashes`: record the points a scenario hits, then SIGKILL at
  each one in turn and report a table of site → outcome.
* :mod:`.chaos` — :func:`plan_for_seed` (same seed → same plan) and :class:`Campaign`: random kills,
  storage faults and delays over many seeds on one system, violations with their seed and plan.
* :mod:`.scenario` and :mod:`.scenario_chaos` — the same two tools for **your own** tree: ``drive(system)`` sends
  your scenario's requests, ``check(system)`` says what must hold after a crash; :func:`enumerate_scenario` crashes
  at every site it reaches, :func:`chaos_scenario` runs it under each seed's plan.
"""

from ..core.faults import (
    FaultAction,
    FaultFiring,
    FaultInjected,
    FaultPlan,
    FaultRule,
    InjectedCommitRejected,
    InjectedCommitUnknown,
    InjectedMapFull,
    arm,
    armed,
    disarm,
    firings,
    known_points,
    load_plan,
    point,
    register_point,
    validate_plan,
)
from .chaos import (
    Campaign,
    CampaignStats,
    PlanWarning,
    SeedResult,
    campaign,
    check_plan,
    declared_points,
    parse_seed,
    plan_for_seed,
    plan_to_toml,
)
from .checks import CHECKS, INVARIANTS, Observation, Violation, check_all
from .enumerate import CrashRow, CrashSite, EnumerationReport, enumerate_crashes, enumeration_tree
from .runner import Bench, BenchError, RunResult, owners_tree, prepare_tree, tree_targets, workload_tree
from .scenario import ScenarioReport, ScenarioRow, enumerate_scenario
from .scenario_chaos import ScenarioCampaign, SeedRow, chaos_scenario
from .workload import (
    Driver,
    DriverRecord,
    EffectRecord,
    EffectSpec,
    Grant,
    GrantDecision,
    SessionOwner,
    Targets,
    WorkloadConfig,
    allow_all,
    deny_every,
)
from .world import World, WorldClient, WorldError, reconcile

__all__ = [
    "CHECKS",
    "INVARIANTS",
    "Bench",
    "BenchError",
    "Campaign",
    "CampaignStats",
    "CrashRow",
    "CrashSite",
    "Driver",
    "DriverRecord",
    "EffectRecord",
    "EffectSpec",
    "EnumerationReport",
    "FaultAction",
    "FaultFiring",
    "FaultInjected",
    "FaultPlan",
    "FaultRule",
    "Grant",
    "GrantDecision",
    "InjectedCommitRejected",
    "InjectedCommitUnknown",
    "InjectedMapFull",
    "Observation",
    "PlanWarning",
    "RunResult",
    "ScenarioCampaign",
    "ScenarioReport",
    "ScenarioRow",
    "SeedResult",
    "SeedRow",
    "SessionOwner",
    "Targets",
    "Violation",
    "WorkloadConfig",
    "World",
    "WorldClient",
    "WorldError",
    "allow_all",
    "arm",
    "armed",
    "campaign",
    "chaos_scenario",
    "check_all",
    "check_plan",
    "declared_points",
    "deny_every",
    "disarm",
    "enumerate_crashes",
    "enumerate_scenario",
    "enumeration_tree",
    "firings",
    "known_points",
    "load_plan",
    "owners_tree",
    "parse_seed",
    "plan_for_seed",
    "plan_to_toml",
    "point",
    "prepare_tree",
    "reconcile",
    "register_point",
    "tree_targets",
    "validate_plan",
    "workload_tree",
]
