"""Workers that warm themselves in their supervisor's process (:meth:`ouroactors.Worker.on_preload`), for
``test_preload.py``.

``Warmed`` notes ``preload <pid>`` in the file named by ``OUROACTORS_TEST_IMPORT_LOG``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ouroactors import Worker
from ouroactors.core import boundary


class Warmed(Worker):
    """Notes ``preload <pid>`` when its supervisor warms it (:meth:`Worker.on_preload`)."""

    @classmethod
    def on_preload(cls) -> None:
        log = os.environ.get("OUROACTORS_TEST_IMPORT_LOG")
        if log:
            with open(log, "a", encoding="ascii") as out:
                out.write(f"preload {os.getpid()}\n")


class FailsToWarm(Worker):
    """Its warm-up raises: the supervisor logs it, and its children start as ever."""

    @classmethod
    def on_preload(cls) -> None:
        raise RuntimeError("cannot warm here")


@dataclass(frozen=True)
class Part:
    name: str


@dataclass(frozen=True)
class DoorQuestion:
    """What :class:`DoorReady` checks at its door: a message class holding another one."""

    part: Part | None = None


class DoorReady(Worker):
    """Answers whether its door's checks were resolved before its first message (in its supervisor, then inherited)."""

    protocol = (DoorQuestion,)

    @classmethod
    def on_preload(cls) -> None:  # runs after the supervisor prepared the door: when it is logged, both are done
        log = os.environ.get("OUROACTORS_TEST_IMPORT_LOG")
        if log:
            with open(log, "a", encoding="ascii") as out:
                out.write(f"door-preload {os.getpid()}\n")

    def on_start(self) -> None:
        self.ready = {cls.__name__: cls in boundary._HINTS for cls in (DoorQuestion, Part)}  # before any message

    def handle_DoorQuestion(self, message: DoorQuestion, sender: object) -> dict[str, bool]:
        return self.ready
