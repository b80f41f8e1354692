"""Whether every worker of a tree can be started with its spec's ``args`` and ``kwargs``, judged on the whole tree.

A supervisor spec judges its children's arguments once they are all valid (``ChildSpec._check_combinations``), so a
problem anywhere else in its subtree — an actor path that does not import, a misspelt key — would hide them, and one
subtree's problems the others'. :func:`arguments_problems` walks the spec as given instead (dicts or specs), so
that ``ouroactors check`` lists every child whose ``on_start`` cannot take its arguments, as it lists every actor
path that does not import.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .actor_paths import actor_kind, arguments_problem, loaded_actor


def judged(cls: type, args: Any, kwargs: Mapping[str, Any], *, template: bool) -> tuple[str, str] | None:
    """``(field, why)`` when ``cls.on_start`` cannot take ``args`` and ``kwargs`` (the field is ``kwargs`` when any
    are given, else ``args``), else None; see :func:`~.actor_paths.arguments_problem`."""
    problem = arguments_problem(cls, args, kwargs, template=template)
    return None if problem is None else ("kwargs" if kwargs else "args", problem)


def arguments_problems(spec: Any, where: str = "") -> list[tuple[str, str]]:
    """``(key path, why)`` for every worker below ``spec`` (a child spec's dict or a ``ChildSpec``) whose actor's
    ``on_start`` cannot take its arguments. Judged only where it can be: a worker whose actor class is imported already
    (validating the spec imported every actor that imports) and whose arguments have the right shape; anything else
    is reported by the spec's validation."""
    fields = _fields(spec)
    children = fields.get("children") if fields is not None else None
    if not isinstance(children, list | tuple):
        return []
    template = fields is not None and fields.get("strategy") == "simple_one_for_one"
    found: list[tuple[str, str]] = []
    for index, child in enumerate(children):
        here = f"{where}.children[{index}]" if where else f"children[{index}]"
        problem = _child_problem(_fields(child), template)
        if problem is not None:
            found.append((f"{here}.{problem[0]}", problem[1]))
        found += arguments_problems(child, here)
    return found


def _fields(spec: Any) -> Mapping[str, Any] | None:
    if isinstance(spec, Mapping):
        return spec
    fields = getattr(type(spec), "model_fields", None)  # a ChildSpec (a pydantic model)
    return {name: getattr(spec, name) for name in fields} if isinstance(fields, dict) else None


def _child_problem(fields: Mapping[str, Any] | None, template: bool) -> tuple[str, str] | None:
    if fields is None or fields.get("type", "worker") != "worker":
        return None
    actor, args, kwargs = fields.get("actor"), fields.get("args", ()), fields.get("kwargs", {})
    if not isinstance(actor, str) or not isinstance(args, list | tuple) or not isinstance(kwargs, Mapping) \
            or not all(isinstance(key, str) for key in kwargs):
        return None
    cls = loaded_actor(actor)
    if cls is None or actor_kind(cls) != "worker":
        return None
    return judged(cls, args, kwargs, template=template)


__all__ = ["arguments_problems", "judged"]
