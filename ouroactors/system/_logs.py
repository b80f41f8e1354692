"""Where the actors' log lines go: ``<data_dir>/actors.log``, never the user's terminal.

On the multiproc base thespian configures logging in every actor process from :func:`log_defs`.
The simple base runs the actors in the caller's process, whose logging belongs to the caller: if
the application configured logging (pytest does too), its handlers get the lines as usual. If
nothing is configured, Python's last-resort handler would print every crash traceback to stderr,
over a CLI's output; :func:`capture_simple` then sends the ``ouroactors`` loggers to the data
directory's file instead, until the system shuts down.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def log_defs(path: Path) -> dict[str, Any]:
    """thespian's ``logDefs`` for a multiproc system: every actor process logs to ``path``."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": FORMAT}},
        "handlers": {"file": {"class": "logging.FileHandler", "filename": str(path), "formatter": "plain"}},
        "root": {"handlers": ["file"], "level": "INFO"},
    }


def capture_simple(path: Path) -> logging.Handler | None:
    """Send the ``ouroactors`` loggers to ``path`` unless the process configured logging itself."""
    if logging.getLogger().handlers:
        return None
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter(FORMAT))
    logging.getLogger("ouroactors").addHandler(handler)
    return handler


def release(handler: logging.Handler | None) -> None:
    if handler is not None:
        logging.getLogger("ouroactors").removeHandler(handler)
        handler.close()
