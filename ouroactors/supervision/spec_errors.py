"""Rendering pydantic's errors about child specs as :class:`SpecError` problems: a key path and a message.

Every problem names its place (``children[2].restart``), the allowed values and the value given
(``got 'prmanent'``); a value of the wrong kind says which kind it is (``must be a table, got int 5``). A validator
that finds several problems at once (each child whose ``on_start`` cannot take its arguments) reports them all
through :func:`several`, each with a key path of its own.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Sequence
from typing import Any

from pydantic import ValidationError
from pydantic_core import PydanticCustomError

from ..core.errors import SpecError

SEVERAL = "several_problems"  # the error type of :func:`several`
SHUTDOWN_RULE = "must be a number of milliseconds >= 0, 'brutal_kill' or 'infinity'"

# What an OTP (or Akka, or thespian) user writes first, and what the key is called here: spelling alone would point
# ``start`` at ``restart``, which is not what they meant.
_NAMED_ELSEWHERE = {
    "start": "actor",  # OTP's {M, F, A}: here the import path of the worker, "module:Class"
    "module": "actor",
    "class": "actor",
    "actor_class": "actor",
    "max_restarts": "intensity",
    "max_seconds": "period",
    "max_r": "intensity",
    "max_t": "period",
    "name": "id",
}

# pydantic's "wrong kind of value" errors, said as a tree file says them
_KIND_RULES = {
    "dict_type": "must be a table",
    "model_type": "must be a table",
    "model_attributes_type": "must be a table",
    "tuple_type": "must be a list",
    "list_type": "must be a list",
}
_CHILDREN = re.compile(r"(^|\.)children$")
_A_CHILD = re.compile(r"(^|\.)children\[\d+\]$")


def several(problems: Sequence[tuple[str, str]]) -> ValueError | PydanticCustomError:
    """The error a model validator raises for ``problems`` (``(location relative to the model, message)``): one
    is the ``"@loc: message"`` :func:`spec_error_from` reads; several keep their own locations."""
    if len(problems) == 1:
        [(loc, message)] = problems
        return ValueError(f"@{loc}: {message}")
    summary = "; ".join(f"{loc}: {message}" for loc, message in problems)
    return PydanticCustomError(SEVERAL, "{summary}", {"summary": summary, "problems": list(problems)})


def format_location(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("int", "str", "literal['brutal_kill','infinity']", "function-after[_min_le_max(), Backoff]"):
            continue  # pydantic's union-branch markers say nothing to a user
        else:
            out += f".{part}" if out else str(part)
    return out


def shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def described(value: Any) -> str:
    """``int 5``, ``str 'ab'``: the kind of a value given where another kind belongs, and the value."""
    return f"{type(value).__name__} {shown(value)}"


def _located(loc: str, inner: str) -> str:
    return f"{loc}.{inner}" if loc else inner


def _messages(error: Any) -> Iterator[tuple[str, str]]:
    """``(location, message)`` for one of pydantic's errors: a :func:`several` error gives each of its own."""
    loc = format_location(tuple(error["loc"]))
    if error["type"] == SEVERAL:
        for inner, message in error["ctx"]["problems"]:
            yield _located(loc, inner), message
        return
    message = str(error["msg"]).removeprefix("Value error, ")
    if message.startswith("@"):
        inner, _, message = message[1:].partition(": ")
        loc = _located(loc, inner)
    yield loc, message


def spec_error_from(exc: ValidationError, source: str | None, known_keys: Sequence[str]) -> SpecError:
    problems: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for error in exc.errors():
        for loc, message in _messages(error):
            given = error.get("input")
            if error["type"] == "extra_forbidden":
                key = str(error["loc"][-1])
                close = ([_NAMED_ELSEWHERE[key]] if key in _NAMED_ELSEWHERE
                         else difflib.get_close_matches(key, known_keys))
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                if close[:1] == ["actor"]:
                    hint = hint[:-1] + ' the worker\'s import path, "module:Class")'
                message = f"unknown key {key!r}{hint}"
            elif error["type"] == "missing":
                message = "is required"
            elif error["type"] in _KIND_RULES:
                rule = _KIND_RULES[error["type"]]
                if _CHILDREN.search(loc):
                    rule = "must be a list of child specs (in TOML, one [[...children]] table each)"
                elif _A_CHILD.search(loc):
                    rule = "must be a table (a child spec)"
                message = f"{rule}, got {described(given)}"
            shutdown = (loc.endswith(".shutdown") or loc == "shutdown") and (
                "brutal_kill" in message or "Input should be" in message)
            if shutdown:
                message = SHUTDOWN_RULE
            closed = shutdown or error["type"] in ("enum", "literal_error")
            scalar = isinstance(given, str | int | float | bool) and error["type"] not in ("missing", "extra_forbidden")
            if "input" in error and error["type"] != SEVERAL and (
                    closed or (scalar and "; got " not in message and repr(given) not in message)):
                message = f"{message}; got {shown(given)}"  # a wrong value: show what was given
            item = (loc, message)
            if item not in seen:
                seen.add(item)
                problems.append(item)
    return SpecError(problems, source)


__all__ = ["SEVERAL", "SHUTDOWN_RULE", "described", "format_location", "several", "shown", "spec_error_from"]
