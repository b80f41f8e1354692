"""What the CLI commands share: reaching a running system and reporting errors.

Nothing here imports the system handle: :func:`connect` imports it when a command needs the whole handle,
and :func:`connect_client` gives the read-only commands (``status``, ``tree``) the thin client
(:mod:`ouroactors.system.client`), which reaches the same system without importing the specs, the
supervisor and the host actor (most of the start-up cost of a CLI call).
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable
from functools import cache, wraps
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..core.errors import ActorCrashed, ActorSystemError, NoSuchActor, OuroactorsError, StartFailed
from .visible import visible

if TYPE_CHECKING:
    from rich.console import Console

    from ..system.client import SystemClient
    from ..system.handle import ActorSystem

C = TypeVar("C")


def make_console(*, stderr: bool = False) -> Console:
    """A console that never cuts output that is not going to a terminal, and reads no markup in what it prints.

    Off a terminal rich assumes 80 columns and ellipsises table cells and wraps errors mid-sentence; a pipe or
    a file gets whole lines instead (a program parses them, a person can still ``less -S``).

    ``markup=False`` and ``emoji=False``: everything the CLI prints comes from somewhere else — an actor's crash
    message, a path a model chose, a session id — and rich would read ``[bold]`` in it as a style, drop ``[digest]``
    as an unknown tag, and fail the whole command on a ``[/x]`` that closes nothing; ``echo :smile:`` to approve
    would read ``echo 😄``. Styles are given as ``style=`` or as ``rich.text.Text``, never spelt inside text. And no
    string reaches the terminal with a control character in it (:mod:`.visible`).
    """
    stream = sys.stderr if stderr else sys.stdout
    piped = not stream.isatty()
    return _console_type()(stderr=stderr, width=_PIPE_WIDTH if piped else None, soft_wrap=piped, markup=False,
                           emoji=False)


@cache
def _console_type() -> type[Console]:
    """rich's console, rendering every string :func:`.visible.visible` (see that module): control characters and
    direction overrides in what it prints are shown, never obeyed by the terminal."""
    from rich.console import Console

    class VisibleConsole(Console):
        def render_str(self, text: str, *args: Any, **kwargs: Any) -> Any:
            return super().render_str(visible(text), *args, **kwargs)

    return VisibleConsole


_PIPE_WIDTH = 100_000


def get_console(*, stderr: bool = False) -> Console:
    """The CLI's console for stdout (or stderr), made on first use."""
    name = "err_console" if stderr else "console"
    made: Console | None = globals().get(name)
    if made is None:
        made = globals()[name] = make_console(stderr=stderr)
    return made


def __getattr__(name: str) -> Console:
    """``console`` and ``err_console``, made on first use (PEP 562): rich costs ~20 ms of imports, and
    ``status`` or ``tree`` on a pipe print without it (:func:`say`, :func:`plain_stdout`)."""
    if name == "console":
        return get_console()
    if name == "err_console":
        return get_console(stderr=True)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def plain_stdout() -> bool:
    """Whether rich would print to stdout as plain text: not a terminal, and nothing forcing one.

    Conservative: any ``FORCE_COLOR`` or ``TTY_COMPATIBLE`` leaves the printing to rich, which reads them.
    """
    return not sys.stdout.isatty() and "FORCE_COLOR" not in os.environ and "TTY_COMPATIBLE" not in os.environ


def say(text: str) -> None:
    """``console.print(text, markup=False)``, written directly when that is what rich would write.

    Off a terminal the CLI's console writes a line of printable characters unchanged (it reads no markup and no
    emoji codes); anything else goes through rich (a test compares the two).
    """
    if plain_stdout() and text.isprintable():
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        return
    get_console().print(text, markup=False)

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_DATA_DIR = ".ouroactors"


def _resolved(ctx: click.Context, param: click.Parameter, value: str) -> str:
    return resolve_data_dir(value)


# Every command resolves its data dir the same way (:func:`resolve_data_dir`), whether it asks the system or reads
# the data dir's files itself (a journal, the operator's credentials, the committed event log).
data_dir_option = click.option(
    "--data-dir", type=click.Path(file_okay=False), default=DEFAULT_DATA_DIR, show_default=True,
    callback=_resolved, help="data directory of the running system",
)


class MessageField(click.ParamType):
    """An argument that becomes ``message.field``: parsed as ``base``, then checked as the door checks that field
    (:func:`~ouroactors.core.boundary.check_field`), so a bad one is a usage error naming the option before any
    system is reached."""

    def __init__(self, message: type, field: str, base: click.ParamType = click.STRING) -> None:
        self.message, self.field, self.base = message, field, base
        self.name = base.name

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from ..core.boundary import check_field
        from ..core.errors import BadRequest

        typed = self.base.convert(value, param, ctx) if isinstance(value, str) else value
        try:
            return check_field(self.message, self.field, typed)
        except BadRequest as bad:
            self.fail(bad.problem + (f" (got {bad.value})" if bad.value else ""), param, ctx)


def not_nan(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """An option's callback: ``value`` unless it is NaN, which click's FloatRange lets through (NaN compares false
    with any bound) and which would then wait forever or not at all."""
    if value is not None and value != value:
        raise click.BadParameter("nan is not a number of seconds", ctx, param)
    return value


def served_below(data_dir: str) -> list[str]:
    """The data dirs directly under ``data_dir`` that hold a system marker (``.ouroactors/app``, …)."""
    return _below(data_dir, lambda d: os.path.isfile(os.path.join(d, "system.json")))


def stored_below(data_dir: str) -> list[str]:
    """The data dirs directly under ``data_dir`` that hold an LMDB environment (served now or not)."""
    return _below(data_dir, _holds_data)


def _below(data_dir: str, wanted: Callable[[str], bool]) -> list[str]:
    """This user's real directories directly under ``data_dir`` that are ``wanted``: only such a data dir below the
    default is found by itself — one another local user planted there (a shared working directory), or a link, is
    never chosen for you; name it with --data-dir."""
    try:
        names = sorted(os.listdir(data_dir))
    except OSError:
        return []
    found = []
    for name in names:
        directory = os.path.join(data_dir, name)
        try:
            info = os.lstat(directory)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and wanted(directory):
            found.append(directory)
    return found


def _holds_data(data_dir: str) -> bool:
    return os.path.isfile(os.path.join(data_dir, "lmdb", "data.mdb"))


def resolve_data_dir(data_dir: str) -> str:
    """``data_dir``, or — for the default with no system of its own — the one served system directly below it;
    with none served there, the one data dir below it that holds data (a stopped system's: ``journal verify``,
    ``session export`` read the files with the system down).

    A tree that sets its own ``data_dir`` below the default (the README's ``.ouroactors/app``, the demo's
    ``.ouroactors/demo``) is then found by a second terminal in the same directory without ``--data-dir``, by
    every command alike. Several below it: the caller's error lists them (:func:`choices_hint`).
    """
    if os.path.normpath(data_dir) != DEFAULT_DATA_DIR or os.path.isfile(os.path.join(data_dir, "system.json")):
        return data_dir
    below = served_below(data_dir)
    if below:
        return below[0] if len(below) == 1 else data_dir
    if _holds_data(data_dir):
        return data_dir
    stored = stored_below(data_dir)
    return stored[0] if len(stored) == 1 else data_dir


def choices_hint(data_dir: str) -> str:
    """For an error about the default data dir: the data dirs below it to choose from ('' when none or not the
    default)."""
    if os.path.normpath(data_dir) != DEFAULT_DATA_DIR:
        return ""
    found = served_below(data_dir) or stored_below(data_dir)
    return f"; data dirs below it: {', '.join(found)} — choose one with --data-dir" if found else ""


def connect(data_dir: str) -> ActorSystem:
    """The system serving ``data_dir`` (see :func:`resolve_data_dir`); exit 5 naming why when there is none."""
    from ..system.handle import ActorSystem

    return _reach(data_dir, ActorSystem.connect)


def connect_client(data_dir: str) -> SystemClient:
    """As :func:`connect`, but the thin client: enough to look at the trees and ask by path."""
    from ..system.client import SystemClient

    return _reach(data_dir, SystemClient.attach)


def _reach(data_dir: str, attach: Callable[[str], C]) -> C:
    chosen = resolve_data_dir(data_dir)
    try:
        return attach(chosen)
    except ActorSystemError as exc:
        problem = str(exc)
    below = served_below(data_dir) if chosen == data_dir and os.path.normpath(data_dir) == DEFAULT_DATA_DIR else []
    if len(below) > 1:
        problem += f"; systems below it: {', '.join(below)} — choose one with --data-dir"
    get_console(stderr=True).print(f"cannot reach a system: {problem}", style="red", markup=False, highlight=False)
    sys.exit(5)


def traceback_hint(exc: BaseException, data_dir: str | None, base: str = "multiproc") -> str | None:
    """Where the whole traceback of a crashed actor is: actors' output goes to the data dir's ``admin.out``
    (``actors.log`` on the in-process base, which ``run --base simple`` serves).

    The handle that received the error named the file of the system it reached (a note on the error); that is
    the data dir the command resolved, not necessarily the one it was given.
    """
    notes = getattr(exc, "__notes__", None)
    if notes:
        return "\n".join(notes)
    from ..system._answers import has_traceback

    if not isinstance(exc, StartFailed | ActorCrashed) or not data_dir or not has_traceback(exc):
        return None
    name = "admin.out" if base == "multiproc" else "actors.log"
    return f"the actor's full traceback is in {os.path.join(resolve_data_dir(data_dir), name)}"


MAX_JSON_DEPTH = 100  # arrays and objects a command-line JSON literal may nest (a message is pickled to be sent)


def json_depth(value: object) -> int:
    """How deep lists and dicts nest in ``value`` (a scalar 0, ``[]`` 1, ``[[1]]`` 2), counted without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, list | dict):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def json_literal(text: str, param_hint: str) -> object:
    """A command-line value as the value it spells: ``7`` is 7, ``1.5``, ``true``, ``null``, ``"7"``, ``[1, 2]``,
    ``{"k": 1}`` are JSON; anything else that is not JSON (``hello``) stays a string. One that begins as a JSON
    object, array or string does (``{"k": 1``, a brace lost to the shell) but does not parse is refused, naming
    why: passed on as a string, it would reach the actor as something nobody meant. So are what JSON has no value
    for (``NaN``, ``Infinity``, ``1e999``), an integer over Python's digit limit (taken for a word, it became a
    string of digits), and arrays and objects nested deeper than :data:`MAX_JSON_DEPTH` (pickling the message to
    send it fails a few hundred levels down, far below where decoding does)."""
    import json
    import math
    import re

    def finite(number: str) -> float:
        value = float(number)
        if not math.isfinite(value):
            raise ValueError(f"{number!r} is not a finite number")
        return value

    def no_constant(name: str) -> object:
        raise ValueError(f"{name} is not a JSON value (only finite numbers are)")

    def refuse(why: str) -> click.BadParameter:
        return click.BadParameter(f"{text[:80]!r}{'…' if len(text) > 80 else ''} {why}", param_hint=param_hint)

    def too_deep() -> click.BadParameter:
        return refuse(f"nests too deep to decode (arrays and objects deeper than {MAX_JSON_DEPTH} levels are refused)")

    try:
        value = json.loads(text, parse_float=finite, parse_constant=no_constant)
    except RecursionError:
        raise too_deep() from None
    except ValueError as exc:
        if text.lstrip()[:1] in ("{", "[", '"') or re.fullmatch(r"\s*-?(\d+(\.\d*)?([eE][+-]?\d+)?|NaN|Infinity)\s*",
                                                                 text):
            raise refuse(f"begins as JSON but is not JSON: {exc} (quote it whole for the shell, or pass a plain "
                         "word)") from None
        return text
    if json_depth(value) > MAX_JSON_DEPTH:
        raise too_deep()
    return value


ACTOR_PATH_PARAMETERS = ("path", "supervisor_path")  # a command's parameters that name an actor by its tree path


def public_name(exc: BaseException) -> str:
    """The name of ``exc``'s class, or of the nearest base class that is public (not ``_Private``): what a user reads
    and can look up."""
    return next((cls.__name__ for cls in type(exc).__mro__ if not cls.__name__.startswith("_")), "Error")


def _empty_actor_path(kwargs: dict[str, Any]) -> str | None:
    """The name of an actor-path parameter (:data:`ACTOR_PATH_PARAMETERS`) given as no path at all (``''``, ``/``)."""
    return next((name for name in ACTOR_PATH_PARAMETERS
                 if isinstance(kwargs.get(name), str) and not kwargs[name].strip("/")), None)


def _hint(name: str) -> str:
    """How the user spelt the current command's parameter ``name`` (``'PATH'``, ``'--at'``)."""
    ctx = click.get_current_context(silent=True)
    param = next((p for p in ctx.command.params if p.name == name), None) if ctx is not None else None
    return param.get_error_hint(ctx) if param is not None and ctx is not None else name.upper()


def reports_errors(func: F) -> F:
    """Turn framework errors into a one-line message and exit code 2.

    An actor path given empty (``''``, ``/``: a parameter named as in :data:`ACTOR_PATH_PARAMETERS`) is refused the
    same way before the command runs: ``NoSuchActor: empty path``, as resolving it would say, for every command
    (``kill ''`` took it for a tree's root)."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            empty = _empty_actor_path(kwargs)
            if empty is not None:
                raise NoSuchActor(f"empty path {kwargs[empty]!r}: {_hint(empty)} names no actor (give a tree path "
                                  "such as app/worker)")
            return func(*args, **kwargs)
        except OuroactorsError as exc:
            get_console(stderr=True).print(f"{public_name(exc)}: {exc}", style="red", markup=False, highlight=False)
            hint = traceback_hint(exc, kwargs.get("data_dir"))
            if hint:
                get_console(stderr=True).print(hint, markup=False, highlight=False)
            sys.exit(2)

    return wrapper  # type: ignore[return-value]


def write_new_file(target: str | os.PathLike[str], data: bytes, *, option: str = "--output") -> None:
    """Write ``data`` to ``target`` whole, durably, and never over an existing file: a temporary file beside it is
    written and fsynced, then *linked* into place (``link`` fails if the name exists, with no window between a check
    and the write), then the directory is fsynced. An existing ``target`` is a :class:`click.BadParameter` naming
    ``option``."""
    import tempfile

    directory = os.path.dirname(os.path.abspath(target))
    fd, tmp = tempfile.mkstemp(prefix=".partial-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, target)
        except FileExistsError:
            raise click.BadParameter(f"{target} exists already (choose another file)", param_hint=option) from None
    finally:
        os.unlink(tmp)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
