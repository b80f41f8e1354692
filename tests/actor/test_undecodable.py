"""A message that names a class the receiving process cannot import arrives as an error naming it, at once.

Before, thespian's transport failed inside ``pickle.loads`` and dropped the frame: an ask whose answer was of a type
the asker cannot import waited out its whole timeout for "no answer", although the worker had answered at once; a
request the worker could not decode went unanswered the same way. Now the frame arrives as
``supervision.calls.Undecodable`` naming the classes: the ask raises ``UnsendableAnswer``, the worker answers
``BadRequest``.
"""

from __future__ import annotations

import pickle
import sys
import time

import pytest

from ouroactors import UnsendableAnswer, supervisor, worker
from ouroactors.core.errors import BadRequest
from ouroactors.supervision.calls import Tagged, TaggedAnswer, Undecodable
from ouroactors.system._decoding import loads

from .ghosts import GHOSTS, ghost_module

ASK_S = 20.0
PROMPT_S = 5.0  # at once, well within the ask's timeout


@pytest.fixture
def ghost():
    """``ghost_here.Ghost``: importable until the test forgets it (as if only another process had it)."""
    module = ghost_module("ghost_here")
    yield module.Ghost
    sys.modules.pop("ghost_here", None)


def test_a_frame_naming_a_class_nobody_here_can_import_decodes_to_undecodable(ghost) -> None:
    answered = pickle.dumps(("sender", TaggedAnswer("ask-1", {"items": [ghost(1)]})))
    told = pickle.dumps(("sender", ghost(2)))
    asked = pickle.dumps(("sender", Tagged("ask-2", ghost(3))))
    plain = pickle.dumps(("sender", TaggedAnswer("ask-3", {"n": 1})))
    sys.modules.pop("ghost_here")
    with pytest.raises(ModuleNotFoundError):
        pickle.loads(answered)  # what thespian's transport met, and dropped the frame on
    sender, message = loads(answered)
    assert sender == "sender" and isinstance(message, TaggedAnswer) and message.ref == "ask-1"
    assert message.value == Undecodable(("ghost_here.Ghost (ModuleNotFoundError: No module named 'ghost_here')",))
    assert loads(told)[1] == message.value
    again = loads(asked)[1]
    assert isinstance(again, Tagged) and again.ref == "ask-2" and isinstance(again.request, Undecodable)
    assert loads(plain) == pickle.loads(plain)  # the fast path: as before


def test_what_is_not_a_missing_class_fails_as_before(ghost) -> None:
    with pytest.raises(pickle.UnpicklingError):
        loads(b"\x80\x05garbage")
    with pytest.raises(ModuleNotFoundError):  # not a frame (sender, message): nothing to stand in for
        data = pickle.dumps(ghost(1))
        sys.modules.pop("ghost_here")
        loads(data)


@pytest.mark.multiproc
def test_an_answer_the_asker_cannot_import_is_an_unsendable_answer_at_once(actor_system) -> None:
    actor_system.start_tree(supervisor("app", [worker("g", GHOSTS)]))
    began = time.monotonic()
    with pytest.raises(UnsendableAnswer) as lost:
        actor_system.ask("app/g", "ghost", timeout=ASK_S)
    assert time.monotonic() - began < PROMPT_S
    assert lost.value.path == "app/g" and lost.value.answer_type == "ghost_of_the_worker.Ghost"
    assert "this process cannot import what it names: ghost_of_the_worker.Ghost" in str(lost.value)
    assert actor_system.ask("app/g", "other", timeout=ASK_S) == ("got", "str")  # the worker carries on


@pytest.mark.multiproc
def test_a_request_the_worker_cannot_import_is_refused_at_once(actor_system, ghost) -> None:
    actor_system.start_tree(supervisor("app", [worker("g", GHOSTS)]))  # forked before ghost_here existed
    began = time.monotonic()
    with pytest.raises(BadRequest) as refused:
        actor_system.ask("app/g", ghost(1), timeout=ASK_S)
    assert time.monotonic() - began < PROMPT_S
    assert "could not be decoded here: ghost_here.Ghost (ModuleNotFoundError" in str(refused.value)
