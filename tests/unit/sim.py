"""A deterministic world for the pure supervisor core: no processes, a manual clock.

It plays every child's side of the protocol: a spawned child comes up (or fails, if the test
says so), a polite stop is honoured (unless the child is marked stubborn), a kill always works.
Tests drive it input by input and read the commands and events the core produced.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ouroactors.supervision import reasons
from ouroactors.supervision.machine import SupervisorCore
from ouroactors.supervision.signals import (
    Boot, BootDone, ChildDown, ChildStartFailed, ChildUp, Command, Emit, ExitSelf, Input, Kill,
    RequestStop, SendSelf, SetTimer, Spawn, TimerFired,
)
from ouroactors.supervision.specs import ChildSpec


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
    log: list[Command] = field(default_factory=list)
    running: dict[str, int] = field(default_factory=dict)  # key -> incarnation
    timers: dict[int, float] = field(default_factory=dict)
    queue: deque[Input] = field(default_factory=deque)
    exited: Any = None
    boot: Any = "pending"

    def __post_init__(self) -> None:
        self.core = SupervisorCore(self.spec, path="root", next_generation=counter_generations())

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
            if self.fail_starts.get(prefix, 0) > 0:
                self.fail_starts[prefix] -= 1
                self.queue.append(ChildStartFailed(cmd.key, cmd.incarnation, reasons.crash_of("E", "boom")))
            else:
                self.running[cmd.key] = cmd.incarnation
                self.queue.append(ChildUp(cmd.key, cmd.incarnation, 1000 + cmd.incarnation, f"addr-{cmd.key}"))
        elif isinstance(cmd, RequestStop):
            if cmd.key not in self.stubborn and not self.hold_stops:
                self.running.pop(cmd.key, None)
                self.queue.append(ChildDown(cmd.key, cmd.incarnation, cmd.reason))
        elif isinstance(cmd, Kill):
            self.running.pop(cmd.key, None)
            self.queue.append(ChildDown(cmd.key, cmd.incarnation, reasons.killed()))
        elif isinstance(cmd, SendSelf):
            self.queue.append(cmd.message)
        elif isinstance(cmd, SetTimer):
            self.timers[cmd.token] = self.now + cmd.seconds
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

    def advance(self, seconds: float) -> None:
        self.now += seconds
        for token, due in sorted(self.timers.items()):
            if due <= self.now:
                del self.timers[token]
                self.feed(TimerFired(token))

    def events(self, kind: str | None = None) -> list[Emit]:
        return [c for c in self.log if isinstance(c, Emit) and (kind is None or c.kind == kind)]

    def spawned(self) -> list[str]:
        return [c.key for c in self.log if isinstance(c, Spawn)]

    def stopped(self) -> list[str]:
        return [c.key for c in self.log if isinstance(c, RequestStop | Kill)]

    def clear(self) -> None:
        self.log.clear()
