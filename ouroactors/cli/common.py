"""What the CLI commands share: reaching a running system and reporting errors."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import click
from rich.console import Console

from ..core.errors import ActorCrashed, ActorSystemError, OuroactorsError, StartFailed
from ..system.handle import ActorSystem


def make_console(*, stderr: bool = False) -> Console:
    """A console that never cuts output that is not going to a terminal.

    Off a terminal rich assumes 80 columns and ellipsises table cells and wraps errors mid-sentence; a pipe or
    a file gets whole lines instead (a program parses them, a person can still ``less -S``).
    """
    stream = sys.stderr if stderr else sys.stdout
    piped = not stream.isatty()
    return Console(stderr=stderr, width=_PIPE_WIDTH if piped else None, soft_wrap=piped)


_PIPE_WIDTH = 100_000
console = make_console()
err_console = make_console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])

data_dir_option = click.option(
    "--data-dir", type=click.Path(file_okay=False), default=".ouroactors", show_default=True,
    help="data directory of the running system",
)


def connect(data_dir: str) -> ActorSystem:
    try:
        return ActorSystem.connect(data_dir)
    except ActorSystemError as exc:
        err_console.print(f"cannot reach a system: {exc}", style="red", markup=False, highlight=False)
        sys.exit(5)


def traceback_hint(exc: BaseException, data_dir: str | None) -> str | None:
    """Where the whole traceback of a crashed actor is: actors' output goes to the data dir's ``admin.out``."""
    if not isinstance(exc, StartFailed | ActorCrashed) or not data_dir:
        return None
    return f"the actor's full traceback is in {os.path.join(data_dir, 'admin.out')}"


def reports_errors(func: F) -> F:
    """Turn framework errors into a one-line message and exit code 2."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except OuroactorsError as exc:
            err_console.print(f"{type(exc).__name__}: {exc}", style="red", markup=False, highlight=False)
            hint = traceback_hint(exc, kwargs.get("data_dir"))
            if hint:
                err_console.print(hint, markup=False, highlight=False)
            sys.exit(2)

    return wrapper  # type: ignore[return-value]
