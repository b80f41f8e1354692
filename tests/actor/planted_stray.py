"""A worker that sends its asker what a dead actor's peers would still send to that actor's port.

An address is a TCP port: once an actor dies, its port may go to a handle's endpoint, which then receives the
requests, stop requests and pushes other actors still send to the dead one. Asked ``"stray"``, this worker sends
its asker such messages first and then answers; the handle's ask must take the answer, not a stray request.
"""

from __future__ import annotations

from typing import Any

from ouroactors.runtime.coordinator.messages import Committed
from ouroactors.runtime.execution.messages import DrainOutput, OutputReady
from ouroactors.supervision.calls import Addressed, AdminCall, Stamped, Tagged
from ouroactors.supervision.protocol import StopRequest
from ouroactors.supervision.reasons import normal
from ouroactors.supervision.worker import Worker

STRAY_SENDER = "tests.actor.planted_stray:StraySender"


def strays() -> list[Any]:
    """One of each request a dead actor's peers send it (never an answer to anything)."""
    return [Addressed(7, DrainOutput(0)), Stamped(3, "decide"), Tagged("r-1", "get"), AdminCall("which_children"),
            StopRequest(normal(), "runtime#4", 2), OutputReady("s1", "rt-1", 1, ()), Committed("s1", 3, ())]


class StraySender(Worker):
    def on_message(self, message: Any, sender: Any) -> Any:
        if message == "stray":
            for stray in strays():
                self.send(sender, stray)
            return "the answer"
        return message
