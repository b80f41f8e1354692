"""A handler defined with ``async def`` is refused when the tree is validated, naming it.

Before, ``async def on_message`` passed every check; each message returned a coroutine that never ran, and the asker
got ``UnsendableAnswer: app/a handled the request, but its answer (coroutine) cannot be sent`` — it had not handled
anything.
"""

from __future__ import annotations

from typing import Any

import pytest

from ouroactors import Worker, worker
from ouroactors.core.errors import SpecError
from ouroactors.supervision.actor_paths import async_handlers


class AsyncMessage(Worker):
    async def on_message(self, message: Any, sender: Any) -> Any:
        return message


class AsyncHandlers(Worker):
    async def handle_str(self, message: str, sender: Any) -> Any:
        return message

    async def on_stop(self, reason: Any) -> None:
        pass

    async def handle_int(self, message: int, sender: Any) -> Any:  # an async generator is no handler either
        yield message


class Plain(Worker):
    def on_message(self, message: Any, sender: Any) -> Any:
        return message


def test_async_hooks_and_handlers_are_named() -> None:
    assert async_handlers(AsyncMessage) == ["AsyncMessage.on_message"]
    assert async_handlers(AsyncHandlers) == ["AsyncHandlers.on_stop", "AsyncHandlers.handle_int",
                                             "AsyncHandlers.handle_str"]
    assert async_handlers(Plain) == []


def test_a_spec_naming_an_async_handler_is_refused_before_anything_starts() -> None:
    with pytest.raises(SpecError) as refused:
        worker("a", AsyncMessage)
    said = str(refused.value)
    assert "AsyncMessage.on_message is async (async def)" in said and "define them with def" in said
    assert worker("p", Plain).actor.endswith(":Plain")
