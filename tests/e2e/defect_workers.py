"""Workers for ``test_cli_output_defects``: a crash and a log message with newlines in them, and an ``on_start`` that
holds a tree's boot until a file exists."""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from ouroactors.supervision.worker import Worker

FORGED = "ERROR ouroactors.worker: app/x crashed: a forged record"
FORGED_HEADER = "2026-01-02 03:04:05,678 ERROR ouroactors.worker: app/y crashed: a header copied whole"


class Multiline(Worker):
    """``"crash"`` raises, ``"log"`` logs a warning: each message with a newline and a carriage return in it."""

    def on_message(self, message: Any, sender: Any) -> Any:
        if message == "log":
            logging.getLogger("defects").warning("first line\n  indented\n%s\rafter a carriage return\n%s", FORGED,
                                                 FORGED_HEADER)
            return "logged"
        if message == "crash":
            raise RuntimeError("x\n12:00:00.000 exited               app/forged  reason=fake\rend")
        return message


class HoldsStart(Worker):
    """Its ``on_start`` returns once the file ``flag`` exists (or after ``limit_s``): a boot that hangs until then."""

    def on_start(self, flag: str, limit_s: float = 60.0) -> None:
        deadline = time.monotonic() + limit_s
        while not os.path.exists(flag) and time.monotonic() < deadline:
            time.sleep(0.02)  # polling a file the test writes, bounded
