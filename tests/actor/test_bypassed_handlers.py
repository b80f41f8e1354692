"""``handle_<Type>`` methods that an overridden ``on_message`` never passes messages on to are named.

A user's first periodic worker defines ``handle_WakeupMessage`` and an ``on_message`` for its requests; the default
``on_message`` is what dispatches to ``handle_<Type>``, so the timer went to ``unhandled`` and the worker logged only
"no handler for WakeupMessage" — next to the handler it had — and answered the timer to itself. Now the warning and
the :class:`~ouroactors.core.errors.UnhandledMessage` answer name the bypassed handler and the fix; an own timer
nobody handles is not answered to the worker itself.
"""

from __future__ import annotations

import logging
import pickle

import pytest

from ouroactors import supervisor, worker
from ouroactors.core.errors import UnhandledMessage
from ouroactors.supervision.dispatch import bypassed_handler, handler_for

from .bypassing import PASSING_TICKER, TICKER, PassingTicker, Tick, Ticker
from .helpers import wait_until


def test_the_bypassed_handler_is_named_only_when_on_message_is_overridden() -> None:
    ticker = Ticker.__new__(Ticker)
    assert handler_for(ticker, Tick()) is not None and handler_for(ticker, "x") is None
    said = bypassed_handler(ticker, Tick(), overrides_on_message=True)
    assert said.startswith("handle_Tick exists, but Ticker.on_message does not pass the message on to it")
    assert "super().on_message(message, sender)" in said
    assert bypassed_handler(ticker, Tick(), overrides_on_message=False) == ""
    assert bypassed_handler(ticker, "no handler", overrides_on_message=True) == ""


def test_an_unhandled_message_with_its_hint_travels_between_processes() -> None:
    error = UnhandledMessage("app/t", "Tick", "handle_Tick exists, but ...")
    back = pickle.loads(pickle.dumps(error))
    assert (back.path, back.message_type, back.hint, str(back)) == (error.path, "Tick", error.hint, str(error))
    assert str(UnhandledMessage("app/t", "Tick")) == "app/t has no handler for Tick"  # as before without one


def test_the_answer_and_the_warning_name_the_bypassed_handler(simple_system, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="ouroactors.worker")
    simple_system.start_tree(supervisor("app", [worker("t", TICKER)]))
    with pytest.raises(UnhandledMessage) as unhandled:
        simple_system.ask("app/t", Tick(), timeout=10)
    assert "handle_Tick exists, but Ticker.on_message does not pass the message on to it" in str(unhandled.value)
    def warned() -> bool:  # (an ask drives the in-process base: its timers fire while it runs)
        simple_system.ask("app/t", "ticks", timeout=10)
        return any("no handler for WakeupMessage; handle_WakeupMessage exists" in r.getMessage()
                   for r in caplog.records)

    wait_until(warned, timeout=10)
    # the timer was not answered to the worker itself (which logged "no handler for UnhandledMessage" before)
    assert not any("no handler for UnhandledMessage" in r.getMessage() for r in caplog.records)


@pytest.mark.multiproc
def test_a_worker_that_passes_messages_on_runs_its_handlers(actor_system) -> None:
    actor_system.start_tree(supervisor("app", [worker("t", PASSING_TICKER)]))
    assert actor_system.ask("app/t", Tick(2), timeout=10) == 2
    wait_until(lambda: actor_system.ask("app/t", "ticks", timeout=10)["timers"] >= 1, timeout=10)
    assert PassingTicker.__mro__[1] is Ticker
