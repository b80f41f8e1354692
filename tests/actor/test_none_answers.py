"""A handler that returns None answers nothing: the ask that times out says so.

A user's first worker returns ``self.data.get(key)``; for a missing key that is None, which a worker never sends
(None is "no answer", so that a handler can answer later). Before, the ask waited out its timeout and said only
"no answer from app/kv within 5.0s" — the same words as a lost message or a hung worker. Now the worker tells a
handle's ask that its handler returned None without keeping an asker (:class:`~ouroactors.supervision.calls
.Unanswered`), and the timeout names that cause and the two ways out. The ask still waits: a worker may answer by a
raw ``send`` later, as a plain thespian actor does, and that answer is still taken.
"""

from __future__ import annotations

import threading

import pytest

from ouroactors import AskTimeout, supervisor, worker
from ouroactors.core.errors import BadRequest
from ouroactors.supervision.calls import Tagged

from .none_answers import LOOKUP

SHORT_S = 1.0


def _tree():
    return supervisor("app", [worker("kv", LOOKUP)])


def _returned_none(system) -> None:
    with pytest.raises(AskTimeout) as timed_out:
        system.ask("app/kv", ("get", "missing"), timeout=SHORT_S)
    said = str(timed_out.value)
    assert "no answer from app/kv within 1.0s" in said
    assert "its handler returned None, which sends no answer" in said
    assert "self.asker_of(sender)" in said


@pytest.mark.multiproc
def test_a_handler_that_returns_none_is_named_as_the_cause_of_the_timeout(actor_system):
    actor_system.start_tree(_tree())
    assert actor_system.ask("app/kv", ("get", "a")) == 1
    _returned_none(actor_system)
    with pytest.raises(AskTimeout) as by_ref:  # through a reference the same
        actor_system.ref("app/kv").ask(("get", "missing"), timeout=SHORT_S)
    assert "its handler returned None" in str(by_ref.value)
    assert actor_system.ask("app/kv", ("get", "a")) == 1  # the notice is nobody's answer later


def test_a_handler_that_returns_none_is_named_on_the_in_process_base(simple_system):
    simple_system.start_tree(_tree())
    _returned_none(simple_system)
    assert simple_system.ask("app/kv", ("get", "a")) == 1


def _answered_later(system, op: str, expected: str) -> None:
    got: list[object] = []
    asking = threading.Thread(target=lambda: got.append(system.ask("app/kv", (op, "k"), timeout=30)))
    asking.start()
    try:
        # the held ask is in the worker once a flush answers it; flush until it has been (no sleep: an ask each)
        while not system.ask("app/kv", "flush", timeout=30):
            pass
    finally:
        asking.join(30)
    assert got == [expected]


@pytest.mark.multiproc
@pytest.mark.parametrize(("op", "expected"), [("later", "kept answer"), ("raw later", "raw answer")])
def test_a_request_answered_later_is_still_answered(actor_system, op, expected):
    actor_system.start_tree(_tree())
    _answered_later(actor_system, op, expected)
    _returned_none(actor_system)  # and the next None is still named


@pytest.mark.multiproc
def test_a_tagged_requests_notice_must_be_a_bool(actor_system):
    actor_system.start_tree(_tree())
    address = actor_system._address_of("app/kv", None)
    answer = actor_system._ask_raw(address, Tagged("ask-x-1", ("get", "a"), notice="yes"), 10)  # type: ignore[arg-type]
    assert isinstance(answer, BadRequest)
    assert "notice" in str(answer) and "must be a bool" in str(answer)
