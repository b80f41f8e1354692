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
import sys
import types
from collections.abc import Mapping, Sequence
from typing import Any


def _split(path: str) -> tuple[str, str]:
    """``(module, attribute)`` of ``module:Class`` or ``module.Class``."""
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    return module_name, attr


def loaded_actor(path: str) -> type | None:
    """The class ``path`` names if its module is imported already (None otherwise, or if it names no class):
    nothing is imported."""
    module_name, attr = _split(path)
    target: Any = sys.modules.get(module_name)
    if target is None or not attr:
        return None
    for part in attr.split("."):
        target = getattr(target, part, None)
    return target if isinstance(target, type) else None


def resolve_actor(path: str) -> type:
    """Import ``module:Class`` (or ``module.Class``) and check it speaks the ouroactors protocol."""
    module_name, attr = _split(path)
    if not module_name or not attr:
        raise ValueError(f"actor path {path!r} must look like 'package.module:Class'")
    try:
        module = importlib.import_module(module_name)
    except (Exception, SystemExit) as exc:  # a module that calls sys.exit() fails to import like any other
        hint = ""
        if isinstance(exc, ModuleNotFoundError) and exc.name and module_name.startswith(exc.name):
            hint = (f" — {exc.name!r} is not on the import path: run from the project's directory, install the "
                    "project (pip install -e .) or add its directory to PYTHONPATH")
        detail = str(exc)
        if isinstance(exc, SystemExit):
            detail = f"{exc.code!r} (the module calls sys.exit() when it is imported)"
        raise ValueError(f"actor path {path!r} does not import: {type(exc).__name__}: {detail}{hint}") from None
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


# The base class each child type needs, by its module: a class derived from one was defined after it was imported,
# so a base whose module is not imported yet has no subclasses (and validating a spec imports neither).
_BASES = {"worker": (f"{__package__}.worker", "Worker"), "supervisor": (f"{__package__}.supervisor", "Supervisor")}


def actor_kind(cls: type) -> str | None:
    """``"worker"`` or ``"supervisor"``: which of ouroactors' actor bases ``cls`` derives from (None: neither)."""
    for kind, (module_name, name) in _BASES.items():
        base = getattr(sys.modules.get(module_name), name, None)
        if isinstance(base, type) and issubclass(cls, base):
            return kind
    return None


def kind_problem(path: str, cls: type, child_type: str) -> str | None:
    """Why the actor class ``cls`` (named by ``path``) cannot be a child of type ``child_type`` (``"worker"`` or
    ``"supervisor"``), or None: a supervisor child needs a Supervisor subclass and a worker a Worker subclass. The
    two speak different protocols: a Worker started as a supervisor never answers the requests a supervisor gets
    (``status``, ``tree`` and asks through it time out), and a Supervisor started as a worker runs no children."""
    kind = actor_kind(cls)
    if kind == child_type:
        return None
    base = _BASES[child_type][1]
    given = f"a {_BASES[kind][1]}" if kind is not None else "neither a Worker nor a Supervisor"
    fix = {"worker": " — drop type = 'supervisor' to run it as a worker",
           "supervisor": " — set type = 'supervisor' to run it as a supervisor"}.get(kind or "", "")
    return f"type = {child_type!r} needs a {base} subclass (ouroactors.{base}); got {path!r}, {given}{fix}"


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


__all__ = [
    "actor_kind", "arguments_problem", "async_handlers", "kind_problem", "loaded_actor", "resolve_actor",
    "unsendable_arguments", "unsendable_values",
]
