"""Which handler of a worker a message goes to: ``handle_<Type>`` along the message type's MRO.

Kept apart from the worker's shell so the one rule, and the diagnosis of its one trap, sit together. The default
``Worker.on_message`` dispatches by type; a worker that overrides ``on_message`` takes every message itself, and
its ``handle_<Type>`` methods run only if it passes the message on (``super().on_message(message, sender)``). A
user who defines both usually expects the specific handler to win: when such a message ends unhandled, the
warning and the :class:`~ouroactors.core.errors.UnhandledMessage` answer name the handler that was bypassed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def handler_for(worker: object, message: Any) -> Callable[[Any, Any], Any] | None:
    """The ``handle_<Type>`` method of ``worker`` for ``message`` (the most specific type first), or None."""
    for klass in type(message).__mro__:
        handler = getattr(worker, f"handle_{klass.__name__}", None)
        if handler is not None:
            return handler
    return None


def bypassed_handler(worker: object, message: Any, overrides_on_message: bool) -> str:
    """What to tell the user when ``message`` went unhandled although ``worker`` has a ``handle_<Type>`` for it that
    its own ``on_message`` (``overrides_on_message``) never passed it on to; ``""`` when that is not the case."""
    handler = handler_for(worker, message) if overrides_on_message else None
    if handler is None or not callable(handler):
        return ""
    return (f"{getattr(handler, '__name__', 'its handle_ method')} exists, but {type(worker).__name__}.on_message "
            "does not pass the message on to it (end on_message with `return super().on_message(message, sender)`)")


__all__ = ["bypassed_handler", "handler_for"]
