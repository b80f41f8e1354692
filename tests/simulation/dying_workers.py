"""A worker that appends each request to a file in the data dir, then passes a fault point (a kill there ends it
after the request was handled), for tests/simulation/test_ask_at_a_death.py."""

from __future__ import annotations

import os
from typing import Any

from ouroactors import Worker, faults


class Appender(Worker):
    def on_message(self, message: Any, sender: Any) -> Any:
        assert self.context is not None
        with open(os.path.join(self.context.data_dir, "handled.txt"), "a") as f:
            f.write(f"{message}\n")
        faults.point("dying.appended")
        return "ok"
