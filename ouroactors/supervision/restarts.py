"""Restarting children, as OTP's ``do_restart`` and ``restart``: after an exit, and after a generation change.

Mixed into :class:`~.machine.SupervisorCore`: the restart sequence kept apart from start (``_start`` in
:mod:`.machine`) and terminate (:mod:`.termination`). What an exit means is decided by the tables in
:mod:`.decisions` (``after_exit``, ``restart_group``, ``auto_shutdown_due``, the backoff); the
:class:`~.decisions.RestartWindow` alone owns the intensity policy. A restart that would exceed it
escalates: the supervisor stops all its children and exits.

A generation change of an authority child restarts its consumers (rest_for_one and one_for_all) only after
the authority has adopted the new number (:class:`_WaitAdopted`).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import reasons
from .children import Child, Children, ChildStatus
from .decisions import (
    AfterExit,
    RestartWindow,
    after_exit,
    auto_shutdown_due,
    backoff_delay,
    backoff_reset_after,
    restart_group,
)
from .signals import (
    ChildDown,
    Command,
    GenerationAnnounced,
    Input,
    NewGeneration,
    ScheduleSelf,
    SendSelf,
    TryAgain,
)
from .specs import Strategy, SupervisorFlags

if TYPE_CHECKING:
    from .reasons import ExitReason

Job = Generator[Any, Any, None]


@dataclass
class _WaitAdopted:
    """A generation change: consumers restart only after the authority adopted the new number."""

    key: str
    incarnation: int


class Restarts:
    """The restart jobs; the state they touch belongs to :class:`~.machine.SupervisorCore`."""

    simple: bool
    flags: SupervisorFlags
    children: Children
    window: RestartWindow
    _out: list[Command]
    _now: float
    _deferred: deque[Input]
    _random: random.Random
    _next_generation: Callable[[int | None], int]

    if TYPE_CHECKING:

        def _run(self, job: Job) -> None: ...
        def _start(self, child: Child) -> Generator[Any, Any, ExitReason | None]: ...
        def _terminate(self, children: list[Child], reason: ExitReason = ...) -> Job: ...
        def _job_stop_all(self, reason: ExitReason) -> Job: ...
        def _emit(self, kind: str, child: Child | None = None, **fields: Any) -> None: ...

    def _on_down(self, event: ChildDown) -> None:
        child = self.children.get(event.key)
        if child is None or child.incarnation != event.incarnation or child.status is not ChildStatus.RUNNING:
            return  # an exit from an unknown or earlier incarnation
        child.status = ChildStatus.UNDEFINED
        child.pid = child.address = None
        child.last_exit = event.reason
        self._emit("exited", child, reason=event.reason.to_json())
        decision = after_exit(child.spec.restart, event.reason)
        if decision is AfterExit.RESTART:
            self._run(self._job_restart(child))
            return
        if decision is AfterExit.DELETE or self.simple:
            self.children.remove(child.key)
        # OTP's children_any skips only children with pid = undefined: a restarting one is present.
        still = any(
            c.spec.significant and c.status is not ChildStatus.UNDEFINED
            for c in self.children.in_start_order()
        )
        if auto_shutdown_due(self.flags.auto_shutdown, child.spec.significant, still):
            self._emit("auto_shutdown", child, policy=self.flags.auto_shutdown.value)
            self._run(self._job_stop_all(reasons.shutdown("auto_shutdown")))

    def _job_restart(self, child: Child) -> Job:
        if not self.window.add(self._now):
            self._emit(
                "escalated", child, intensity=self.flags.intensity, period=self.flags.period,
                reason="reached_max_restart_intensity",
            )
            if child.status is ChildStatus.RESTARTING:
                child.status = ChildStatus.UNDEFINED
            yield from self._job_stop_all(reasons.shutdown("reached_max_restart_intensity"))
            return
        child.restarts += 1
        self._emit("restarting", child, restarts=child.restarts, strategy=self.flags.strategy.value)
        delay = self._backoff_for(child)
        if delay > 0:
            # Consumers must not run without their authority: stop the group now, start it later.
            yield from self._terminate_group(child)
            for peer in self._group_peers(child):
                peer.waits_for = child.key  # an ask meanwhile is told it waits for this restart (ChildRestarting)
            child.status = ChildStatus.RESTARTING
            child.retry_tag += 1
            child.due_at = self._now + delay
            self._emit("restart_scheduled", child, due_in=round(delay, 6), attempt=child.backoff_count)
            self._out.append(ScheduleSelf(TryAgain(child.key, child.retry_tag, counted=False), delay))
            return
        yield from self._restart_group(child, include_self=True)

    def _group_peers(self, child: Child) -> list[Child]:
        """The siblings the strategy starts again with ``child`` (not ``child`` itself)."""
        if self.flags.strategy in (Strategy.ONE_FOR_ONE, Strategy.SIMPLE_ONE_FOR_ONE):
            return []
        _, to_start = restart_group(self.flags.strategy, self.children.keys_in_start_order(), child.key)
        return [peer for key in to_start if key != child.key and (peer := self.children.get(key)) is not None]

    def _backoff_for(self, child: Child) -> float:
        """The delay before this restart (0 without a backoff spec); see decisions.backoff_delay."""
        backoff = child.spec.backoff
        if backoff is None:
            return 0.0
        ran_for = self._now - child.started_at if child.started_at is not None else 0.0
        if ran_for >= backoff_reset_after(backoff):
            child.backoff_count = 0
        delay = backoff_delay(backoff, child.backoff_count, self._random.random())
        child.backoff_count += 1
        return delay

    def _restart_group(self, child: Child, include_self: bool) -> Job:
        """Terminate the strategy's group newest first, then start it again in start order."""
        yield from self._terminate_group(child)
        yield from self._start_group(child, include_self)

    def _terminate_group(self, child: Child) -> Job:
        """Terminate the siblings the strategy restarts with ``child``, newest first."""
        if self.flags.strategy in (Strategy.ONE_FOR_ONE, Strategy.SIMPLE_ONE_FOR_ONE):
            return
        to_terminate, _ = restart_group(self.flags.strategy, self.children.keys_in_start_order(), child.key)
        victims = [c for c in (self.children.get(k) for k in reversed(to_terminate)) if c is not None]
        yield from self._terminate(victims)
        for victim in victims:
            if victim.is_temporary:
                self.children.remove(victim.key)  # temporary children are never restarted

    def _start_group(self, child: Child, include_self: bool) -> Job:
        """Start ``child`` (if asked) and the siblings the strategy restarts with it, in start order."""
        if self.flags.strategy in (Strategy.ONE_FOR_ONE, Strategy.SIMPLE_ONE_FOR_ONE):
            if include_self:
                failure = yield from self._start(child)
                if failure is not None:
                    self._schedule_retry(child)
            return
        _, to_start = restart_group(self.flags.strategy, self.children.keys_in_start_order(), child.key)
        for key in to_start:
            peer = self.children.get(key)
            if peer is None or peer.status is ChildStatus.RUNNING:
                continue
            if key != child.key:
                peer.restarts += 1  # restarted with the group (or after an authority): a restart of its own too
            failure = yield from self._start(peer)
            if failure is not None:
                self._schedule_retry(peer)
                return

    def _schedule_retry(self, child: Child) -> None:
        child.status = ChildStatus.RESTARTING
        child.retry_tag += 1
        self._emit("restart_failed", child, reason=child.last_exit.to_json() if child.last_exit else None)
        self._out.append(SendSelf(TryAgain(child.key, child.retry_tag)))

    def _on_generation(self, event: GenerationAnnounced) -> None:
        child = self.children.get(event.key)
        if child is None or child.incarnation != event.incarnation or child.status is not ChildStatus.RUNNING:
            return
        old = child.generation
        child.generation = self._next_generation(child.generation)
        self._out.append(NewGeneration(child.key, child.incarnation, child.generation))
        self._emit("generation_changed", child, previous=old, cause=event.cause)
        self._run(self._job_generation(child))

    def _job_generation(self, child: Child) -> Job:
        reply = yield _WaitAdopted(child.key, child.incarnation)
        if isinstance(reply, ChildDown):
            self._deferred.appendleft(reply)  # it died instead: handle that as the next input
            return
        if self.flags.strategy in (Strategy.REST_FOR_ONE, Strategy.ONE_FOR_ALL):
            yield from self._restart_group(child, include_self=False)
