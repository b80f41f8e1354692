"""Test actors for simulated systems."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from thespian.actors import Actor, WakeupMessage

from ouroactors import Worker
from ouroactors.authorities.storage.actor import storage_config
from ouroactors.authorities.storage.commit import write
from ouroactors.authorities.storage.env import db, open_env
from ouroactors.core import clock, faults


class Ticker(Worker):
    """Sets a timer when asked; counts the timers that fired and when (on the system's clock)."""

    def on_start(self) -> None:
        self.fired: list[float] = []

    def handle_str(self, message: str, sender: Any) -> Any:
        if message.startswith("after "):
            self.wakeupAfter(timedelta(seconds=float(message.split()[1])), payload="tick")
            return clock.monotonic()
        if message == "fired":
            return list(self.fired)
        return None

    def handle_WakeupMessage(self, message: WakeupMessage, sender: Any) -> None:
        if message.payload == "tick":
            self.fired.append(clock.monotonic())


class Counter(Worker):
    """Counts ``"incr"`` in memory only: a restart (a new instance) starts again from zero."""

    def on_start(self) -> None:
        self.count = 0
        self.wakeupAfter(timedelta(seconds=0.5), payload="beat")

    def handle_str(self, message: str, sender: Any) -> Any:
        if message == "incr":
            self.count += 1
            return self.count
        if message == "count":
            return self.count
        return None

    def handle_WakeupMessage(self, message: WakeupMessage, sender: Any) -> None:
        self.wakeupAfter(timedelta(seconds=0.5), payload="beat")  # a timer of its own, to outlive it


IN_TXN = faults.register_point("test.sim.in_txn", "test-only: inside a write transaction, before its commit")


class Writer(Worker):
    """Writes ``key=value`` into the node's LMDB environment, reaching a fault point mid-transaction."""

    def on_start(self) -> None:
        assert self.context is not None
        self.env = open_env(storage_config(self.context.data_dir))

    def handle_str(self, message: str, sender: Any) -> Any:
        verb, _, rest = message.partition(" ")
        table = db(self.env, b"journal")
        if verb == "put":
            key, _, value = rest.partition("=")

            def put(txn: Any) -> None:
                txn.put(key.encode(), value.encode(), db=table)
                faults.point(IN_TXN)

            return type(write(self.env, put)).__name__
        if verb == "get":
            with self.env.begin() as txn:
                raw = txn.get(rest.encode(), db=table)
            return "<absent>" if raw is None else bytes(raw).decode()
        return None


HEARD: list[str] = []  # what Sink actors received (the simple base runs them in this process)
TALKING = faults.register_point("test.sim.talking", "test-only: between two sends of one message")


class Sink(Actor):
    """A plain thespian actor that remembers what it heard, in :data:`HEARD`."""

    def receiveMessage(self, message: Any, sender: Any) -> None:
        if isinstance(message, str):
            HEARD.append(message)


class Talker(Worker):
    """Tells its sink ``before``, reaches a fault point, and tells ``after`` even while unwinding."""

    def on_start(self) -> None:
        self.sink = self.createActor(Sink)

    def handle_str(self, message: str, sender: Any) -> Any:
        self.send(self.sink, f"before {message}")
        try:
            faults.point(TALKING)
        except BaseException:
            self.send(self.sink, f"after {message}")  # cleanup that answers: a dead process would not
            raise
        self.send(self.sink, f"after {message}")
        return "done"


AT_START = faults.register_point("test.sim.at_start", "test-only: reached in on_start")


class StartsAtAPoint(Worker):
    """Reaches :data:`AT_START` in ``on_start``: whose firing it is must be this actor's, not the last one that
    handled a message (the simple base runs every actor in one process)."""

    def on_start(self) -> None:
        faults.point(AT_START)
