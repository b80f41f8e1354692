"""Actors used by the benchmarks. Importable by module path: thespian forks and imports them.

Raw actors are plain :class:`thespian.actors.Actor` subclasses (the baselines); supervised ones
are :class:`ouroactors.Worker` subclasses started by a supervisor.

Thespian addresses are unhashable; children are keyed by ``str(address)`` as seen *after* the
child answered (the form ``ChildActorExited.childAddress`` also has), with an ``==`` fallback.
"""

from __future__ import annotations

import os
import time
from collections import deque
from typing import Any

from thespian.actors import Actor, ActorExitRequest, ChildActorExited

from ouroactors import Worker

# -- raw thespian ---------------------------------------------------------------------------------


class RawEcho(Actor):  # type: ignore[misc]
    """Answers every message with itself; ``"pid"`` / ``"pgid"`` answer the process's ids."""

    def receiveMessage(self, message: Any, sender: Any) -> None:
        if isinstance(message, ActorExitRequest | ChildActorExited):
            return
        if message == "pid":
            self.send(sender, os.getpid())
        elif message == "pgid":
            self.send(sender, os.getpgid(0))
        else:
            self.send(sender, message)


class RawParent(Actor):  # type: ignore[misc]
    """A hand-written parent: creates and stops RawEcho children, records child exits.

    Requests (all answered when the job is done):

    * ``("spawn", n)``: create ``n`` children one after the other, each answering before the next
      is created (the semantics of a supervisor's ``start_child``). Answer ``("done", t0, t1, pid)``.
    * ``("stop_all",)``: ``ActorExitRequest`` to every child at once, answer when all exited.
    * ``("rest_for_one",)``: what a hand-written rest_for_one restart does: stop the first
      child, then the others newest first, one at a time, then create them all again in order.
    * ``("wait_exit", n)``: answer the ``time.time_ns()`` at which the n-th (deduplicated)
      ``ChildActorExited`` arrived, as soon as it has.
    """

    def __init__(self) -> None:
        super().__init__()
        self.alive: dict[str, tuple[Any, int]] = {}
        self.order: list[str] = []
        self.exits: list[int] = []
        self.exit_waiter: tuple[Any, int] | None = None
        self.ops: deque[tuple[Any, ...]] = deque()
        self.waiting: tuple[Any, ...] | None = None
        self.job_sender: Any = None
        self.job_start = 0
        self.last_pid = 0

    def receiveMessage(self, message: Any, sender: Any) -> None:
        if isinstance(message, ChildActorExited):
            self._exited(message.childAddress, time.time_ns())
        elif isinstance(message, ActorExitRequest):
            return
        elif isinstance(message, int):  # a child's answer to "pid"
            self._child_up(sender, message)
        elif isinstance(message, tuple) and message and message[0] == "wait_exit":
            self.exit_waiter = (sender, message[1])
            self._check_exit_waiter()
        elif isinstance(message, tuple) and message:
            self._job(message, sender)

    # -- jobs: a queue of steps, each may wait for one child event --------------------------------

    def _job(self, request: tuple[Any, ...], sender: Any) -> None:
        self.job_sender = sender
        self.job_start = time.time_ns()
        kind = request[0]
        if kind == "spawn":
            self.ops.extend([("create",)] * int(request[1]))
        elif kind == "stop_all":
            self.ops.append(("stop_all",))
        elif kind == "rest_for_one":
            count = len(self.order)
            self.ops.extend(("stop", key) for key in [self.order[0], *reversed(self.order[1:])])
            self.ops.extend([("create",)] * count)
        self.ops.append(("done",))
        self._next()

    def _next(self) -> None:
        while self.ops and self.waiting is None:
            op = self.ops.popleft()
            if op[0] == "create":
                child = self.createActor(RawEcho)
                self.send(child, "pid")
                self.waiting = ("up",)
            elif op[0] == "stop":
                entry = self.alive.get(op[1])
                if entry is not None:
                    self.send(entry[0], ActorExitRequest())
                    self.waiting = ("exit", op[1])
            elif op[0] == "stop_all":
                for address, _ in self.alive.values():
                    self.send(address, ActorExitRequest())
                if self.alive:
                    self.waiting = ("all",)
            elif op[0] == "done":
                self.send(self.job_sender, ("done", self.job_start, time.time_ns(), self.last_pid))

    def _child_up(self, sender: Any, pid: int) -> None:
        key = str(sender)
        self.alive[key] = (sender, pid)
        self.order.append(key)
        self.last_pid = pid
        if self.waiting == ("up",):
            self.waiting = None
            self._next()

    def _exited(self, address: Any, when: int) -> None:
        key = str(address)
        if key not in self.alive:
            key = next((k for k, (a, _) in self.alive.items() if a == address), "")
            if not key:
                return  # a duplicate ChildActorExited (thespian may send two), or not ours
        del self.alive[key]
        if key in self.order:
            self.order.remove(key)
        self.exits.append(when)
        self._check_exit_waiter()
        if self.waiting == ("exit", key) or (self.waiting == ("all",) and not self.alive):
            self.waiting = None
            self._next()

    def _check_exit_waiter(self) -> None:
        if self.exit_waiter is not None and len(self.exits) >= self.exit_waiter[1]:
            waiter, count = self.exit_waiter
            self.exit_waiter = None
            self.send(waiter, self.exits[count - 1])


class RawSink(Actor):  # type: ignore[misc]
    """Counts what it receives: an int counts 1, a list counts its length."""

    count = 0

    def receiveMessage(self, message: Any, sender: Any) -> None:
        if isinstance(message, int):
            self.count += 1
        elif isinstance(message, list):
            self.count += len(message)
        elif message == "reset":
            self.count = 0
        elif message == "count":
            self.send(sender, ("count", self.count))
        elif message == "pid":
            self.send(sender, os.getpid())


class RawPusher(Actor):  # type: ignore[misc]
    """``("push", sink, n, batch)``: tell ``n`` messages to ``sink`` (``batch`` per tell), then ask
    the sink for its count and answer it."""

    waiter: Any = None

    def receiveMessage(self, message: Any, sender: Any) -> None:
        if message == "pid":
            self.send(sender, os.getpid())
        if not isinstance(message, tuple) or not message:
            return
        if message[0] == "push":
            _, sink, total, batch = message
            self.waiter = sender
            push(self.send, sink, total, batch)
            self.send(sink, "count")
        elif message[0] == "count" and self.waiter is not None:
            self.send(self.waiter, message[1])
            self.waiter = None


def push(send: Any, target: Any, total: int, batch: int) -> None:
    """Tell ``total`` small messages to ``target``: one per tell, or lists of ``batch``."""
    send(target, "reset")
    if batch <= 1:
        for i in range(total):
            send(target, i)
        return
    for start in range(0, total, batch):
        send(target, list(range(start, min(start + batch, total))))


# -- supervised (ouroactors workers) ---------------------------------------------------------------


class SinkWorker(Worker):
    """The supervised :class:`RawSink`."""

    def on_start(self) -> None:
        self.count = 0

    def on_message(self, message: Any, sender: Any) -> Any:
        if isinstance(message, int):
            self.count += 1
        elif isinstance(message, list):
            self.count += len(message)
        elif message == "reset":
            self.count = 0
        elif message == "count":
            return ("count", self.count)
        return None


class PusherWorker(Worker):
    """The supervised :class:`RawPusher`; its sink is its earlier sibling ``sink`` (an authority)."""

    def on_start(self) -> None:
        self.waiter: Any = None

    def on_message(self, message: Any, sender: Any) -> Any:
        if isinstance(message, tuple) and message and message[0] == "push":
            _, total, batch = message
            sink = self.authorities["sink"].address
            self.waiter = sender
            push(self.send, sink, total, batch)
            self.send(sink, "count")
        elif isinstance(message, tuple) and message and message[0] == "count" and self.waiter is not None:
            self.send(self.waiter, message[1])
            self.waiter = None
        return None
