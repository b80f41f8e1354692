"""Turning pydantic's validation errors on provider files into problems a user can act on.

A scripted-model file or a ``[model]`` table is written by hand, so every problem names the file, the key path
(``turns[2].events[0].name``, in the tree files' notation from :func:`~ouroactors.supervision.specs.format_location`),
the value given and, where the field is a choice, the allowed values. Pydantic's locations carry the tag of a
discriminated union (``("turns", 2, "events", 0, "tool_call", "name")``); a tag says nothing to the person who wrote
the file, so it is dropped by walking the location along the data that was given.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from ....core.errors import OuroactorsError
from ....supervision.specs import format_location


class ProviderConfigError(OuroactorsError, ValueError):
    """A provider configuration (or a file it names) is invalid; nothing was started.

    ``problems`` lists ``(location, message)`` pairs, ``location`` a key path such as ``model.base_url``;
    ``source`` names the file (or ``None`` for a table built in code).
    """

    what = "invalid model provider configuration"

    def __init__(self, problems: list[tuple[str, str]], source: str | None = None) -> None:
        self.problems = problems
        self.source = source
        where = f"{source}: " if source else ""
        lines = [f"{where}{loc}: {msg}" if loc else f"{where}{msg}" for loc, msg in problems]
        super().__init__(f"{self.what}:\n  " + "\n  ".join(lines))


class ScriptFileError(ProviderConfigError):
    """A scripted-model file is unreadable or invalid (the key path is inside the file)."""

    what = "invalid scripted model file"


def _given(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _walk(loc: tuple[int | str, ...], data: Any) -> tuple[int | str, ...]:
    """``loc`` without the union tags pydantic inserts: a part equal to the ``kind`` of the node it sits in."""
    kept: list[int | str] = []
    node = data
    for index, part in enumerate(loc):
        last = index == len(loc) - 1
        if isinstance(node, dict) and not last and part == node.get("kind"):
            continue  # the tag of a discriminated union (pydantic always inserts it), not a key the user wrote
        kept.append(part)
        if isinstance(node, dict) and isinstance(part, str):
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            node = None
    return tuple(kept)


def problems_from(
    exc: ValidationError, data: Any, *, known_keys: Iterable[str] = (), kinds: Iterable[str] = (), prefix: str = ""
) -> list[tuple[str, str]]:
    """``(key path, message)`` for each error of ``exc`` raised while validating ``data``.

    ``known_keys`` feed the "did you mean" of an unknown key; ``kinds`` are the allowed ``kind`` values of the
    discriminated union in ``data`` (pydantic names them when a kind is wrong, not when it is missing).
    """
    keys = sorted(set(known_keys))
    problems: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    errors = exc.errors(include_url=False)
    failing = [tuple(error["loc"]) for error in errors]
    for error in errors:
        here = tuple(error["loc"])
        if error["type"] == "too_short" and any(len(f) > len(here) and f[: len(here)] == here for f in failing):
            continue  # "at least 1 item after validation": a consequence of the items' own errors, said below
        loc = format_location(_walk(tuple(error["loc"]), data))
        kind = error["type"]
        ctx = error.get("ctx") or {}
        if kind == "extra_forbidden":
            key = str(error["loc"][-1])
            close = difflib.get_close_matches(key, keys, n=1)
            message = f"unknown key {key!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
        elif kind == "missing":
            message = "is required"
        elif kind in ("union_tag_invalid", "union_tag_not_found"):
            loc = f"{loc}.{ctx.get('discriminator', 'kind').strip(chr(39))}" if loc else "kind"
            allowed = ctx.get("expected_tags") or ", ".join(repr(k) for k in kinds)
            given = f"unknown kind {ctx['tag']!r}" if kind == "union_tag_invalid" else "is required"
            message = f"{given}; allowed: {allowed}"
        elif kind in ("literal_error", "enum"):
            message = f"must be one of {ctx.get('expected', '?')} (given: {_given(error['input'])})"
        else:
            message = str(error["msg"]).removeprefix("Value error, ")
            if message.startswith("@"):  # a model validator pointing below itself: "@events[1].id: ..."
                inner, _, message = message[1:].partition(": ")
                loc = f"{loc}{'' if inner.startswith('[') or not loc else '.'}{inner}"
            elif not isinstance(error["input"], dict) and "(given:" not in message:
                message += f" (given: {_given(error['input'])})"
        if prefix:
            loc = f"{prefix}.{loc}" if loc else prefix
        item = (loc, message)
        if item not in seen:
            seen.add(item)
            problems.append(item)
    return problems
