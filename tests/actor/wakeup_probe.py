"""A worker that answers what its process inherited: the signal wake-up descriptor (-1: none) and where it leads."""

from __future__ import annotations

import os
import signal
from typing import Any

from ouroactors.supervision.worker import Worker

WAKEUP_PROBE = "tests.actor.wakeup_probe:WakeupProbe"


class WakeupProbe(Worker):
    def on_message(self, message: Any, sender: Any) -> Any:
        inherited = signal.set_wakeup_fd(-1)
        if inherited == -1:
            return -1, None
        signal.set_wakeup_fd(inherited)
        try:
            return inherited, os.readlink(f"/proc/self/fd/{inherited}")
        except OSError as exc:
            return inherited, str(exc)
