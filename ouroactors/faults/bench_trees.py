"""The trees a bench runs: the authorities tree under test and the ``sessions`` tree of lease owners.

* :func:`workload_tree` builds agent.toml's authorities (storage → ledger → grants → workspace,
  optionally the runtime's ``execution``); :func:`owners_tree` one lease owner per session.
* :func:`prepare_tree` sets any tree up for the workload, finding each authority **by class** (a
  ``Ledger``, ``Grants`` or ``Workspace`` subclass, so a custom ledger is prepared like the real one).
* :func:`tree_targets` tells the driver where those authorities are; :func:`static_workers` lists
  the workers a tree declares (where plans are armed and kills aimed).

Pure functions over :class:`~ouroactors.supervision.specs.ChildSpec`: nothing here starts a
system. :mod:`.runner` runs the trees (and re-exports everything here).
"""

from __future__ import annotations

from ..authorities.grants.actor import Grants
from ..authorities.ledger.actor import Ledger
from ..authorities.workspace.actor import Workspace
from ..core.errors import OuroactorsError
from ..supervision.specs import ChildSpec, resolve_actor, supervisor, worker
from .runtime_driver import RUNTIME_ACTOR, is_runtime
from .workload import EFFECT_KIND, Targets, grant_rules

STORAGE_ACTOR = "ouroactors.authorities.storage.actor:Storage"
LEDGER_ACTOR = "ouroactors.authorities.ledger.actor:Ledger"
GRANTS_ACTOR = "ouroactors.authorities.grants.actor:Grants"
WORKSPACE_ACTOR = "ouroactors.authorities.workspace.actor:Workspace"
OWNER_ACTOR = "ouroactors.faults.workload:SessionOwner"
RECONCILER = "ouroactors.faults.world:reconcile"
OWNERS_TREE = "sessions"
GRANTS_BY_DEFAULT = True  # workload_tree() includes the grants authority (see the campaign's time budget)


class BenchError(OuroactorsError):
    """The bench could not bring the system into a state to run (or check) a workload."""



def workload_tree(name: str = "agent", *, ledger: str = LEDGER_ACTOR, workspace: bool = True,
                  grants: bool = GRANTS_BY_DEFAULT, intensity: int = 100, period: float = 5.0,
                  heartbeat_s: float = 0.5, owner_lost_after_s: float = 2.0, runtime: bool = False,
                  runtime_actor: str = RUNTIME_ACTOR) -> ChildSpec:
    """storage → ledger (→ grants) (→ workspace) under rest_for_one, in agent.toml's order;
    :func:`prepare_tree` adds the reconciler, the grants rules the workload needs and the
    workspace's allowed root. ``intensity`` is high: chaos kills often, and an escalation
    (possible, and handled) hides what the run would have shown. With ``grants`` the workload asks
    the grants authority for every effect; without it, the driver's grant callable decides.
    ``runtime`` adds agent.toml's ``execution`` with the real session runtime (``simple_one_for_one``
    of :data:`~.runtime_driver.RUNTIME_ACTOR`, allowed to reach the world on loopback) for
    ``WorkloadConfig(driver="runtime")``; it needs grants and the workspace."""
    if runtime and not (grants and workspace):
        raise BenchError("workload_tree(runtime=True): the runtime needs the grants and workspace authorities")
    children = [worker("storage", STORAGE_ACTOR), worker("ledger", ledger)]
    if grants:
        children.append(worker("grants", GRANTS_ACTOR))
    if workspace:
        children.append(worker("workspace", WORKSPACE_ACTOR,
                               kwargs={"heartbeat_s": heartbeat_s, "owner_lost_after_s": owner_lost_after_s}))
    if runtime:
        children.append(supervisor("execution", [worker("runtime", runtime_actor, restart="transient",
                                                        kwargs={"network_private": ["127.0.0.1/32"]})],
                                   strategy="simple_one_for_one", intensity=intensity, period=period))
    return supervisor(name, children, strategy="rest_for_one", intensity=intensity, period=period)


def owners_tree(owners: int, name: str = OWNERS_TREE) -> ChildSpec:
    """One lease-owner actor per session (the workspace watches it)."""
    return supervisor(name, [worker(f"s{i}", OWNER_ACTOR) for i in range(owners)], intensity=100, period=5.0)


def _class_of(spec: ChildSpec) -> type | None:
    if spec.is_supervisor or spec.actor is None:
        return None
    try:
        return resolve_actor(spec.actor)
    except ValueError:
        return None


def _is(spec: ChildSpec, base: type) -> bool:
    cls = _class_of(spec)
    return cls is not None and issubclass(cls, base)


def prepare_tree(spec: ChildSpec, *, allowed_root: str, world_host: str = "127.0.0.1") -> ChildSpec:
    """A copy of ``spec`` set up for the workload: the ledger (any ``Ledger`` subclass) gets the
    world reconciler for ``http_request`` effects, a grants authority (any ``Grants``) the node
    rules of :func:`~.workload.grant_rules` (allow the world's host, deny the forbidden one; added
    to its own, so its denies still win), the workspace gets ``allowed_root``."""

    def visit(node: ChildSpec) -> ChildSpec:
        if node.is_supervisor:
            return node.model_copy(update={"children": tuple(visit(c) for c in node.children or ())})
        if _is(node, Ledger):
            reconcilers = {**node.kwargs.get("reconcilers", {}), EFFECT_KIND: RECONCILER}
            return node.model_copy(update={"kwargs": {**node.kwargs, "reconcilers": reconcilers}})
        if _is(node, Grants):
            rules = dict(node.kwargs.get("rules") or {})
            rules["node"] = list(dict.fromkeys([*rules.get("node", ()), *grant_rules(world_host)]))
            return node.model_copy(update={"kwargs": {**node.kwargs, "rules": rules}})
        if is_runtime(node):  # the http tool reaches the world on loopback (a private address)
            private = list(dict.fromkeys([*node.kwargs.get("network_private", ()), "127.0.0.1/32"]))
            return node.model_copy(update={"kwargs": {**node.kwargs, "network_private": private}})
        if _is(node, Workspace):
            roots = [*node.kwargs.get("allowed_roots", []), allowed_root]
            return node.model_copy(update={"kwargs": {**node.kwargs, "allowed_roots": roots}})
        return node

    return visit(spec)


def tree_targets(spec: ChildSpec, owners: int, owners_name: str = OWNERS_TREE) -> Targets:
    """Where the workload finds its authorities in ``spec`` (a Ledger, Grants and Workspace, by class)."""
    found: dict[str, str] = {}

    def visit(node: ChildSpec, path: str) -> None:
        for child in node.children or ():
            here = f"{path}/{child.id}"
            if child.is_supervisor:
                visit(child, here)
            elif _is(child, Ledger):
                found.setdefault("ledger", here)
            elif _is(child, Workspace):
                found.setdefault("workspace", here)
            elif _is(child, Grants):
                found.setdefault("grants", here)
            elif child.actor == STORAGE_ACTOR:
                found.setdefault("storage", here)

    visit(spec, spec.id)
    if "ledger" not in found:
        raise BenchError(f"tree {spec.id!r} has no ledger (a worker whose actor is a Ledger): the workload "
                         "records every effect there")
    return Targets(ledger=found["ledger"], workspace=found.get("workspace"), storage=found.get("storage"),
                   grants=found.get("grants"), owners=tuple(f"{owners_name}/s{i}" for i in range(owners)))


def static_workers(spec: ChildSpec) -> list[str]:
    """Paths of the workers ``spec`` declares, in start order (templates of dynamic supervisors excluded)."""
    out: list[str] = []

    def visit(node: ChildSpec, path: str) -> None:
        if node.flags.strategy.value == "simple_one_for_one":
            return
        for child in node.children or ():
            here = f"{path}/{child.id}"
            if child.is_supervisor:
                visit(child, here)
            else:
                out.append(here)

    visit(spec, spec.id)
    return out



__all__ = [
    "GRANTS_ACTOR", "GRANTS_BY_DEFAULT", "LEDGER_ACTOR", "OWNERS_TREE", "OWNER_ACTOR", "RECONCILER", "STORAGE_ACTOR",
    "WORKSPACE_ACTOR", "BenchError", "owners_tree", "prepare_tree", "static_workers", "tree_targets", "workload_tree",
]
