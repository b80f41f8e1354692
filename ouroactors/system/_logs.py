"""Where the actors' log lines go: a file in the data dir, never the user's terminal.

On the multiproc base every actor process keeps the root logger it was forked with, which the admin points at
``<data_dir>/admin.out`` (its standard error, where crash tracebacks go too) from the system's ``log_level``
(:func:`level_of`; ``system._patches``, patch 10): the framework's lines and the user's own loggers, whenever they
were made. Thespian's logger process still writes ``actors.log`` from :func:`log_defs`, for its own lines.
The simple base runs the actors in the caller's process, whose logging belongs to the caller: if
the application configured logging (pytest does too), its handlers get the lines as usual. If
nothing is configured, Python's last-resort handler would print every crash traceback to stderr,
over a CLI's output; :func:`capture_simple` then sends the ``ouroactors`` loggers to ``actors.log`` in the data
directory instead, until the system shuts down.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class RecordFormatter(logging.Formatter):
    """:data:`FORMAT`, with every further line of a record (a message's own newlines, a traceback) indented by two
    spaces: a header never begins with a space, so only a record's first line starts at the margin of the file,
    and a message that quotes a header (``"x\\n2026-01-02 03:04:05,678 ERROR forged: …"``) cannot pass for a record
    of its own in ``ouroactors logs``."""

    def __init__(self) -> None:
        super().__init__(FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        return super().format(record).replace("\n", "\n  ")
USER_THESPLOG = os.environ.get("THESPLOG_FILE")  # a file the user chose wins over every system's own


LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def level_of(value: str | int) -> int:
    """A log level given by name (any case) or number, as the number ``logging`` uses; anything else refused."""
    if isinstance(value, str) and value.upper() in LEVELS:
        return int(getattr(logging, value.upper()))
    if type(value) is int and value in (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL):
        return value
    from ..core.errors import ActorSystemError

    raise ActorSystemError(f"log_level must be one of {', '.join(LEVELS)} (or its logging number), not {value!r}")


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
        "formatters": {"plain": {"()": "ouroactors.system._logs.RecordFormatter"}},
        "handlers": {"file": {"class": "logging.FileHandler", "filename": str(path), "formatter": "plain"}},
        "root": {"handlers": ["file"], "level": "INFO"},
    }


def capture_simple(path: Path) -> logging.Handler | None:
    """Send the ``ouroactors`` loggers to ``path`` unless the process configured logging itself."""
    if logging.getLogger().handlers:
        return None
    handler = logging.FileHandler(path)
    handler.setFormatter(RecordFormatter())
    logging.getLogger("ouroactors").addHandler(handler)
    return handler


def release(handler: logging.Handler | None) -> None:
    if handler is not None:
        logging.getLogger("ouroactors").removeHandler(handler)
        handler.close()
