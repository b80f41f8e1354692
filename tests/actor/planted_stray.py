"""A worker that sends its asker what a dead actor's peers would still send to that actor's port.

An address is a TCP port: once an actor dies, its port may go to a handle's endpoint, which then receives the
requests, stop requests, pushes and answers other actors still send to the dead one. Asked ``"stray"`` (requests)
or ``"stray answers"`` (pushes to a supervisor, answers to an actor's tagged asks), this worker sends its asker
such messages first and then answers; the handle's ask must take the answer, not a stray.
"""

from __future__ import annotations

from typing import Any

from ouroactors.runtime.coordinator.messages import Committed
from ouroactors.runtime.execution.messages import DrainOutput, OutputReady
from ouroactors.supervision.calls import Addressed, AdminAnswer, AdminCall, Stamped, Tagged, TaggedAnswer
from ouroactors.supervision.protocol import (
    AnnounceGeneration,
    ChildExiting,
    ChildStarted,
    ChildStartRefused,
    Pong,
    StopRequest,
)
from ouroactors.supervision.reasons import normal
from ouroactors.supervision.signals import GenerationAdopted
from ouroactors.supervision.worker import Worker

STRAY_SENDER = "tests.actor.planted_stray:StraySender"


def strays() -> list[Any]:
    """One of each request a dead actor's peers send it (never an answer to anything)."""
    return [Addressed(7, DrainOutput(0)), Stamped(3, "decide"), Tagged("r-1", "get"), AdminCall("which_children"),
            StopRequest(normal(), "runtime#4", 2), OutputReady("s1", "rt-1", 1, ()), Committed("s1", 3, ())]


def stray_pushes_and_answers() -> list[Any]:
    """What a dead *supervisor's* children push to it, and the answers to asks a dead *coordinator* (or supervisor)
    made of others: each tagged with the ref its asker sent, which no ask of a handle sent, or a ``Pong`` (the
    answer to a supervisor's heartbeat, never to anything a handle asks but a ``Ping``)."""
    return [ChildStarted("runtime#4", 2, 4242, "addr"), ChildStartRefused("runtime#4", 3, normal()),
            ChildExiting("runtime#4", 2, normal()), AnnounceGeneration("grants", 1, "reloaded"),
            GenerationAdopted("grants", 1, 9), TaggedAnswer("c-17", "its status"), AdminAnswer("a-3", []),
            Pong("runtime#4", 2), TaggedAnswer(None, "a malformed tag"), AdminAnswer(7, "another"),  # type: ignore
            TaggedAnswer("x" * 100_000, "an over-long ref")]


class StraySender(Worker):
    def on_message(self, message: Any, sender: Any) -> Any:
        if message in ("stray", "stray answers"):
            for stray in strays() if message == "stray" else stray_pushes_and_answers():
                self.send(sender, stray)
            return "the answer"
        return message
