"""``ouroactors logs``: the actors' log lines — ``<data dir>/admin.out``, where every actor's logging and crash
tracebacks go (``system._logs``) — the last ``-n`` of them, and with ``--follow`` each line as it is written.

It reads the file, so it works with the system up or gone. Every line is printed :func:`.visible.visible`: a log
line may quote what a model or a user wrote.

**One record, one header.** A log record begins with a header (``2026-01-02 03:04:05,678 WARNING name: ``, the format
of :data:`~ouroactors.system._logs.FORMAT`); a message with a newline in it, and the traceback of a crash, go on over
more lines. Printed as written, such a line (``RuntimeError("x\\nfake line")``) read as a record of its own, or forged
one. The writer (:class:`~ouroactors.system._logs.RecordFormatter`) indents a record's further lines by two spaces,
and here every line that does not begin with a header is printed indented (:data:`CONTINUATION`; once); a header
never begins with a space: what starts at the margin is a record's first line, even where a message copies a header
character for character. Lines split at ``\\n`` only; a carriage return or any other control character is shown as
its escape (``\\r``). What an actor writes to its stderr itself (``print(..., file=sys.stderr)``) is not a record
and is not indented by any writer: only the reader's rule holds for it.
"""

from __future__ import annotations

import os
import re
import stat
import sys
import time
from pathlib import Path
from typing import BinaryIO

import click

from . import main
from .common import choices_hint, data_dir_option, get_console, not_nan, reports_errors, resolve_data_dir
from .visible import visible

LOG_FILE = "admin.out"
CONTINUATION = "  "  # before a line that does not begin a record (a message's further lines, a traceback)
_HEADER = re.compile(rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (?:DEBUG|INFO|WARNING|ERROR|CRITICAL|Level \d+) \S")
_BLOCK = 64 * 1024
FOLLOW_POLL_S = 0.2  # how often --follow looks for new lines (as `tail -f` does)


def _open_log(path: Path) -> BinaryIO:
    """``path`` opened for reading if it is a regular file of this user, not through a symlink: a link planted in the
    data dir, another user's file or a FIFO (which would block the command) is refused naming it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise click.ClickException(f"cannot read {path}: {exc.strerror or exc}"
                                   + (" (a symlink: refused)" if path.is_symlink() else "")) from None
    found = os.fstat(fd)
    if not stat.S_ISREG(found.st_mode) or found.st_uid != os.getuid():
        os.close(fd)
        raise click.ClickException(f"{path} is not a regular file of this user: refused")
    return os.fdopen(fd, "rb")


def last_lines(path: Path, count: int) -> tuple[list[str], int]:
    """The last ``count`` lines of ``path`` as printed (:func:`shown`) and the offset its end had: read backwards
    block by block, so a large log costs what its tail does."""
    with _open_log(path) as handle:
        end = handle.seek(0, os.SEEK_END)
        start, data = end, b""
        while start > 0 and data.count(b"\n") <= count:
            start = max(0, start - _BLOCK)
            handle.seek(start)
            data = handle.read(end - start)
    raw = data.split(b"\n")  # at newlines only: a carriage return is shown, never taken for a line's end
    if raw and raw[-1] == b"":
        raw.pop()
    if start > 0:
        raw = raw[1:]  # the first one may be cut
    return [shown(line) for line in (raw[-count:] if count else [])], end


def shown(raw: bytes) -> str:
    """One line of the log as printed: control characters escaped (but tabs), and indented by :data:`CONTINUATION`
    unless it begins a record or was indented by its writer already (see the module docstring)."""
    text = visible(raw.decode("utf-8", errors="backslashreplace"), keep="\t")
    return text if _HEADER.match(raw) or raw.startswith(CONTINUATION.encode()) else CONTINUATION + text


@main.command()
@data_dir_option
@click.option("-n", "--lines", "count", type=click.IntRange(0, 1_000_000), default=50, show_default=True,
              help="how many of the last lines to print")
@click.option("-f", "--follow", is_flag=True, help="then print each line as it is written, until Ctrl-C")
@click.option("--idle", type=click.FloatRange(0, 86400), default=None, callback=not_nan,
              help="with --follow: stop after this many seconds without a new line")
@reports_errors
def logs(data_dir: str, count: int, follow: bool, idle: float | None) -> None:
    """The actors' log lines (<data dir>/admin.out): the last ones, or followed as they are written."""
    path = Path(resolve_data_dir(data_dir)) / LOG_FILE
    if not path.exists() and not path.is_symlink():  # nothing to read: no system, exit 5 as `events`, `status` do
        problem = (f"no data directory {str(path.parent)!r}: nothing has run there (give --data-dir the directory of "
                   "the system whose logs you want)" if not path.parent.is_dir() else
                   f"no log at {path}: no system has run with this data dir (--data-dir names another); the "
                   "in-process base logs through the caller's own logging")
        get_console(stderr=True).print(problem + choices_hint(data_dir), style="red", markup=False, highlight=False)
        sys.exit(5)
    lines, offset = last_lines(path, count)
    for line in lines:
        click.echo(line)
    if not follow:
        return
    quiet_since, pending = time.monotonic(), b""
    while idle is None or time.monotonic() - quiet_since < idle:
        with _open_log(path) as handle:
            if os.fstat(handle.fileno()).st_size < offset:
                offset = 0  # the file was replaced or truncated: read it from its start
            handle.seek(offset)
            data = handle.read()
        offset += len(data)
        pending += data
        *complete, pending = pending.split(b"\n")
        for raw in complete:
            click.echo(shown(raw))
        if complete:
            quiet_since = time.monotonic()
        else:
            time.sleep(FOLLOW_POLL_S)
