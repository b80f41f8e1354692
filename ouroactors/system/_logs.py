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
import os
from pathlib import Path
from typing import Any

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
USER_THESPLOG = os.environ.get("THESPLOG_FILE")  # a file the user chose wins over every system's own


def log_thespian_into(directory: Path, user_file: str | None = USER_THESPLOG) -> None:
    """Thespian's own log goes into this system's data dir (unless the user named a file).

    Thespian reads ``THESPLOG_FILE`` once per process and caches it, and the admin is forked from this
    process: setting the variable only when unset made every later system of a process log into the
    first system's data dir. Each system now sets it, and the cached path is forgotten.
    """
    from thespian.system import utilis

    os.environ["THESPLOG_FILE"] = user_file or str(directory / "thespian.log")
    os.environ.setdefault("THESPLOG_THRESHOLD", "WARNING")
    utilis._thesplog_file = None
    utilis._thesplog_old_file = None


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
