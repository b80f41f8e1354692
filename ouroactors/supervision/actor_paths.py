"""Actor paths (``package.module:Class``): what one names, and whether its ``on_start`` can take a spec's arguments.

Both are judged when a tree is validated, before anything starts: a path that does not import, names a module or a
class that is not an ouroactors actor, or a misspelt one, is refused saying which; so are arguments the actor's
``on_start`` could not be called with (a misspelt keyword would otherwise fail only when the child starts).
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import pickle
import types
from collections.abc import Mapping, Sequence
from typing import Any


def resolve_actor(path: str) -> type:
    """Import ``module:Class`` (or ``module.Class``) and check it speaks the ouroactors protocol."""
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise ValueError(f"actor path {path!r} must look like 'package.module:Class'")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        hint = ""
        if isinstance(exc, ModuleNotFoundError) and exc.name and module_name.startswith(exc.name):
            hint = (f" — {exc.name!r} is not on the import path: run from the project's directory, install the "
                    "project (pip install -e .) or add its directory to PYTHONPATH")
        raise ValueError(f"actor path {path!r} does not import: {type(exc).__name__}: {exc}{hint}") from None
    target: Any = module
    for part in attr.split("."):
        owner, target = target, getattr(target, part, None)
        if target is None:
            raise ValueError(f"actor path {path!r}: module {module_name!r} has no attribute {attr!r}"
                             f"{_missing_hint(owner, part, f'{module_name}.{attr}')}")
    if isinstance(target, types.ModuleType):
        raise ValueError(f"actor path {path!r} names a module: name a class in it ('{target.__name__}:Class')")
    if not isinstance(target, type) or not getattr(target, "__ouroactors_child__", False):
        raise ValueError(
            f"actor path {path!r} is not an ouroactors actor (subclass ouroactors.Worker or ouroactors.Supervisor)"
        )
    asynchronous = async_handlers(target)
    if asynchronous:
        raise ValueError(
            f"actor path {path!r}: {', '.join(asynchronous)} {'is' if len(asynchronous) == 1 else 'are'} async "
            "(async def): handlers are called synchronously, one message at a time, so the body would never run — "
            "define them with def (and run trio or asyncio inside one if it must await)")
    return target


_HOOKS = ("on_start", "on_message", "on_stop", "on_generation", "after_message", "unhandled", "on_preload")


def async_handlers(cls: type) -> list[str]:
    """The hooks and ``handle_<Type>`` methods of the actor class ``cls`` defined with ``async def`` (a coroutine
    or async generator function): called synchronously, each would return an object that never ran, which the
    asker would get as an answer."""
    names = [*_HOOKS, *sorted(name for name in dir(cls) if name.startswith("handle_"))]
    return [f"{cls.__name__}.{name}" for name in names
            if inspect.iscoroutinefunction(attr := getattr(cls, name, None)) or inspect.isasyncgenfunction(attr)]


def _missing_hint(owner: Any, name: str, dotted: str) -> str:
    """Why ``owner`` has no ``name``, when it can be told: ``dotted`` is a module (a class name is missing), or a
    name of ``owner`` is close to it (a typo)."""
    try:
        if importlib.util.find_spec(dotted) is not None:
            return f" — {dotted!r} names a module: name a class in it ('{dotted}:Class')"
    except (ImportError, ValueError):
        pass
    names = getattr(owner, "__dict__", {})
    actors = [n for n, v in names.items() if isinstance(v, type) and getattr(v, "__ouroactors_child__", False)]
    close = difflib.get_close_matches(name, actors, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def arguments_problem(cls: type, args: Sequence[Any], kwargs: Mapping[str, Any], *, template: bool = False
                      ) -> str | None:
    """Why ``cls.on_start`` cannot take ``args`` and ``kwargs`` (None: it can). A ``simple_one_for_one``
    template's arguments (``template``) are the first of each child's — ``start_child`` adds the rest — so they need
    only fit; an ``on_start`` whose signature cannot be read is not judged."""
    try:
        signature = inspect.signature(cls.on_start)  # type: ignore[attr-defined]
    except (AttributeError, TypeError, ValueError):
        return None
    bind = signature.bind_partial if template else signature.bind
    try:
        bind(None, *args, **kwargs)  # None stands for self
    except TypeError as exc:
        shown = inspect.Signature([p.replace(annotation=inspect.Parameter.empty)
                                   for p in list(signature.parameters.values())[1:]])
        return f"{cls.__name__}.on_start{shown} cannot take them: {exc}"
    return None


def unsendable_arguments(spec: Any, where: str = "") -> list[tuple[str, str]]:
    """``(location, problem)`` for every ``args``/``kwargs`` value of ``spec`` (a ``ChildSpec``) and its children
    that cannot be pickled — so cannot reach an actor in another process (a lambda, a lock, an open file)."""
    here = f"{where}/{spec.id}" if where else spec.id
    found = unsendable_values([(f"{here}.args[{i}]", value) for i, value in enumerate(spec.args)]
                              + [(f"{here}.kwargs[{key!r}]", value) for key, value in spec.kwargs.items()])
    for child in spec.children or ():
        found += unsendable_arguments(child, here)
    return found


def unsendable_values(values: Sequence[tuple[str, Any]]) -> list[tuple[str, str]]:
    """``(location, problem)`` for each ``(location, value)`` whose value does not pickle."""
    found = []
    for location, value in values:
        try:
            pickle.dumps(value)
        except Exception as exc:  # what pickling raises varies (TypeError, PicklingError, AttributeError, ...)
            found.append((location, f"cannot be sent to the actor's process ({type(value).__name__}): "
                                    f"{type(exc).__name__}: {exc}"))
    return found


__all__ = ["arguments_problem", "async_handlers", "resolve_actor", "unsendable_arguments", "unsendable_values"]
