"""Example workers: each shows one behaviour a supervision tree has to handle."""

from __future__ import annotations

import os
import time
from typing import Any

from ..core import faults
from ..supervision import reasons
from ..supervision.reasons import ExitReason
from ..supervision.worker import Worker


class Echo(Worker):
    """Answers every message with itself; ``"pid"`` answers the process id."""

    def on_start(self, *args: Any, **kwargs: Any) -> None:
        self.args = args
        self.kwargs = kwargs
        faults.point("example.echo.start")

    def on_message(self, message: Any, sender: Any) -> Any:
        if message == "pid":
            return os.getpid()
        if message == "whoami":
            return {"path": self.path, "generation": self.generation, "args": self.args,
                    "kwargs": self.kwargs, "authorities": {k: v.generation for k, v in self.authorities.items()}}
        if message == "crash":
            raise RuntimeError("asked to crash")
        if isinstance(message, tuple) and message and message[0] == "exit":
            self.stop(reasons.shutdown(message[1]) if len(message) > 1 and message[1] else reasons.normal())
            return "stopping"
        if message == "point":
            faults.point("example.echo.message")
            return "passed"
        return message


class Counter(Worker):
    """Keeps a count in memory: a restart visibly loses it."""

    def on_start(self, start: int = 0) -> None:
        self.count = start

    def handle_str(self, message: str, sender: Any) -> Any:
        if message == "incr":
            self.count += 1
            return self.count
        if message == "get":
            return self.count
        if message == "crash":
            raise ValueError("counter crashed on purpose")
        return self.unhandled(message, sender)


class FailingStart(Worker):
    """Fails in ``on_start`` (a start failure the supervisor sees)."""

    def on_start(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("cannot start")


class IgnoresStart(Worker):
    """Answers OTP's ``ignore`` from ``on_start`` when ``ignore`` is true: not started, not a failure."""

    def on_start(self, ignore: bool = True) -> Any:
        from ..supervision.worker import IGNORE

        return IGNORE if ignore else None

    def on_message(self, message: Any, sender: Any) -> Any:
        return message


class FailsWhenFlagged(Worker):
    """Fails to start while the file named by ``flag`` exists (lets a test break restarts)."""

    def on_start(self, flag: str) -> None:
        if os.path.exists(flag):
            raise RuntimeError(f"flag {flag} present")

    def on_message(self, message: Any, sender: Any) -> Any:
        if message == "crash":
            raise RuntimeError("asked to crash")
        return message


class SlowStop(Worker):
    """Takes ``seconds`` in ``on_stop``: ignores the polite request for that long."""

    def on_start(self, seconds: float = 60.0) -> None:
        self.seconds = seconds

    def on_message(self, message: Any, sender: Any) -> Any:
        return message

    def on_stop(self, reason: ExitReason) -> None:
        time.sleep(self.seconds)  # deliberately unresponsive


class Authority(Worker):
    """An authority: refuses stale stamps (the base does) and can change generation on request."""

    def on_message(self, message: Any, sender: Any) -> Any:
        if message == "revoke":
            self.change_generation("rules revoked")
            return "revoking"
        if message == "generation":
            return self.generation
        return ("done", message)


class Recorder(Worker):
    """Appends its start and stop to a file: tests read the order in which things happened."""

    def on_start(self, log_path: str, name: str) -> None:
        self.log_path = log_path
        self.name = name
        self._write("start")

    def on_message(self, message: Any, sender: Any) -> Any:
        if message == "crash":
            raise RuntimeError("asked to crash")
        return message

    def on_stop(self, reason: ExitReason) -> None:
        self._write(f"stop:{reason.kind.value}")

    def _write(self, what: str) -> None:
        fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, f"{self.name} {what}\n".encode())
        finally:
            os.close(fd)


class DirectRecorder(Worker):
    """A leaf consumer that records effects itself (:class:`~ouroactors.authorities.ledger.direct.LedgerWriter`),
    fenced on the storage and ledger generations its supervisor started it with.

    Asks: a ledger record request (answered as the ledger would), ``"stamp"``, ``"pid"``.
    """

    def on_start(self, watch: bool = True) -> None:
        from ..authorities.ledger.direct import LedgerWriter  # a leaf: this process creates no children

        self.ledger = LedgerWriter.for_worker(self, watch=watch)

    def on_message(self, message: Any, sender: Any) -> Any:
        if message == "stamp":
            return (self.ledger.stamp.storage, self.ledger.stamp.ledger)
        if message == "pid":
            return os.getpid()
        return self.ledger.submit([message])[0]
