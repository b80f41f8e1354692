"""A request is answered once, and an ask never takes another's answer.

Found by ``ouroactors chaos --raises`` (simulated): the ledger's group commit answered its askers "outcome unknown"
when a commit raised, and the worker's crash then answered the request being handled a second time
(``ActorCrashed``). On the multiproc base that second answer reached the handle's endpoint after its ask had
returned, and the handle's *next* ask took it as its own; on the in-process base an ask to the tree host (which tags
nothing) took it — the harness failed with "'TaggedAnswer' object is not iterable". Now a worker that crashes after
answering the request in hand does not answer it again, and an ask that carries no ref never takes an answer that
carries one.
"""

from __future__ import annotations

from typing import Any

import pytest

from ouroactors import supervisor, worker

from .answered_once import ANSWERED_ONCE, AnswersThenFails


@pytest.mark.multiproc
def test_a_worker_that_crashes_after_answering_does_not_answer_again(actor_system: Any) -> None:
    actor_system.start_tree(supervisor("app", [worker("w", ANSWERED_ONCE), worker("other", ANSWERED_ONCE)]))
    mark = actor_system.mark()
    assert actor_system.ask("app/w", "answer then fail", timeout=10) == "answered"
    actor_system.wait_for("exited", "app/w", after=mark)
    # was ActorCrashed: the crash's second answer to the first ask, taken by this one
    assert actor_system.ask("app/other", "next", timeout=10) == ("echo", "next")
    assert actor_system.trees()[0].name == "app"


def test_the_same_in_process(simple_system: Any) -> None:
    simple_system.start_tree(supervisor("app", [worker("w", AnswersThenFails), worker("other", AnswersThenFails)]))
    assert simple_system.ask("app/w", "answer then fail", timeout=10) == "answered"
    assert simple_system.trees()[0].name == "app"  # was: TypeError, the crash's TaggedAnswer taken for the trees
    assert simple_system.ask("app/other", "next", timeout=10) == ("echo", "next")


def test_an_ask_that_carries_no_ref_takes_no_tagged_answer(simple_system: Any) -> None:
    """Whoever answered twice (here a worker on purpose), the second answer is no answer to the tree host's ask."""
    simple_system.start_tree(supervisor("app", [worker("w", AnswersThenFails)]))
    assert simple_system.ask("app/w", "twice", timeout=10) == "first"
    assert simple_system.trees()[0].name == "app"  # was: TypeError ('TaggedAnswer' object is not iterable)
    assert simple_system.ask("app/w", "x", timeout=10) == ("echo", "x")


@pytest.mark.multiproc
def test_a_second_answer_to_one_request_is_no_answer_to_the_next_ask(actor_system: Any) -> None:
    """Multiproc handles tag their asks of workers too: whoever answers one request twice (here a worker on purpose;
    the session directory's "outcome unknown" after an answer it did not hear of), the second answer carries the first
    ask's ref and the next ask on the endpoint does not take it. It did: the handle's asks went bare there."""
    actor_system.start_tree(supervisor("app", [worker("w", ANSWERED_ONCE)]))
    assert actor_system.ask("app/w", "twice", timeout=10) == "first"
    assert actor_system.ask("app/w", "x", timeout=10) == ("echo", "x")  # was "second"
    assert actor_system.ask("app/w", "y", timeout=10) == ("echo", "y")
