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

Start, restart and terminate are kept apart (``_start``, ``_job_restart``, ``_terminate``), and
:class:`~.decisions.RestartWindow` is the only owner of the intensity policy.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import (
    AlreadyPresent,
    AlreadyStarted,
    ChildNotFound,
    ChildRestarting,
    ChildRunning,
    MaxChildren,
    NoSuchActor,
    OuroactorsError,
    SimpleOneForOneOnly,
    SpecError,
    StartFailed,
)
from . import reasons
from .children import Child, Children, ChildStatus
from .decisions import AfterExit, RestartWindow, after_exit, auto_shutdown_due, restart_group
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
    GenerationAnnounced,
    Input,
    Kill,
    NewGeneration,
    Reply,
    RequestStop,
    SendSelf,
    SetTimer,
    ShutdownRequested,
    Spawn,
    TimerFired,
    TryAgain,
)
from .specs import AutoShutdown, ChildSpec, RestartType, Strategy


@dataclass
class _WaitStart:
    key: str
    incarnation: int


@dataclass
class _WaitDown:
    """Children (key -> incarnation) still to go down; reasons collected so far."""

    pending: dict[str, int]
    token: int | None
    reasons: dict[str, ExitReason] = field(default_factory=dict)
    timed_out: bool = False


_Wait = _WaitStart | _WaitDown
Job = Generator[_Wait, Any, None]

GenerationSource = Callable[[int | None], int]


def _shutdown_ok(child: Child, why: ExitReason) -> bool:
    """OTP's ``shutdown/1`` verdict: False means a ``shutdown_error`` report.

    ``killed`` is expected only from brutal_kill (a kill after the timeout is an error), plain
    ``shutdown`` only from the polite request; a non-permanent child may also end ``normal`` or
    ``shutdown(info)``.
    """
    brutal = child.spec.shutdown_ms == 0
    if why.kind is ExitKind.KILLED:
        return brutal
    if why.kind is ExitKind.SHUTDOWN and why.info is None and not brutal:
        return True
    permanent = child.spec.restart is RestartType.PERMANENT
    return why.kind in (ExitKind.NORMAL, ExitKind.SHUTDOWN) and not permanent


class SupervisorCore:
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
            return (
                isinstance(event, ChildUp | ChildStartFailed)
                and event.key == wait.key
                and event.incarnation == wait.incarnation
            )
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
                self._absorb_deferred_downs(wait)
                if not wait.pending:
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
        return wait if not wait.pending else None

    def _absorb_deferred_downs(self, wait: _WaitDown) -> None:
        for event in list(self._deferred):
            if isinstance(event, ChildDown) and wait.pending.get(event.key) == event.incarnation:
                self._deferred.remove(event)
                del wait.pending[event.key]
                wait.reasons[event.key] = event.reason

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
                self._run(self._job_restart(child))
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
        result = yield _WaitStart(child.key, child.incarnation)
        if isinstance(result, ChildUp):
            child.status = ChildStatus.RUNNING
            child.pid = result.pid
            child.address = result.address
            self._emit("started", child, pid=child.pid)
            return None
        child.status = ChildStatus.UNDEFINED
        child.pid = child.address = None
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
        yield from self._restart_group(child, include_self=True)

    def _restart_group(self, child: Child, include_self: bool) -> Job:
        """Terminate the strategy's group newest first, then start it again in start order."""
        strategy = self.flags.strategy
        if strategy in (Strategy.ONE_FOR_ONE, Strategy.SIMPLE_ONE_FOR_ONE):
            if include_self:
                failure = yield from self._start(child)
                if failure is not None:
                    self._schedule_retry(child)
            return
        to_terminate, to_start = restart_group(strategy, self.children.keys_in_start_order(), child.key)
        victims = [c for c in (self.children.get(k) for k in reversed(to_terminate)) if c is not None]
        yield from self._terminate(victims)
        for victim in victims:
            if victim.is_temporary:
                self.children.remove(victim.key)  # temporary children are never restarted
        for key in to_start:
            peer = self.children.get(key)
            if peer is None or peer.status is ChildStatus.RUNNING:
                continue
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
        if self.flags.strategy in (Strategy.REST_FOR_ONE, Strategy.ONE_FOR_ALL):
            self._run(self._restart_group(child, include_self=False))

    # -- terminate --------------------------------------------------------------------------------

    def _terminate(self, children: list[Child], reason: ExitReason = reasons.SHUTDOWN) -> Job:
        """Terminate children one by one in the order given (callers pass newest first).

        A simple_one_for_one supervisor terminates all its children at once, as OTP does.
        """
        if self.simple:
            yield from self._terminate_batch(children, reason)
            return
        for child in children:
            yield from self._terminate_batch([child], reason)

    def _terminate_batch(self, children: list[Child], reason: ExitReason) -> Job:
        pending: dict[str, int] = {}
        longest: int | None = 0
        for child in children:
            if child.status is ChildStatus.RESTARTING:
                child.status = ChildStatus.UNDEFINED  # ends its retry loop
            if child.status is not ChildStatus.RUNNING:
                continue
            child.status = ChildStatus.TERMINATING
            pending[child.key] = child.incarnation
            ms = child.spec.shutdown_ms
            if ms == 0:
                self._out.append(Kill(child.key, child.incarnation))
            else:
                self._out.append(RequestStop(child.key, child.incarnation, reason))
                longest = None if ms is None or longest is None else max(longest, ms)
        if not pending:
            return
        token = None if not longest else self._timer(longest / 1000.0)
        wait = _WaitDown(dict(pending), token)
        yield wait
        if wait.timed_out:
            for key, incarnation in wait.pending.items():
                self._emit("shutdown_timeout", self.children.get(key))
                self._out.append(Kill(key, incarnation))
            yield wait
        for key, why in wait.reasons.items():
            gone = self.children.get(key)
            if gone is None:
                continue
            gone.status = ChildStatus.UNDEFINED
            gone.pid = gone.address = None
            gone.last_exit = why
            self._emit("terminated", gone, reason=why.to_json(), shutdown_error=not _shutdown_ok(gone, why))

    def _job_stop_all(self, reason: ExitReason) -> Job:
        yield from self._terminate(list(self.children.newest_first()))
        self.terminated = reason
        self._emit("supervisor_exit", reason=reason.to_json())
        self._out.append(ExitSelf(reason))

    def _timer(self, seconds: float) -> int:
        self._tokens += 1
        self._out.append(SetTimer(self._tokens, seconds))
        return self._tokens

    # -- admin API --------------------------------------------------------------------------------

    def _on_admin(self, req: AdminRequest) -> None:
        handler = getattr(self, f"_admin_{req.op}", None)
        if handler is None:
            self._out.append(Reply(req.token, OuroactorsError(f"unknown supervisor request {req.op!r}")))
            return
        handler(req)

    def _reply(self, req: AdminRequest, result: Any) -> None:
        self._out.append(Reply(req.token, result))

    def _admin_start_child(self, req: AdminRequest) -> None:
        if self.simple:
            assert self.template is not None
            limit = self.flags.max_children
            if limit is not None and len(self.children) >= limit:
                self._reply(req, MaxChildren(self.template.id, limit))
                return
            self._dynamic_seq += 1
            key = f"{self.template.id}#{self._dynamic_seq}"
            child = self._record(key, self.template, self.template.args + tuple(req.extra_args))
        else:
            spec = req.spec
            if spec is None:
                self._reply(req, OuroactorsError("start_child needs a child spec"))
                return
            if spec.significant and self.flags.auto_shutdown is AutoShutdown.NEVER:
                self._reply(req, SpecError([(spec.id, "significant child but auto_shutdown is 'never'")]))
                return
            existing = self.children.get(spec.id)
            if existing is not None:
                if existing.alive:
                    self._reply(req, AlreadyStarted(spec.id, existing.pid))
                else:
                    self._reply(req, AlreadyPresent(spec.id))
                return
            child = self._record(spec.id, spec, spec.args)
        self.children.add(child)
        self._run(self._job_start_child(req, child, forget_on_failure=True))

    def _job_start_child(self, req: AdminRequest, child: Child, forget_on_failure: bool) -> Job:
        failure = yield from self._start(child)
        if failure is None:
            self._reply(req, self.children.info(child))
            return
        if forget_on_failure:
            self.children.remove(child.key)
        self._reply(req, StartFailed(child.key, str(failure)))

    def _admin_terminate_child(self, req: AdminRequest) -> None:
        child = self.children.get(req.child_id or "")
        if child is None:
            self._reply(req, ChildNotFound(req.child_id))
            return
        self._run(self._job_terminate_child(req, child))

    def _job_terminate_child(self, req: AdminRequest, child: Child) -> Job:
        yield from self._terminate([child])
        if self.simple or child.is_temporary:
            self.children.remove(child.key)
        self._reply(req, "ok")

    def _admin_restart_child(self, req: AdminRequest) -> None:
        child = self._lookup_static(req)
        if child is None:
            return
        if child.status is ChildStatus.RESTARTING:
            self._reply(req, ChildRestarting(child.key))
        elif child.status is not ChildStatus.UNDEFINED:
            self._reply(req, ChildRunning(child.key))
        else:
            self._run(self._job_start_child(req, child, forget_on_failure=False))

    def _admin_delete_child(self, req: AdminRequest) -> None:
        child = self._lookup_static(req)
        if child is None:
            return
        if child.status is ChildStatus.RESTARTING:
            self._reply(req, ChildRestarting(child.key))
        elif child.status is not ChildStatus.UNDEFINED:
            self._reply(req, ChildRunning(child.key))
        else:
            self.children.remove(child.key)
            self._reply(req, "ok")

    def _lookup_static(self, req: AdminRequest) -> Child | None:
        if self.simple:
            self._reply(req, SimpleOneForOneOnly(req.child_id))
            return None
        child = self.children.get(req.child_id or "")
        if child is None:
            self._reply(req, ChildNotFound(req.child_id))
        return child

    def _admin_which_children(self, req: AdminRequest) -> None:
        """OTP order: newest first."""
        self._reply(req, [self.children.info(c) for c in self.children.newest_first()])

    def _admin_which_child(self, req: AdminRequest) -> None:
        child = self.children.get(req.child_id or "")
        self._reply(req, ChildNotFound(req.child_id) if child is None else self.children.info(child))

    def _admin_count_children(self, req: AdminRequest) -> None:
        counts = self.children.counts()
        if self.simple:
            counts["specs"] = 1  # OTP: the template is the one spec of a simple_one_for_one supervisor
        self._reply(req, counts)

    def _admin_get_childspec(self, req: AdminRequest) -> None:
        child = self.children.get(req.child_id or "")
        if child is None:
            self._reply(req, ChildNotFound(req.child_id))
        else:
            self._reply(req, child.spec.model_copy(update={"args": child.args, "id": child.key}))

    # -- events -----------------------------------------------------------------------------------

    def _emit(self, kind: str, child: Child | None = None, **fields: Any) -> None:
        if child is not None:
            fields.setdefault("generation", child.generation)
            fields.setdefault("incarnation", child.incarnation)
        self._out.append(Emit(kind, child.key if child is not None else None, fields))
