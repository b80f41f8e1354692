"""The supervisor as a pure state machine: OTP's ``supervisor.erl`` without processes.

:class:`SupervisorCore` takes one input at a time (see :mod:`.signals`) and returns the commands
its shell must carry out. It never blocks and never touches thespian, so every OTP rule is tested
here with a deterministic clock and no processes.

OTP's supervisor is a gen_server whose start and terminate sequences are *synchronous*: while it
starts child 3 or waits for child 5 to die, every other message waits in its mailbox. We keep that
exact behaviour with **jobs**: a job is a generator that yields what it waits for (a child to come
up, children to go down, a timer); inputs the current job does not wait for are deferred in
arrival order and handled when it finishes — the mailbox order OTP would see. A job waiting for a
child to go down first looks in the deferred inputs, because the child may have died on its own
before we asked (OTP's monitor sees that as an immediate ``'DOWN'``).

Start, restart and terminate are kept apart (``_start``, ``_job_restart``, and ``_terminate`` in
:mod:`.termination`), and :class:`~.decisions.RestartWindow` is the only owner of the intensity
policy.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from ..core.errors import NoSuchActor
from . import reasons
from .admin import AdminApi
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
from .reasons import ExitKind, ExitReason
from .signals import (
    AdminRequest,
    AuthorityEntry,
    Boot,
    BootDone,
    ChildDown,
    ChildStartFailed,
    ChildUp,
    Command,
    Emit,
    ExitSelf,
    GenerationAdopted,
    GenerationAnnounced,
    Input,
    Kill,
    NewGeneration,
    Reply,
    ScheduleSelf,
    SendSelf,
    SetTimer,
    ShutdownRequested,
    Spawn,
    TimerFired,
    TryAgain,
)
from .specs import ChildSpec, Strategy
from .termination import Termination, _WaitDown


@dataclass
class _WaitStart:
    key: str
    incarnation: int
    token: int | None = None  # a start timeout, if the spec has one


@dataclass
class _WaitAdopted:
    """A generation change: consumers restart only after the authority adopted the new number."""

    key: str
    incarnation: int


_Wait = _WaitStart | _WaitDown | _WaitAdopted
Job = Generator[_Wait, Any, None]

GenerationSource = Callable[[int | None], int]


class SupervisorCore(AdminApi, Termination):
    """One supervisor's decisions. Feed inputs to :meth:`handle`; carry out what it returns."""

    def __init__(
        self,
        spec: ChildSpec,
        *,
        path: str,
        next_generation: GenerationSource,
        inherited: tuple[AuthorityEntry, ...] = (),
    ) -> None:
        self.spec = spec
        self.flags = spec.flags
        self.path = path
        self.inherited = inherited
        self.simple = self.flags.strategy is Strategy.SIMPLE_ONE_FOR_ONE
        self.children = Children()
        self.template: ChildSpec | None = None
        if self.simple:
            self.template = (spec.children or ())[0]
        else:
            for child_spec in spec.children or ():
                self.children.add(self._record(child_spec.id, child_spec, child_spec.args))
        self.window = RestartWindow(self.flags.intensity, self.flags.period)
        self.terminated: ExitReason | None = None
        self._next_generation = next_generation
        self._job: Job | None = None
        self._wait: _Wait | None = None
        self._deferred: deque[Input] = deque()
        self._out: list[Command] = []
        self._now = 0.0
        self._incarnations = 0
        self._tokens = 0
        self._dynamic_seq = 0
        self._random = random.Random(path)  # backoff jitter: deterministic per supervisor path

    # -- driver ---------------------------------------------------------------------------------

    def handle(self, event: Input, now: float) -> list[Command]:
        """Process one input at monotonic time ``now`` (seconds); return the commands to run."""
        self._now = now
        self._out = []
        if self._job is not None:
            if self._wanted(event):
                self._resume(event)
            else:
                self._deferred.append(event)
        else:
            self._dispatch(event)
        while self._job is None and self._deferred:
            self._dispatch(self._deferred.popleft())
        return self._out

    @property
    def busy(self) -> bool:
        return self._job is not None

    def _wanted(self, event: Input) -> bool:
        wait = self._wait
        if isinstance(wait, _WaitStart):
            if isinstance(event, TimerFired):
                return wait.token is not None and event.token == wait.token
            return (
                isinstance(event, ChildUp | ChildStartFailed)
                and event.key == wait.key
                and event.incarnation == wait.incarnation
            )
        if isinstance(wait, _WaitAdopted):
            return isinstance(event, GenerationAdopted | ChildDown) and (event.key, event.incarnation) == (
                wait.key, wait.incarnation)
        if isinstance(wait, _WaitDown):
            if isinstance(event, TimerFired):
                return wait.token is not None and event.token == wait.token
            return isinstance(event, ChildDown) and wait.pending.get(event.key) == event.incarnation
        return False

    def _run(self, job: Job) -> None:
        self._job = job
        self._resume(None)

    def _resume(self, event: Any) -> None:
        value: Any = event
        while True:
            if isinstance(self._wait, _WaitDown) and event is not None:
                value = self._note_down(self._wait, event)
                if value is None:
                    return  # still waiting for more children
            assert self._job is not None
            try:
                wait = self._job.send(value)
            except StopIteration:
                self._job = None
                self._wait = None
                return
            self._wait = wait
            event = None
            if isinstance(wait, _WaitDown):
                absorbed = self._absorb_deferred_downs(wait)
                if not wait.pending or (wait.any_of and absorbed):
                    value = wait
                    continue
            return

    def _note_down(self, wait: _WaitDown, event: Any) -> _WaitDown | None:
        if isinstance(event, TimerFired):
            wait.timed_out = True
            wait.token = None
            return wait
        assert isinstance(event, ChildDown)
        del wait.pending[event.key]
        wait.reasons[event.key] = event.reason
        return wait if not wait.pending or wait.any_of else None

    def _absorb_deferred_downs(self, wait: _WaitDown) -> int:
        absorbed = 0
        for event in list(self._deferred):
            if isinstance(event, ChildDown) and wait.pending.get(event.key) == event.incarnation:
                self._deferred.remove(event)
                del wait.pending[event.key]
                wait.reasons[event.key] = event.reason
                absorbed += 1
        return absorbed

    def _dispatch(self, event: Input) -> None:
        if self.terminated is not None:
            if isinstance(event, AdminRequest):
                self._out.append(Reply(event.token, NoSuchActor(f"supervisor {self.path} has terminated")))
            return
        if isinstance(event, Boot):
            self._run(self._job_boot())
        elif isinstance(event, ChildDown):
            self._on_down(event)
        elif isinstance(event, TryAgain):
            child = self.children.get(event.key)
            if child is not None and child.status is ChildStatus.RESTARTING and child.retry_tag == event.tag:
                child.due_at = None
                self._run(self._job_restart(child) if event.counted else self._start_group(child, True))
        elif isinstance(event, GenerationAnnounced):
            self._on_generation(event)
        elif isinstance(event, ShutdownRequested):
            self._emit("shutdown_requested", reason=event.reason.to_json())
            self._run(self._job_stop_all(event.reason))
        elif isinstance(event, AdminRequest):
            self._on_admin(event)
        # ChildUp / ChildStartFailed / TimerFired nobody waits for are stale: ignore them.

    # -- start ------------------------------------------------------------------------------------

    def _record(self, key: str, spec: ChildSpec, args: tuple[Any, ...]) -> Child:
        return Child(key=key, spec=spec, args=tuple(args), kwargs=dict(spec.kwargs))

    def _snapshot_for(self, child: Child) -> tuple[AuthorityEntry, ...]:
        """Ancestors' authorities, then every running earlier sibling (nearer names win)."""
        entries = {entry.name: entry for entry in self.inherited}
        if not self.simple:
            for sibling in self.children.before(child.key):
                if sibling.status is ChildStatus.RUNNING and sibling.generation is not None:
                    entries[sibling.key] = AuthorityEntry(
                        sibling.key, f"{self.path}/{sibling.key}", sibling.address, sibling.generation
                    )
        return tuple(entries.values())

    def _start(self, child: Child) -> Generator[_Wait, Any, ExitReason | None]:
        """Start one child; return None when it is up, or the reason its start failed."""
        self._incarnations += 1
        child.incarnation = self._incarnations
        child.generation = self._next_generation(child.generation)
        child.status = ChildStatus.STARTING
        self._out.append(
            Spawn(child.key, child.incarnation, child.generation, child.spec, child.args, child.kwargs,
                  self._snapshot_for(child))
        )
        timeout = child.spec.start_timeout_s
        token = self._timer(timeout) if timeout is not None else None
        result = yield _WaitStart(child.key, child.incarnation, token)
        if isinstance(result, TimerFired):
            # It never said it started (e.g. its node vanished mid-create): end it, count as failed.
            self._out.append(Kill(child.key, child.incarnation))
            result = ChildStartFailed(child.key, child.incarnation, reasons.killed(f"start timed out after {timeout}s"))
        if isinstance(result, ChildUp):
            child.started_at = self._now
            child.status = ChildStatus.RUNNING
            child.pid = result.pid
            child.node = result.node
            child.address = result.address
            self._emit("started", child, pid=child.pid)
            return None
        child.status = ChildStatus.UNDEFINED
        child.pid = child.address = None
        child.started_at = None  # a start that failed never "ran long enough" to reset a backoff
        if result.reason.kind is ExitKind.IGNORE:  # OTP's ignore: not started, not a failure; the spec stays
            self._emit("start_ignored", child)
            return None
        child.last_exit = result.reason
        self._emit("start_failed", child, reason=result.reason.to_json())
        return result.reason

    def _job_boot(self) -> Job:
        started: list[Child] = []
        for child in list(self.children.in_start_order()):
            failure = yield from self._start(child)
            if failure is not None:
                yield from self._terminate(list(reversed(started)))
                reason = reasons.shutdown(f"failed_to_start_child {child.key}: {failure}")
                self.terminated = reason
                self._emit("supervisor_start_failed", reason=reason.to_json())
                self._out.append(BootDone(reason))
                return
            started.append(child)
        self._emit("supervisor_started")
        self._out.append(BootDone(None))

    # -- restart ----------------------------------------------------------------------------------

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
            child.status = ChildStatus.RESTARTING
            child.retry_tag += 1
            child.due_at = self._now + delay
            self._emit("restart_scheduled", child, due_in=round(delay, 6), attempt=child.backoff_count)
            self._out.append(ScheduleSelf(TryAgain(child.key, child.retry_tag, counted=False), delay))
            return
        yield from self._restart_group(child, include_self=True)

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

    # -- terminate (the batches are in .termination) ------------------------------------------------

    def _job_stop_all(self, reason: ExitReason) -> Job:
        yield from self._terminate(list(self.children.newest_first()))
        self.terminated = reason
        self._emit("supervisor_exit", reason=reason.to_json())
        self._out.append(ExitSelf(reason))

    def _timer(self, seconds: float) -> int:
        self._tokens += 1
        self._out.append(SetTimer(self._tokens, seconds))
        return self._tokens

    # -- events -----------------------------------------------------------------------------------

    def _emit(self, kind: str, child: Child | None = None, **fields: Any) -> None:
        if child is not None:
            fields.setdefault("generation", child.generation)
            fields.setdefault("incarnation", child.incarnation)
        self._out.append(Emit(kind, child.key if child is not None else None, fields))
