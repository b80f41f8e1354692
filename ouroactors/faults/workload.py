"""A synthetic workload that drives the authorities the way sessions will.

N sessions, each: **lease** a workspace root once → for every effect: check the lease's fencing
token → **grant** → ``record_started`` → the **effect** (a call to the world service with the
idempotency key) → ``record_settled(ok | failed, evidence)`` → finally release the lease.

* **The grant** comes from the tree's grants authority when it has one (a ``Grants`` worker, found
  by class): the driver asks it ``Decide`` (a ``network`` request of tool ``http_request`` for the
  world's host), stamped with its generation like every request. The authority records its own
  decision in the ledger before answering; the driver then records, in the same batch as the
  effect's start, the ``permission`` entry the start names as its grant (what it ran under). A
  tree without a grants authority gets the pluggable :data:`Grant` callable instead (default
  :func:`allow_all`). ``deny_every`` makes every n-th effect *forbidden*: with the authority it
  asks for a host that a node rule denies (:data:`DENIED_HOST`, see :func:`grant_rules`), so the
  denial is the authority's; without it the callable denies it.
* **The lease** is acquired with an idempotency key (``request_id``, :meth:`Driver.request_id`):
  a retry whose first answer was lost gets the grant its request made, not a conflict with its
  own lease.

The driver runs in the calling process (the test or the CLI), not in the actor system, so a kill
inside the system never kills the driver: it plays the part of the session runtime and keeps an
honest record (:class:`DriverRecord`) of every answer it got, which the checkers compare with the
durable state afterwards.

**Honesty rules.** The decisions are the runtime's own: :mod:`ouroactors.runtime.execution.honesty`
(one table, used by the live runtime's effect path too). A tool runs only on a ``created`` start;
an ``existing`` one is never run again (``ambiguous``: recovery and its reconciler own it);
``StaleGeneration`` for ``grants`` decides again (bounded); a world answer that is no answer
(timeout, transport error) is ``unknown`` and is **never** settled — left ``started``, ambiguous
after recovery; only a definite refusal by the world (HTTP 409, nothing created) is ``failed``;
``deny`` is ``record_denied`` and never runs. Where the table says *stop* (a stale stamp of
another authority, a commit outcome unknown) the runtime crashes; this driver gives the effect up.

**Transport rules** (only because this driver is outside the tree and talks by messages; the
runtime's ledger writes are direct, so it never needs them):

* Any error or timeout while recording a start: the start is asked again (same id, same
  fingerprint: idempotent) until the ledger answers or the deadline passes; nothing runs meanwhile.
* ``existing`` with status ``started`` for an effect this driver never called: our own earlier
  ask was committed but its answer lost. The world is asked for the key: seen → settled ``ok``
  with the world's record as evidence; not seen → the effect is run (this driver never ran it).
* The grant: an answer lost (timeout, crash, restart) → ask again; ``ask`` (nobody answers
  approvals here; also the authority's answer for an allow it could not record) → ask again until
  the deadline, then give the effect up unrecorded.
* Every request to an authority is stamped with the generation the driver is bound to; a
  ``StaleGeneration`` answer re-binds (looks the generation up again) and asks again.

:mod:`.runtime_driver` drives real sessions of the real runtime instead (``WorkloadConfig(driver=
"runtime")``): there the runtime applies the table itself and this module's driver is not used.

**Interleaving.** Sessions are generators stepped round-robin by one thread: each step is one
request. The interleaving is therefore the same on every run of the same workload, so a fault
plan keyed on hit counts (``nth``) reproduces. When every session is waiting for the tree to come
back, the driver polls with a short bounded pause. On a simulated system (virtual time) its
deadlines and pauses are on the system's clock, and a pause lets the system run that long: what a
run does then depends on the seed alone, never on how fast the machine is.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

import httpx

from ..authorities.grants.actor import Decide
from ..authorities.grants.rules import Effect, Request, Verdict
from ..authorities.ledger.actor import (
    LedgerAnswer,
    RecordBatch,
    RecordDenied,
    RecordSettled,
    RecordStarted,
)
from ..authorities.ledger.domain import StartRequest, Status, fingerprint
from ..authorities.workspace.actor import Acquire, CheckFence, Granted, Reclaim, Release
from ..authorities.workspace.leases import (
    Lease,
    LeaseConflict,
    LeaseError,
    NoReservation,
    NotReservationOwner,
    StaleFence,
)
from ..core import clock
from ..core.errors import (
    ActorCrashed,
    AskTimeout,
    ChildRestarting,
    CommitOutcomeUnknown,
    CommitRejected,
    NoSuchActor,
    OuroactorsError,
    StaleGeneration,
)
from ..runtime.execution.honesty import (
    REDECIDE_TRIES,
    Admission,
    RecordAction,
    StartAction,
    StartStep,
    ToolAction,
    on_record_answer,
    on_start_answer,
    on_tool_outcome,
    on_verdict,
)
from ..supervision.worker import Worker
from ..system.handle import ActorSystem
from ._asking import isolated
from .world import WorldClient, WorldError

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

# Errors after which nothing is known for sure: ask again (requests are idempotent).
TRANSIENT = (ActorCrashed, AskTimeout, ChildRestarting, CommitOutcomeUnknown, CommitRejected, NoSuchActor)


class SessionOwner(Worker):
    """The actor that owns a session's workspace lease (the workspace pings it; the base answers)."""

    def on_message(self, message: Any, sender: Any) -> Any:
        return message


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
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or not value > 0:
                raise ValueError(f"{name}: must be a number of seconds > 0, got {value!r}")

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


# -- the driver's record ---------------------------------------------------------------------------------------


@dataclass
class EffectRecord:
    """Everything the driver asked and heard about one effect."""

    effect_id: str
    key: str
    session_id: str
    expected: str  # the crash-free outcome: ok | failed | denied
    grant_answers: list[str] = field(default_factory=list)  # "allow", "deny", "ask", "error:X" (each Decide)
    start_answers: list[str] = field(default_factory=list)  # "created:started", "existing:ambiguous", "error:X"
    start_committed: bool = False  # the ledger answered the start (created or existing)
    start_seq: int | None = None
    start_generation: int | None = None  # the ledger generation the accepted start was stamped with
    effect_called: bool = False
    effect_called_ns: int | None = None
    effect_answer: dict[str, Any] | None = None  # None: no answer (timeout or transport error)
    settle_answers: list[str] = field(default_factory=list)  # "created:ok", "existing:ok", "error:X"
    settled: str | None = None  # the settlement status the ledger confirmed (created or existing)
    settle_created: int = 0  # how many settlement requests the ledger answered "created"
    outcome: str = "pending"  # settled-ok | settled-failed | denied | left-started | left-ambiguous |
    #                          already-<status> | abandoned: <why>


@dataclass
class LeaseRecord:
    session_id: str
    root: str
    mode: str
    grants: list[tuple[str, int, int]] = field(default_factory=list)  # (lease id, token, t_ns)
    reclaims: int = 0
    replays: int = 0  # grants answered from an earlier request with the same request_id (an answer lost)
    released: bool = False
    outcome: str = "pending"


@dataclass
class DriverRecord:
    run_id: str
    effects: dict[str, EffectRecord] = field(default_factory=dict)
    leases: dict[str, LeaseRecord] = field(default_factory=dict)
    lease_snapshots: list[list[Lease]] = field(default_factory=list)
    rebinds: int = 0
    stale_answers: int = 0
    kills: list[str] = field(default_factory=list)  # what the driver itself killed (the runtime workload)
    errors: list[str] = field(default_factory=list)
    started_ns: int = 0
    ended_ns: int = 0

    def outcomes(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for effect in self.effects.values():
            key = effect.outcome.split(":", 1)[0]
            counts[key] = counts.get(key, 0) + 1
        return dict(sorted(counts.items()))


# -- the driver ----------------------------------------------------------------------------------------------------

_WAIT = "wait"  # a session step that made no progress (waiting for the tree)
_STEP = "step"


@dataclass
class _Result:
    value: Any = None
    error: BaseException | None = None
    gave_up: bool = False  # transient errors until the deadline: nothing is known

    @property
    def ok(self) -> bool:
        return self.error is None


class Driver:
    """Plays ``config.sessions`` sessions against ``targets`` and the world; see the module doc."""

    def __init__(self, system: ActorSystem, targets: Targets, world: WorldClient, config: WorkloadConfig,
                 *, grant: Grant | None = None, workspace_root: str | None = None,
                 heal: Callable[[], None] | None = None) -> None:
        self.system = system
        self.targets = targets
        self.world = world
        self.config = config
        if grant is not None and targets.grants is not None:
            raise ValueError(f"the tree has a grants authority ({targets.grants}): the workload asks it for every "
                             "effect, so a grant callable would be ignored; use one or the other")
        if grant is not None:
            self.grant = grant
        elif config.deny_every:
            self.grant = deny_every(config.deny_every)
        else:
            self.grant = allow_all
        self.world_host = httpx.URL(world.url).host if isinstance(getattr(world, "url", None), str) else "127.0.0.1"
        self.workspace_root = workspace_root
        self.heal = heal  # called while every session waits (e.g. start a tree that ended by escalation)
        self.generations: dict[str, int | None] = {}
        self.record = DriverRecord("")
        self._finished: set[str] = set()
        # Keys the lease requests' idempotency keys (request_id): stable for one driver, unguessable.
        self._key_secret = secrets.token_bytes(32)

    # -- running --------------------------------------------------------------------------------------------

    def run(self, run_id: str) -> DriverRecord:
        """Run every session to its end (each effect settled, left for recovery, or abandoned)."""
        if "/" in run_id or not run_id:
            raise ValueError(f"run id must be a non-empty string without '/', got {run_id!r}")
        self.record = DriverRecord(run_id, started_ns=time.time_ns())
        leases = self.config.leases and self.targets.workspace is not None
        if leases and not self.workspace_root:
            raise ValueError("leases need a workspace_root (a directory under the workspace's allowed roots)")
        self._finished = set()
        sessions = {session_id(run_id, i): self._session(run_id, i, leases) for i in range(self.config.sessions)}
        next_heal = 0.0
        while sessions:
            progressed = False
            for sid, session in list(sessions.items()):
                try:
                    if next(session) != _WAIT:
                        progressed = True
                except StopIteration:
                    del sessions[sid]
                    self._finished.add(sid)
                    progressed = True
            if sessions and not progressed:
                if self.heal is not None and clock.monotonic() >= next_heal:
                    self.heal()
                    next_heal = clock.monotonic() + 0.1
                self.system.run_for(0.01)  # every session waits for the tree: let it run (sleeps on multiproc)
        self.record.ended_ns = time.time_ns()
        return self.record

    # -- one session ----------------------------------------------------------------------------------------

    def _session(self, run_id: str, index: int, leases: bool) -> Generator[str, None, None]:
        specs = self.config.effect_specs(run_id, index)
        for spec in specs:
            self.record.effects[spec.effect_id] = EffectRecord(
                spec.effect_id, spec.key, spec.session_id, self._expected(spec))
        sid = session_id(run_id, index)
        lease: LeaseRecord | None = None
        holder: dict[str, Any] = {}
        if leases:
            assert self.workspace_root is not None
            lease = self.record.leases[sid] = LeaseRecord(sid, self.config.root_of(self.workspace_root, index),
                                                          "exclusive")
            holder["request_id"] = self.request_id(sid, attempt=0)  # one lease per session here
            got = yield from self._acquire(lease, index, holder)
            if not got:
                for spec in specs:
                    self.record.effects[spec.effect_id].outcome = f"abandoned: no lease ({lease.outcome})"
                return
        for position, spec in enumerate(specs):
            if lease is not None:
                fenced = yield from self._fence(lease, index, holder)
                if not fenced:
                    for rest in specs[position:]:
                        self.record.effects[rest.effect_id].outcome = f"abandoned: lease lost ({lease.outcome})"
                    break
            yield from self._effect(spec)
        if lease is not None and holder:
            yield from self._release(lease, index, holder)

    def _expected(self, spec: EffectSpec) -> str:
        allowed = not spec.forbidden if self.targets.grants is not None else self.grant(spec).allow
        if not allowed:
            return "denied"
        return "failed" if spec.refuse else "ok"

    # -- requests ---------------------------------------------------------------------------------------------

    def _bind(self, path: str) -> None:
        with isolated(self.system) as system:
            self.generations[path] = system.child_info(path).generation
        self.record.rebinds += 1

    def _ask(self, path: str, message: Any | Callable[[], Any]) -> Generator[str, None, _Result]:
        """Ask ``path`` (stamped), retrying what is transient until the deadline; one step per try.

        ``message`` may be a callable that builds the request: it is called again on every try, so
        a request re-stamped after a generation change also carries the new authority snapshot.
        """
        deadline = clock.monotonic() + self.config.op_deadline
        last: BaseException | None = None
        while True:
            try:
                if path not in self.generations:
                    self._bind(path)
                payload = message() if callable(message) else message
                with isolated(self.system) as system:  # a late answer to an earlier ask cannot land here
                    answer = system.ask(path, payload, timeout=self.config.ask_timeout,
                                        stamp=self.generations[path])
                if isinstance(answer, list) and answer and all(isinstance(a, TRANSIENT) for a in answer):
                    raise answer[0]  # a whole batch rejected or unknown
                return _Result(answer)
            except StaleGeneration as exc:
                self.record.stale_answers += 1
                self.generations.pop(path, None)  # bind again before the next try
                last = exc
            except TRANSIENT as exc:
                self.generations.pop(path, None)  # it may have restarted: bind again
                last = exc
            except OuroactorsError as exc:  # a refusal: nothing changed, asking again will not help
                return _Result(error=exc)
            if clock.monotonic() > deadline:
                self.record.errors.append(f"{path}: gave up after {self.config.op_deadline}s: {last!r}")
                return _Result(error=last, gave_up=True)
            yield _WAIT  # an error is no progress: if every session is here, the driver pauses and heals

    def _authority_snapshot(self, decision: GrantDecision | None = None) -> dict[str, int]:
        """The generations the driver is bound to; ``grants`` is the one that made ``decision``."""
        out: dict[str, int] = {}
        for name, path in (("ledger", self.targets.ledger), ("workspace", self.targets.workspace),
                           ("storage", self.targets.storage)):
            generation = self.generations.get(path) if path else None
            if generation is not None:
                out[name] = generation
        if decision is not None and decision.generation is not None:
            out["grants"] = decision.generation
        return out

    # -- leases ----------------------------------------------------------------------------------------------

    def _owner_address(self, index: int) -> Generator[str, None, Any]:
        path = self.targets.owner_of(index)
        if path is None:
            return None
        deadline = clock.monotonic() + self.config.op_deadline
        while True:
            try:
                with isolated(self.system) as system:
                    return system.resolve(path)
            except OuroactorsError:
                if clock.monotonic() > deadline:
                    return None
                yield _WAIT

    def _snapshot(self) -> Generator[str, None, None]:
        assert self.targets.workspace is not None
        result = yield from self._ask(self.targets.workspace, "leases")
        if result.ok and isinstance(result.value, list):
            self.record.lease_snapshots.append(list(result.value))

    def request_id(self, sid: str, attempt: int) -> str:
        """The idempotency key of lease ``attempt`` of session ``sid`` (which includes the run id):
        the same on every retry of that acquisition and of its reclaims, so a retry whose answer was
        lost gets the grant its request made instead of conflicting with its own lease; an HMAC under
        this driver's secret, so nobody else can guess it (it unlocks the lease's capability)."""
        return hmac.new(self._key_secret, f"{sid}/lease{attempt}".encode(), hashlib.sha256).hexdigest()[:32]

    def _granted(self, lease: LeaseRecord, granted: Granted, holder: dict[str, Any]) -> None:
        holder["lease_id"] = granted.lease.lease_id
        holder["token"] = granted.lease.fencing_token
        holder["capability"] = granted.capability
        lease.grants.append((granted.lease.lease_id, granted.lease.fencing_token, time.time_ns()))
        if granted.replayed:
            lease.replays += 1

    def _acquire(self, lease: LeaseRecord, index: int, holder: dict[str, Any]) -> Generator[str, None, bool]:
        assert self.targets.workspace is not None
        deadline = clock.monotonic() + self.config.lease_wait
        while True:
            owner = yield from self._owner_address(index)
            result = yield from self._ask(self.targets.workspace,
                                          Acquire(lease.root, lease.mode, lease.session_id, owner=owner,
                                                  request_id=holder["request_id"]))
            if result.ok and isinstance(result.value, Granted):
                self._granted(lease, result.value, holder)
                lease.outcome = "held"
                yield from self._snapshot()
                return True
            if isinstance(result.error, LeaseConflict) and clock.monotonic() < deadline:
                futile = self._futile(lease, result.error.holders)
                if futile is None:
                    yield _WAIT  # another session holds an overlapping root: wait for its release
                    continue
                lease.outcome = f"not granted: {futile}"
                return False
            lease.outcome = f"not granted: {_describe(result.error or result.value)}"
            return False

    def _futile(self, lease: LeaseRecord, holders: list[Lease]) -> str | None:
        """Why waiting for ``holders`` cannot end (None: it can)."""
        if any(h.session_id == lease.session_id for h in holders):
            return "this session's own lease blocks it (an acquire whose answer was lost)"
        if holders and all(h.status == "reserved" and h.session_id in self._finished for h in holders):
            return "blocked by reservations of sessions that have ended here (nobody will reclaim them)"
        return None

    def _fence(self, lease: LeaseRecord, index: int, holder: dict[str, Any]) -> Generator[str, None, bool]:
        """Check the lease still admits our writes; reclaim it (with its capability) if it was reserved."""
        assert self.targets.workspace is not None
        result = yield from self._ask(self.targets.workspace, CheckFence(lease.root, holder["token"]))
        if result.ok and isinstance(result.value, Lease):
            return True
        if not isinstance(result.error, StaleFence):
            lease.outcome = f"fence check failed: {_describe(result.error or result.value)}"
            return False
        owner = yield from self._owner_address(index)
        result = yield from self._ask(self.targets.workspace, Reclaim(lease.session_id, lease.root, lease.mode,
                                                                      holder["capability"], owner=owner,
                                                                      request_id=holder["request_id"]))
        if isinstance(result.error, NotReservationOwner | NoReservation):
            # The capability we hold is not the reservation's: an earlier grant for our request (a
            # reclaim, or a retried acquire) was committed but its answer lost. The request's key
            # proves the same session: the acquire with it reclaims the reservation for us.
            result = yield from self._ask(self.targets.workspace,
                                          Acquire(lease.root, lease.mode, lease.session_id, owner=owner,
                                                  request_id=holder["request_id"]))
        if result.ok and isinstance(result.value, Granted):
            self._granted(lease, result.value, holder)
            lease.reclaims += 1
            yield from self._snapshot()
            return True
        lease.outcome = f"reclaim failed: {_describe(result.error or result.value)}"
        holder.clear()
        return False

    def _release(self, lease: LeaseRecord, index: int, holder: dict[str, Any]) -> Generator[str, None, None]:
        assert self.targets.workspace is not None
        for _attempt in range(3):
            result = yield from self._ask(self.targets.workspace,
                                          Release(holder["lease_id"], capability=holder["capability"]))
            if result.ok and isinstance(result.value, Lease):
                lease.released = True
                lease.outcome = "released"
                yield from self._snapshot()
                return
            if not isinstance(result.error, LeaseError):
                break
            # Reserved meanwhile (the owner or the workspace restarted): reclaim it, then release.
            if not (yield from self._fence(lease, index, holder)):
                return
        lease.outcome = f"not released: {_describe(result.error or result.value)}"

    # -- the grant ------------------------------------------------------------------------------------------

    def grant_request(self, spec: EffectSpec) -> Request:
        """What the grants authority is asked for ``spec``: a network call of tool ``http_request`` — the POST the
        world is sent, with its method, so grants judge it as the write it is (``WebWrite``), as they judge the
        runtime's ``http`` tool."""
        host = DENIED_HOST if spec.forbidden else self.world_host
        return Request(principal=spec.session_id, tool=EFFECT_KIND, effect=Effect.NETWORK, domains=(host,),
                       method="POST")

    def _decide(self, spec: EffectSpec, record: EffectRecord) -> Generator[str, None, GrantDecision | str]:
        """The grant for ``spec`` (a string: why there is none; the effect is then given up unrecorded)."""
        if self.targets.grants is None:
            decision = self.grant(spec)
            record.grant_answers.append("allow" if decision.allow else "deny")
            return decision
        path = self.targets.grants
        deadline = clock.monotonic() + self.config.op_deadline
        request = self.grant_request(spec)
        while True:
            # _ask stamps the generation, asks again after a lost answer (timeout, crash, restart) and
            # after StaleGeneration; every Decide is recorded by the authority (a new decision each time).
            result = yield from self._ask(path, Decide(request))
            verdict = result.value if result.ok else None
            if not isinstance(verdict, Verdict):
                answer = result.error if result.error is not None else result.value
                record.grant_answers.append(f"error:{type(answer).__name__}")
                return f"no grant ({_describe(answer)})"
            record.grant_answers.append(verdict.decision.value)
            if on_verdict(verdict.decision) is not Admission.APPROVAL:
                rule = str(verdict.rule) if verdict.rule is not None else "grants"
                return GrantDecision(on_verdict(verdict.decision) is Admission.START, verdict.reason[:400],
                                     rule=rule[:200],
                                     generation=self.generations.get(path))  # the stamp it was answered under
            # ask: nobody answers approvals in this workload (a session would wait for an operator).
            # It is also the answer for an allow the authority could not record: ask again.
            if clock.monotonic() > deadline:
                return f"not granted: asked for approval ({verdict.reason[:200]})"
            yield _WAIT

    # -- one effect ------------------------------------------------------------------------------------------

    def _effect(self, spec: EffectSpec) -> Generator[str, None, None]:
        """Decide, record the start and act on the ledger's answer by :mod:`~ouroactors.runtime.execution.honesty`'s
        table (the runtime's own rules); what differs is transport, handled here and in :meth:`_ask`."""
        record = self.record.effects[spec.effect_id]
        decisions = 0
        while True:
            admitted = yield from self._admit(spec, record)
            if admitted is None:
                return
            decision, answer = admitted
            decisions += 1
            if not decision.allow:
                self._denied(record, answer)
                return
            step = on_start_answer(answer, decisions)
            if step.action is not StartAction.REDECIDE:
                break
            # The grant was decided under a grants generation that is gone: the ledger refused the
            # start (nothing recorded, nothing run). Decide again under the current one.
            self.generations.pop(self.targets.grants or "", None)
            record.start_answers.append(f"error:StaleGeneration({answer.authority})")
        if step.action is StartAction.NOT_RECORDED and isinstance(answer, StaleGeneration):
            record.start_answers.append(f"error:StaleGeneration({answer.authority})")
            record.outcome = f"abandoned: grants changed generation {decisions} times in a row"
            return
        if step.action in (StartAction.NOT_RECORDED, StartAction.BROKEN):
            # The runtime would crash on BROKEN; a driver outside the tree can only stop this effect. The
            # transient answers were asked again by _ask until its deadline: nothing is known, nothing runs.
            record.start_answers.append(f"error:{type(answer).__name__}")
            record.outcome = (f"abandoned: start not recorded ({_describe(answer)})" if answer is not None
                              else "abandoned: start not recorded")
            return
        assert isinstance(answer, LedgerAnswer)
        yield from self._run(spec, record, step, answer)

    def _admit(self, spec: EffectSpec, record: EffectRecord
               ) -> Generator[str, None, tuple[GrantDecision, Any] | None]:
        """Decide and ask the ledger to record the start (or the denial): the decision and the ledger's answer
        (a LedgerAnswer, a refusal or an error), or None when there is no grant (``record.outcome`` says why)."""
        granted = yield from self._decide(spec, record)
        if isinstance(granted, str):
            record.outcome = f"abandoned: {granted}"  # nothing recorded, nothing run
            return None
        decision = granted
        by = "grants" if self.targets.grants is not None else "callable"

        def batch() -> RecordBatch:  # built per try: the authority snapshot follows re-binding
            request = self._start_request(spec, decision)
            permission = self._permission_request(spec, decision)
            return RecordBatch((
                RecordStarted(permission),
                RecordSettled(permission.effect_id, "ok", reason=decision.reason,
                              evidence={"allow": decision.allow, "rule": decision.rule, "by": by,
                                        "generation": decision.generation}),
                RecordStarted(request) if decision.allow else RecordDenied(request, decision.reason),
            ))

        result = yield from self._ask(self.targets.ledger, batch)
        answer = result.value[-1] if result.ok and isinstance(result.value, list) else result.error
        return decision, answer

    def _denied(self, record: EffectRecord, answer: Any) -> None:
        if on_record_answer(answer) is not RecordAction.RECORDED:
            record.start_answers.append(f"error:{type(answer).__name__}")
            record.outcome = f"abandoned: denial not recorded ({_describe(answer)})"
            return
        entry = answer.entry
        self._committed(record, answer)
        record.outcome = "denied" if entry.status is Status.DENIED else f"already-{entry.status.value}"

    @staticmethod
    def _committed(record: EffectRecord, answer: LedgerAnswer) -> None:
        entry = answer.entry
        record.start_answers.append(f"{answer.answer}:{entry.status.value}")
        record.start_committed = True
        record.start_seq = entry.seq
        record.start_generation = entry.authority.get("ledger")

    def _run(self, spec: EffectSpec, record: EffectRecord, step: StartStep,
             answer: LedgerAnswer) -> Generator[str, None, None]:
        """Run the effect if the table says so, then settle what the world told us."""
        entry = answer.entry
        self._committed(record, answer)
        if step.action is StartAction.NOT_AGAIN:
            if entry.status is not Status.STARTED:
                # ambiguous: recovery and its reconciler own it; terminal: it is done.
                ambiguous = entry.status is Status.AMBIGUOUS
                record.outcome = "left-ambiguous" if ambiguous else f"already-{entry.status.value}"
                return
            # Transport, not honesty: the runtime never meets an ``existing`` start it has not run (its
            # writes are direct). This driver does — its own earlier ask committed, the answer lost — and
            # it knows it never called the world for this key. It asks the world which is true.
            try:
                seen = self.world.lookup(spec.key)
            except (httpx.HTTPError, WorldError) as exc:
                record.outcome = f"left-started: world unreachable for the check ({exc!r})"
                return
            if seen is not None:
                yield from self._settle(spec, record, "ok", {"world": seen, "reconciled_by": "driver"})
                return
        yield _STEP
        record.effect_called = True
        record.effect_called_ns = time.time_ns()
        try:
            world_answer: dict[str, Any] | None = self.world.create(
                spec.key, spec.payload(self.config.effect_timeout * 2), timeout=self.config.effect_timeout)
            status = "failed" if world_answer and world_answer.get("refused") else "ok"  # a 409: nothing created
        except (httpx.HTTPError, WorldError) as exc:
            world_answer, status = None, "unknown"
            why = type(exc).__name__
        record.effect_answer = world_answer
        if on_tool_outcome(status) is ToolAction.LEAVE_STARTED:
            record.outcome = f"left-started: no answer from the world ({why})"
            return  # it may have happened: never settled as failed
        yield from self._settle(spec, record, status, {"world": world_answer})

    def _settle(self, spec: EffectSpec, record: EffectRecord, status: str,
                evidence: dict[str, Any]) -> Generator[str, None, None]:
        reason = "refused by the world" if status == "failed" else None
        result = yield from self._ask(self.targets.ledger, RecordSettled(spec.effect_id, status, reason=reason,
                                                                         evidence=evidence))
        answer = result.value if result.ok else result.error
        if isinstance(answer, LedgerAnswer):
            record.settle_answers.append(f"{answer.answer}:{answer.entry.status.value}")
            if answer.answer == "created":
                record.settle_created += 1
            record.settled = answer.entry.status.value
            record.outcome = f"settled-{answer.entry.status.value}"
            return
        record.settle_answers.append(f"error:{type(answer).__name__}")
        record.outcome = f"left-started: settlement not recorded ({_describe(answer)})"

    def _start_request(self, spec: EffectSpec, decision: GrantDecision) -> StartRequest:
        return StartRequest(
            effect_id=spec.effect_id, kind=EFFECT_KIND, idempotency_key=spec.key,
            fingerprint=fingerprint(EFFECT_KIND, spec.arguments()), principal=PRINCIPAL,
            session_id=spec.session_id, turn_id=f"t{spec.index}", call_id=f"c{spec.index}",
            authority=self._authority_snapshot(decision), grant=f"{spec.effect_id}/grant", cause=None,
        )

    def _permission_request(self, spec: EffectSpec, decision: GrantDecision) -> StartRequest:
        return StartRequest(
            effect_id=f"{spec.effect_id}/grant", kind=PERMISSION_KIND, idempotency_key=f"{spec.key}/grant",
            fingerprint=fingerprint(PERMISSION_KIND, {"effect": spec.effect_id, "allow": decision.allow,
                                                      "rule": decision.rule}),
            principal=PRINCIPAL, session_id=spec.session_id, turn_id=f"t{spec.index}",
            call_id=f"c{spec.index}", authority=self._authority_snapshot(decision), grant=None, cause=decision.reason,
        )


def _describe(value: Any) -> str:
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    return repr(value)


def is_permission(effect_id: str) -> bool:
    return effect_id.endswith("/grant")


__all__ = [
    "DENIED_HOST", "DRIVERS", "EFFECT_KIND", "PERMISSION_KIND", "REDECIDE_TRIES", "Driver", "DriverRecord",
    "EffectRecord", "EffectSpec", "Grant", "GrantDecision", "LeaseRecord", "SessionOwner", "Targets",
    "WorkloadConfig", "allow_all", "deny_every", "grant_rules", "is_permission", "session_id",
]
