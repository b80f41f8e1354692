"""The runtime's typed refusals: what a caller did wrong, or what state the session is in.

Each travels back to the asker as the answer (they are :class:`~ouroactors.core.errors.OuroactorsError`s, so
they survive pickling between processes) and changes nothing.
"""

from __future__ import annotations

from ...core.errors import OuroactorsError


class RuntimeRefusal(OuroactorsError):
    """Base class of every refusal a session runtime answers with."""


class NotOpen(RuntimeRefusal):
    """The runtime has no open session (never opened, or closed)."""


class AlreadyOpen(RuntimeRefusal):
    """``open`` on a runtime that already serves a session."""


class Busy(RuntimeRefusal):
    """``send`` while a turn is running: steer it, interrupt it, or wait for ``turn_settled``."""


class NoActiveTurn(RuntimeRefusal):
    """``steer`` or ``interrupt`` with no turn running."""


class SteerNotRecorded(RuntimeRefusal):
    """``steer`` whose acceptance the journal could not commit: it is not queued (nothing was promised; send it
    again). The lost ``steer_received`` record is named by the journal's next ``gap`` record."""


class CursorError(RuntimeRefusal):
    """A drain or ack cursor the output cannot serve (behind the acknowledged cursor, or past the last event)."""


class BadRuntimeRequest(RuntimeRefusal):
    """A message whose fields fail validation; ``field`` names the first bad one."""

    def __init__(self, message: str, field: str, problem: str) -> None:
        self.message_type = message
        self.field = field
        self.problem = problem
        super().__init__(f"{message}.{field}: {problem}")


__all__ = ["AlreadyOpen", "BadRuntimeRequest", "Busy", "CursorError", "NoActiveTurn", "NotOpen", "RuntimeRefusal",
           "SteerNotRecorded"]
