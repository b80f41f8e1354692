"""The synthetic driver's state and its transport: how it asks an authority from outside the tree.

:class:`DriverBase` is the base of :class:`~.workload.Driver` (whose lease and effect steps are
:mod:`._driver_leases` and :mod:`._driver_effects`). It holds what one driver keeps between
requests — the generation it is bound to per authority, its record, its lease-key secret — and
:meth:`~DriverBase._ask`, the one way it talks to the tree:

* every request is **stamped** with the generation the driver is bound to (looked up on first
  use); a ``StaleGeneration`` answer re-binds and asks again;
* an error after which nothing is known (:data:`TRANSIENT`: a crash, a timeout, a restart, a
  commit rejected or unknown) is asked again — requests are idempotent — until the request's
  deadline; a refusal is returned at once (asking again would not change it);
* each try is **one step** of the session's generator: a try that made no progress yields
  ``_WAIT``, so when every session waits the driver pauses and heals (see :meth:`~.workload.Driver.run`).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import httpx

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
from ..system.handle import ActorSystem
from ._asking import isolated
from .workload_config import Grant, GrantDecision, Targets, WorkloadConfig, allow_all, deny_every
from .workload_record import DriverRecord
from .world import WorldClient

# Errors after which nothing is known for sure: ask again (requests are idempotent).
TRANSIENT = (ActorCrashed, AskTimeout, ChildRestarting, CommitOutcomeUnknown, CommitRejected, NoSuchActor)

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


def _describe(value: Any) -> str:
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    return repr(value)


class DriverBase:
    """A driver's state and its requests (see the module doc); :class:`~.workload.Driver` plays the sessions."""

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

