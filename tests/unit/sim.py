"""A deterministic world for the pure supervisor core: no processes, a manual clock.

It plays every child's side of the protocol: a spawned child comes up (or fails, if the test
says so), a polite stop is honoured (unless the child is marked stubborn), a kill always works.
Tests drive it input by input and read the commands and events the core produced.

Three switches let a test interleave inputs by hand: ``hold_starts`` (spawns of these key
prefixes wait for :meth:`World.answer_start`), ``hold_stops`` (polite stops are not answered)
and ``hold_self`` (self-messages such as ``TryAgain`` wait in ``held`` for :meth:`World.release`).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ouroactors.supervision import reasons
from ouroactors.supervision.children import ChildInfo
from ouroactors.supervision.machine import SupervisorCore
from ouroactors.supervision.signals import (
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
    RequestStop,
    ScheduleSelf,
    SendSelf,
    SetTimer,
    ShutdownRequested,
    Spawn,
    TimerFired,
)
from ouroactors.supervision.specs import ChildSpec, supervisor, worker

ECHO = "ouroactors.examples.workers:Echo"


def wk(id: str, **fields: Any) -> ChildSpec:
    """A worker spec running the example Echo actor (validation imports it)."""
    return worker(id, ECHO, **fields)


def tree(*children: ChildSpec, **flags: Any) -> ChildSpec:
    """The root supervisor spec with these children and flags."""
    return supervisor("root", list(children), **flags)


def counter_generations() -> Any:
    state = {"n": 0}

    def next_generation(previous: int | None) -> int:
        state["n"] += 1
        return state["n"]

    return next_generation


@dataclass
class World:
    spec: ChildSpec
    now: float = 0.0
    fail_starts: dict[str, int] = field(default_factory=dict)  # key prefix -> failures left
    stubborn: set[str] = field(default_factory=set)  # ignore polite stop
    hold_stops: bool = False  # do not answer stops at all (test answers by hand)
    hold_starts: set[str] = field(default_factory=set)  # key prefixes whose spawns wait for answer_start
    hold_self: bool = False  # keep SendSelf messages in `held` until release()
    inherited: tuple[AuthorityEntry, ...] = ()
    generations: Any = None  # the core's generation source; a counter from 1 if None
    log: list[Command] = field(default_factory=list)
    running: dict[str, int] = field(default_factory=dict)  # key -> incarnation
    starting: dict[str, int] = field(default_factory=dict)  # held spawns: key -> incarnation
    timers: dict[int, float] = field(default_factory=dict)
    drop_kills: bool = False  # a kill's exit notice never arrives (thespian dropped it)
    auto_adopt: bool = True  # children adopt a new generation at once
    scheduled: list[tuple[float, Any]] = field(default_factory=list)  # (due, message) from ScheduleSelf
    queue: deque[Input] = field(default_factory=deque)
    held: list[Input] = field(default_factory=list)
    exited: Any = None
    boot: Any = "pending"

    def __post_init__(self) -> None:
        self.core = SupervisorCore(
            self.spec, path="root", next_generation=self.generations or counter_generations(),
            inherited=self.inherited,
        )
        self._tokens = 0

    def start(self) -> World:
        self.feed(Boot())
        return self

    def feed(self, event: Input) -> list[Command]:
        produced: list[Command] = []
        self.queue.append(event)
        while self.queue:
            cmds = self.core.handle(self.queue.popleft(), self.now)
            produced.extend(cmds)
            for cmd in cmds:
                self._carry_out(cmd)
        return produced

    def _carry_out(self, cmd: Command) -> None:
        self.log.append(cmd)
        if isinstance(cmd, Spawn):
            prefix = cmd.key.split("#")[0]
            if prefix in self.hold_starts:
                self.starting[cmd.key] = cmd.incarnation
            elif self.fail_starts.get(prefix, 0) > 0:
                self.fail_starts[prefix] -= 1
                self.queue.append(ChildStartFailed(cmd.key, cmd.incarnation, reasons.crash_of("E", "boom")))
            else:
                self.running[cmd.key] = cmd.incarnation
                up = ChildUp(cmd.key, cmd.incarnation, 1000 + cmd.incarnation, f"addr-{cmd.key}")
                self.queue.append(up)
        elif isinstance(cmd, RequestStop):
            if cmd.key not in self.stubborn and not self.hold_stops:
                self.running.pop(cmd.key, None)
                self.queue.append(ChildDown(cmd.key, cmd.incarnation, cmd.reason))
        elif isinstance(cmd, Kill):
            self.running.pop(cmd.key, None)
            if not self.drop_kills:
                self.queue.append(ChildDown(cmd.key, cmd.incarnation, reasons.killed()))
        elif isinstance(cmd, SendSelf):
            if self.hold_self:
                self.held.append(cmd.message)
            else:
                self.queue.append(cmd.message)
        elif isinstance(cmd, SetTimer):
            self.timers[cmd.token] = self.now + cmd.seconds
        elif isinstance(cmd, NewGeneration) and self.auto_adopt:
            self.queue.append(GenerationAdopted(cmd.key, cmd.incarnation, cmd.generation))
        elif isinstance(cmd, ScheduleSelf):
            self.scheduled.append((self.now + cmd.seconds, cmd.message))
        elif isinstance(cmd, ExitSelf):
            self.exited = cmd.reason
        elif isinstance(cmd, BootDone):
            self.boot = cmd.failure

    # -- test helpers -------------------------------------------------------------------------

    def crash(self, key: str, reason: Any = None) -> list[Command]:
        inc = self.running.pop(key)
        return self.feed(ChildDown(key, inc, reason or reasons.crash_of("RuntimeError", "bang")))

    def exit(self, key: str, reason: Any) -> list[Command]:
        inc = self.running.pop(key)
        return self.feed(ChildDown(key, inc, reason))

    def answer_start(self, key: str, ok: bool = True) -> list[Command]:
        """Answer a held spawn: the child comes up, or its start fails."""
        inc = self.starting.pop(key)
        if ok:
            self.running[key] = inc
            return self.feed(ChildUp(key, inc, 1000 + inc, f"addr-{key}"))
        return self.feed(ChildStartFailed(key, inc, reasons.crash_of("E", "held start failed")))

    def release(self) -> list[Command]:
        """Deliver the held self-messages, oldest first."""
        produced: list[Command] = []
        while self.held:
            produced.extend(self.feed(self.held.pop(0)))
        return produced

    def announce(self, key: str, cause: str = "reload") -> list[Command]:
        return self.feed(GenerationAnnounced(key, self.running[key], cause))

    def shutdown(self, reason: Any = None) -> list[Command]:
        return self.feed(ShutdownRequested(reason or reasons.shutdown()))

    def admin(self, op: str, child_id: str | None = None, spec: ChildSpec | None = None,
              extra_args: tuple[Any, ...] = ()) -> Any:
        """Send one admin request; return its reply's result, or ``"pending"`` if not answered yet."""
        self._tokens += 1
        token = self._tokens
        produced = self.feed(AdminRequest(token, op, child_id, spec, tuple(extra_args)))
        for cmd in produced:
            if isinstance(cmd, Reply) and cmd.token == token:
                return cmd.result
        return "pending"

    def reply(self, token: int) -> Any:
        for cmd in self.log:
            if isinstance(cmd, Reply) and cmd.token == token:
                return cmd.result
        return "pending"

    def which(self) -> list[ChildInfo]:
        return self.admin("which_children")  # type: ignore[no-any-return]

    def status(self) -> dict[str, str]:
        """Core's view: key -> status, in start order."""
        return {c.key: c.status.value for c in self.core.children.in_start_order()}

    def advance(self, seconds: float) -> None:
        self.now += seconds
        for token, due in sorted(self.timers.items()):
            if due <= self.now:
                del self.timers[token]
                self.feed(TimerFired(token))
        due_now = sorted((item for item in self.scheduled if item[0] <= self.now), key=lambda item: item[0])
        self.scheduled = [item for item in self.scheduled if item[0] > self.now]
        for _, message in due_now:
            self.feed(message)

    def events(self, kind: str | None = None) -> list[Emit]:
        return [c for c in self.log if isinstance(c, Emit) and (kind is None or c.kind == kind)]

    def kinds(self) -> list[str]:
        return [c.kind for c in self.log if isinstance(c, Emit)]

    def spawns(self) -> list[Spawn]:
        return [c for c in self.log if isinstance(c, Spawn)]

    def spawned(self) -> list[str]:
        return [c.key for c in self.log if isinstance(c, Spawn)]

    def stopped(self) -> list[str]:
        return [c.key for c in self.log if isinstance(c, RequestStop | Kill)]

    def killed(self) -> list[str]:
        return [c.key for c in self.log if isinstance(c, Kill)]

    def new_generations(self) -> list[NewGeneration]:
        return [c for c in self.log if isinstance(c, NewGeneration)]

    def touched(self) -> list[str]:
        """Keys the core spawned or stopped, in order."""
        return [c.key for c in self.log if isinstance(c, Spawn | RequestStop | Kill)]

    def clear(self) -> None:
        self.log.clear()


def booted(*children: ChildSpec, **flags: Any) -> World:
    """A world whose supervisor has booted ``children`` under ``flags``; the log is cleared."""
    world = World(tree(*children, **flags)).start()
    assert world.boot is None, world.boot
    world.clear()
    return world
