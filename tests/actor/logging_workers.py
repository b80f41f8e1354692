"""A worker that logs through a logger of its module (made at import, before any fork) and one made later."""

from __future__ import annotations

import logging
from typing import Any

from ouroactors.supervision.worker import Worker

LOGGER = "tests.actor.logging_workers:Logger"
log = logging.getLogger("tests.logging_worker")


class Logger(Worker):
    def on_message(self, message: Any, sender: Any) -> Any:
        log.debug("debug line %s", message)
        log.info("info line %s", message)
        log.warning("warning line %s", message)
        logging.getLogger("tests.logging_worker.late").info("late info line %s", message)
        return "logged"
