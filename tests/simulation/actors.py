"""Test actors for simulated systems."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from thespian.actors import WakeupMessage

from ouroactors import Worker
from ouroactors.core import clock


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
