"""Workers whose handlers answer what cannot travel between processes, or leave by ``sys.exit()``.

:class:`OddAnswers` answers ``"lambda"`` with a function, ``"generator"`` with a generator, ``"bad exception"`` with
an exception that pickles but does not unpickle (its ``__init__`` takes two arguments and gives ``Exception`` one),
and refuses ``"refuse badly"`` with such an exception (it is in ``refusals``). ``"exit N"`` calls ``sys.exit(N)``,
``"exit"`` calls ``sys.exit()``, ``"stop"`` calls ``self.stop()`` and answers nothing, ``"count"`` answers how many
requests this incarnation has handled. :class:`ExitsInStart` calls ``sys.exit(0)`` in ``on_start``.
"""

from __future__ import annotations

import sys
from typing import Any

from ouroactors.supervision.worker import Worker

ODD_ANSWERS = "tests.actor.odd_answers:OddAnswers"
EXITS_IN_START = "tests.actor.odd_answers:ExitsInStart"


class TwoArgumentError(Exception):
    def __init__(self, what: str, code: int) -> None:
        super().__init__(what)  # pickled as (what,): unpickling calls TwoArgumentError(what) and fails
        self.code = code


class OddAnswers(Worker):
    refusals = (TwoArgumentError,)

    def on_start(self) -> None:
        self.handled = 0

    def on_message(self, message: Any, sender: Any) -> Any:
        self.handled += 1
        if message == "lambda":
            return lambda: 1
        if message == "generator":
            return (n for n in range(3))
        if message == "bad exception":
            return TwoArgumentError("answered", 7)
        if message == "refuse badly":
            raise TwoArgumentError("refused", 7)
        if message == "too large":
            return b"x" * (1 << 20)  # over the frame cap the test sets (OUROACTORS_MAX_FRAME_BYTES)
        if message == "exit":
            sys.exit()
        if isinstance(message, str) and message.startswith("exit "):
            sys.exit(int(message.split()[1]))
        if message == "stop":
            self.stop()
            return None
        return self.handled


class ExitsInStart(Worker):
    def on_start(self) -> None:
        sys.exit(0)


class StopsWhenPoked(Worker):
    """Stops itself (``stop()``, nothing answered) on a bare ``"poke"`` from another worker."""

    def on_message(self, message: Any, sender: Any) -> Any:
        if message == "poke":
            self.stop()
            return None
        return "serving"


class Poker(Worker):
    """Pokes its earlier sibling ``target`` with a bare message; answers ``"seen"`` with what came back since."""

    def on_start(self) -> None:
        self.seen: list[str] = []

    def on_message(self, message: Any, sender: Any) -> Any:
        if message == "poke":
            self.send(self.authorities["target"].address, "poke")
            return "poked"
        if message == "seen":
            return list(self.seen)
        self.seen.append(type(message).__name__)
        return None


STOPS_WHEN_POKED = "tests.actor.odd_answers:StopsWhenPoked"
POKER = "tests.actor.odd_answers:Poker"


class SendsTheUnsendable(Worker):
    """Sends its earlier sibling ``target`` a generator (which cannot be pickled) when asked to."""

    def on_message(self, message: Any, sender: Any) -> Any:
        if message == "send":
            self.send(self.authorities["target"].address, (n for n in range(3)))
            return "sent"
        return None


SENDS_THE_UNSENDABLE = "tests.actor.odd_answers:SendsTheUnsendable"
