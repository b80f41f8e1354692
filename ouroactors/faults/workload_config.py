"""What a synthetic workload run is: its configuration, its effects, its grants and its targets.

Everything here is plain, frozen data, fully determined by the run id and the configuration, so a
run is the same on every try and a fault plan keyed on hit counts reproduces:

* :class:`WorkloadConfig` — how many sessions and effects and which variations (refused, denied,
  slow effects; leases on nested roots that conflict); validated on construction.
* :class:`EffectSpec` — one effect of one session (its id, idempotency key, arguments).
* **The grant seam** — :class:`GrantDecision` and the :data:`Grant` callable that decides when the
  tree has no grants authority (:func:`allow_all`, :func:`deny_every`); :func:`grant_rules` are the
  node rules a grants authority needs to decide the same (:data:`DENIED_HOST` is what it denies).
* :class:`Targets` — where the authorities and the lease owners are in the tree.

The driver that plays the sessions is :mod:`.workload`, which re-exports everything here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

EFFECT_KIND = "http_request"
PERMISSION_KIND = "permission"
PRINCIPAL = "faults.workload"
DENIED_HOST = "denied.invalid"  # where a forbidden effect would go; a node rule denies it (RFC 2606 name)


def grant_rules(world_host: str) -> list[str]:
    """The node rules a grants authority needs for this workload: the world's host is allowed — to be read and
    written (the effect is an HTTP POST to it: a write, which ``WebFetch`` alone does not admit) — and
    :data:`DENIED_HOST` is denied for every method (``deny_every``)."""
    return [f"allow:WebFetch(domain:{world_host})", f"allow:WebWrite(domain:{world_host})",
            f"deny:WebFetch(domain:{DENIED_HOST})"]

DRIVERS = ("synthetic", "runtime")


# -- the grant seam ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EffectSpec:
    """One effect of one session, fully determined by the run id, session and index."""

    run_id: str
    session_id: str
    index: int  # within the session
    ordinal: int  # across the run (session-major), for every-n-th choices
    refuse: bool = False  # the world will refuse it (a definite failure)
    slow: bool = False  # the world answers late: the effect happens, the driver gives up waiting
    forbidden: bool = False  # deny_every picked it: aimed at DENIED_HOST, so the grants authority denies it

    @property
    def effect_id(self) -> str:
        return f"{self.session_id}/e{self.index}"

    @property
    def key(self) -> str:
        return f"{self.session_id}/k{self.index}"

    def payload(self, reply_delay_s: float) -> dict[str, Any]:
        out: dict[str, Any] = {"session": self.session_id, "effect": self.index}
        if self.refuse:
            out["refuse"] = True
        if self.slow:
            out["reply_delay_s"] = reply_delay_s
        return out

    def arguments(self) -> dict[str, Any]:
        """What the effect does (its fingerprint's arguments): independent of timing knobs."""
        return {"key": self.key, "session": self.session_id, "effect": self.index, "refuse": self.refuse}


@dataclass(frozen=True)
class GrantDecision:
    """A permission decision for one effect (recorded in the ledger before the effect's start)."""

    allow: bool
    reason: str = "allowed by default"
    rule: str = "default"
    generation: int | None = None  # the grants authority's generation that decided (None: a callable)


Grant = Callable[[EffectSpec], GrantDecision]


def allow_all(effect: EffectSpec) -> GrantDecision:
    """The default grant: everything is allowed (the grants authority is not in the tree yet)."""
    return GrantDecision(True)


def deny_every(n: int) -> Grant:
    """A grant that denies every ``n``-th effect of a run (by ordinal, 1-based)."""
    if type(n) is not int or n < 1:
        raise ValueError(f"deny_every: must be an int >= 1, got {n!r}")

    def grant(effect: EffectSpec) -> GrantDecision:
        if (effect.ordinal + 1) % n == 0:
            return GrantDecision(False, f"denied: every {n}th effect", rule=f"deny_every_{n}")
        return GrantDecision(True)

    return grant


# -- configuration ------------------------------------------------------------------------------------------


MAX_TIMEOUT_S = 86400  # a workload's or a scenario's timeouts at most: a day


@dataclass(frozen=True)
class WorkloadConfig:
    """How many sessions and effects, and which variations. Validated on construction."""

    sessions: int = 2
    effects: int = 2
    leases: bool = True  # lease a workspace root per session (when the tree has a real workspace)
    overlapping_roots: bool = True  # sessions 2k and 2k+1 lease nested roots: they conflict
    refuse_every: int | None = None  # every n-th effect is refused by the world (settled failed)
    deny_every: int | None = None  # every n-th effect is denied (by a grants rule, or the default callable)
    slow_every: int | None = None  # every n-th effect's reply comes after the driver gave up
    ask_timeout: float = 1.0  # seconds per request to an authority
    effect_timeout: float = 1.0  # seconds the driver waits for the world
    op_deadline: float = 15.0  # give up one request after retrying this long (the tree never came back)
    lease_wait: float = 15.0  # give up waiting for a conflicting lease after this long
    # Who plays the sessions: "synthetic" — this module's Driver, against the bare authorities; "runtime" —
    # real sessions of the real runtime (:mod:`.runtime_driver`; multiproc only, the tree needs an execution
    # supervisor of runtimes: ``runner.workload_tree(runtime=True)``).
    driver: str = "synthetic"
    kills: int = 0  # runtime driver: SIGKILLs per run (runtime or ledger), drawn from the run's stem

    def __post_init__(self) -> None:
        if self.driver not in DRIVERS:
            raise ValueError(f"driver: {self.driver!r}; allowed: {', '.join(map(repr, DRIVERS))}")
        if type(self.kills) is not int or not 0 <= self.kills <= 100:
            raise ValueError(f"kills: must be an int in [0, 100], got {self.kills!r}")
        if self.kills and self.driver != "runtime":
            raise ValueError(f"kills: the driver's own kills are the runtime driver's (driver='runtime'), "
                             f"not {self.driver!r}'s: use a fault plan")
        for name in ("sessions", "effects"):
            value = getattr(self, name)
            if type(value) is not int or not 1 <= value <= 1000:
                raise ValueError(f"{name}: must be an int in [1, 1000], got {value!r}")
        for name in ("refuse_every", "deny_every", "slow_every"):
            value = getattr(self, name)
            if value is not None and (type(value) is not int or value < 1):
                raise ValueError(f"{name}: must be an int >= 1 or None, got {value!r}")
        for name in ("ask_timeout", "effect_timeout", "op_deadline", "lease_wait"):
            value = getattr(self, name)  # nan and inf fail too: a wait that never ends, or overflows a clock
            if not isinstance(value, int | float) or isinstance(value, bool) or not 0 < value < float("inf"):
                raise ValueError(f"{name}: must be a number of seconds > 0, got {value!r}")
            if value > MAX_TIMEOUT_S:
                raise ValueError(f"{name}: must be at most {MAX_TIMEOUT_S} seconds (a day), got {value!r}")

    def effect_specs(self, run_id: str, session: int) -> list[EffectSpec]:
        out = []
        for index in range(self.effects):
            ordinal = session * self.effects + index
            nth = ordinal + 1
            out.append(EffectSpec(
                run_id=run_id, session_id=session_id(run_id, session), index=index, ordinal=ordinal,
                refuse=bool(self.refuse_every and nth % self.refuse_every == 0),
                slow=bool(self.slow_every and nth % self.slow_every == 0),
                forbidden=bool(self.deny_every and nth % self.deny_every == 0),
            ))
        return out

    def root_of(self, base: str, session: int) -> str:
        """The workspace root session ``session`` leases (exclusive)."""
        if self.overlapping_roots:
            pair = f"{base}/pair{session // 2}"
            return pair if session % 2 == 0 else f"{pair}/inner"
        return f"{base}/s{session}"


def session_id(run_id: str, session: int) -> str:
    return f"{run_id}/s{session}"


# -- what the driver talks to ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Targets:
    """Tree paths of the authorities the workload uses and of the lease owners."""

    ledger: str
    workspace: str | None = None  # None: the tree has no real workspace authority (no leases)
    storage: str | None = None
    grants: str | None = None  # None: no grants authority; the driver's Grant callable decides
    owners: tuple[str, ...] = ()  # one owner actor per session (cycled when fewer)

    def owner_of(self, session: int) -> str | None:
        return self.owners[session % len(self.owners)] if self.owners else None


def is_permission(effect_id: str) -> bool:
    return effect_id.endswith("/grant")


__all__ = [
    "DENIED_HOST", "DRIVERS", "EFFECT_KIND", "MAX_TIMEOUT_S", "PERMISSION_KIND", "PRINCIPAL", "EffectSpec", "Grant",
    "GrantDecision", "Targets", "WorkloadConfig", "allow_all", "deny_every", "grant_rules", "is_permission",
    "session_id",
]
