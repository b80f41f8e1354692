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

Start, restart and terminate are kept apart (``_start`` here, ``_job_restart`` in :mod:`.restarts`,
``_terminate`` in :mod:`.termination`), and :class:`~.decisions.RestartWindow` is the only owner of
the intensity policy. The admin API (OTP's ``handle_call`` clauses) is in :mod:`.admin`.
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
from .decisions import RestartWindow
from .reasons import ExitKind, ExitReason
from .restarts import Restarts, _WaitAdopted
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
    Reply,
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


_Wait = _WaitStart | _WaitDown | _WaitAdopted
Job = Generator[_Wait, Any, None]

GenerationSource = Callable[[int | None], int]


class SupervisorCore(AdminApi, Restarts, Termination):
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
        first = child.generation is None  # never started before
        child.generation = self._next_generation(child.generation)
        child.status = ChildStatus.STARTING
        self._out.append(
            Spawn(child.key, child.incarnation, child.generation, child.spec, child.args, child.kwargs,
                  self._snapshot_for(child), first)
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

    # -- terminate (the batches are in .termination; restart is in .restarts) ---------------------

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
