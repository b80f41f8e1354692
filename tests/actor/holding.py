"""A worker whose handler of ``"hold"`` does not return: it writes its pid to ``marker`` and waits (a long handler,
a stuck call). Anything else is echoed."""

from __future__ import annotations

import os
import threading
from typing import Any

from ouroactors.supervision.worker import Worker

HOLDS = "tests.actor.holding:Holds"


class Holds(Worker):
    def on_start(self, marker: str = "") -> None:
        self.marker = marker

    def on_message(self, message: Any, sender: Any) -> Any:
        if message == "hold":
            with open(self.marker, "w", encoding="ascii") as out:
                out.write(str(os.getpid()))
            threading.Event().wait(120)  # the handler under test: it never answers in time
            return "released"
        return ("echo", message)
