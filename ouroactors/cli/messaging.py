"""Talk to an actor of a running system from the shell: ``ask`` (and print the answer) and ``tell``.

What a user poking at a tree wants next to ``kill`` and ``restart``: send a worker a message without writing a
script. A message is one JSON literal, read as ``start-child`` reads its arguments (``7`` is an int, ``'"7"'`` a
str, a plain word a str, ``'{"k": 1}'`` a dict), so it reaches the actor as the value it spells — actors whose
protocol wants typed messages (dataclasses, pydantic models) are asked from Python. The answer is printed as Python
writes it (``repr``: a str keeps its quotes, so ``'7'`` and ``7`` differ), or with ``--json`` as JSON. Errors the
actor answers (``ActorCrashed``, ``UnhandledMessage`` …) and a timeout exit 2 naming them, as every command does.
Asks go through the thin client (:class:`~ouroactors.system.client.SystemClient`), so after a crash the next ask
reaches the restarted worker.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from . import main
from .common import connect_client, console, data_dir_option, json_literal, not_nan, reports_errors


def _as_json(value: Any) -> Any:
    """What JSON cannot hold as it is: a dataclass or a pydantic model as its fields, a tuple or set as a list, an
    enum as its value; anything else as its repr."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
    if callable(getattr(value, "model_dump", None)) and not isinstance(value, type):
        return value.model_dump(mode="json")
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    if isinstance(value, enum.Enum):
        return value.value
    return repr(value)


@contextmanager
def _sendable(path: str) -> Iterator[None]:
    """A message (or its answer) too deeply nested to pickle is a bad-input error naming it, not a traceback:
    :data:`~.common.MAX_JSON_DEPTH` keeps a command-line message far below that, this is the last guard."""
    try:
        yield
    except RecursionError:
        raise click.BadParameter(f"nests too deep to pass between processes (asking {path.strip('/')}, pickling "
                                 "reached Python's recursion limit)", param_hint="'MESSAGE'") from None


@main.command()
@data_dir_option
@click.argument("path")
@click.argument("message")
@click.option("--timeout", type=click.FloatRange(0, 86400, min_open=True), default=5.0, show_default=True,
              callback=not_nan, help="seconds to wait for the answer")
@click.option("--json", "as_json", is_flag=True, help="print the answer as JSON (what JSON cannot hold, as repr)")
@reports_errors
def ask(data_dir: str, path: str, message: str, timeout: float, as_json: bool) -> None:
    """Ask the actor at PATH with MESSAGE (a JSON literal) and print its answer."""
    value = json_literal(message, "'MESSAGE'")  # before the system is reached
    client = connect_client(data_dir)
    try:
        with _sendable(path):
            answer = client.ask(path, value, timeout=timeout)
    finally:
        client.close()
    text = json.dumps(answer, default=_as_json, ensure_ascii=False) if as_json else repr(answer)
    console.print(text, markup=False, highlight=False, soft_wrap=True)


@main.command()
@data_dir_option
@click.argument("path")
@click.argument("message")
@reports_errors
def tell(data_dir: str, path: str, message: str) -> None:
    """Send the actor at PATH the MESSAGE (a JSON literal) and return; its answer, if any, is dropped."""
    value = json_literal(message, "'MESSAGE'")
    client = connect_client(data_dir)
    try:
        with _sendable(path):
            client.tell(path, value)
    finally:
        client.close()
    console.print(f"sent to {path.strip('/')}", markup=False, highlight=False)
