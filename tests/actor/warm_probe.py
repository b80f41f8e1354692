"""Workers that warm themselves in their supervisor's process (:meth:`ouroactors.Worker.on_preload`), for
``test_preload.py``.

``Warmed`` notes ``preload <pid>`` in the file named by ``OUROACTORS_TEST_IMPORT_LOG``.
"""

from __future__ import annotations

import os

from ouroactors import Worker


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
