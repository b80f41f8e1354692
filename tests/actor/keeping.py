"""A worker that keeps what it is told, for :mod:`.test_pickled_messages`.

``("keep", value)`` keeps ``value`` as received; ``"kept"`` answers ``("holds", value)``; ``"lambda"`` answers a
function (which cannot travel between processes); ``("call", f)`` answers ``f()``.
"""

from __future__ import annotations

from typing import Any

from ouroactors.supervision.worker import Worker

KEEPER = "tests.actor.keeping:Keeper"


class Keeper(Worker):
    def on_start(self) -> None:
        self.kept: Any = None

    def on_message(self, message: Any, sender: Any) -> Any:
        if isinstance(message, tuple) and message[:1] == ("keep",):
            self.kept = message[1]
            return "kept"
        if isinstance(message, tuple) and message[:1] == ("call",):
            return message[1]()
        if message == "kept":
            return ("holds", self.kept)
        if message == "lambda":
            return lambda: 1
        return self.unhandled(message, sender)
