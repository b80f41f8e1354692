"""A worker that overrides ``on_message`` and also defines ``handle_<Type>`` methods, as a user writes one first.

:class:`Ticker` counts ``Tick`` messages in ``handle_Tick`` and its timers in ``handle_WakeupMessage``, but its
``on_message`` answers ``"ticks"`` and sends the rest to ``unhandled`` itself. :class:`PassingTicker` ends its
``on_message`` with ``super().on_message``, so both handlers run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from ouroactors.supervision.worker import Worker

TICKER = "tests.actor.bypassing:Ticker"
PASSING_TICKER = "tests.actor.bypassing:PassingTicker"


@dataclass(frozen=True)
class Tick:
    n: int = 1


class Ticker(Worker):
    def on_start(self) -> None:
        self.ticks = 0
        self.timers = 0
        self.wakeupAfter(timedelta(seconds=0.01))

    def handle_Tick(self, message: Tick, sender: Any) -> Any:
        self.ticks += message.n
        return self.ticks

    def handle_WakeupMessage(self, message: Any, sender: Any) -> None:
        self.timers += 1

    def on_message(self, message: Any, sender: Any) -> Any:
        if message == "ticks":
            return {"ticks": self.ticks, "timers": self.timers}
        return self.unhandled(message, sender)


class PassingTicker(Ticker):
    def on_message(self, message: Any, sender: Any) -> Any:
        if message == "ticks":
            return {"ticks": self.ticks, "timers": self.timers}
        return super(Ticker, self).on_message(message, sender)
