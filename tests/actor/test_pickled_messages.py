"""On the in-process base, messages can travel pickled, as between processes (``pickle_messages``).

Before, a unit test on ``simple_system`` handed every message over as the same object: a worker answering a lambda
passed there and failed on multiproc (``UnsendableAnswer``), a request holding a lock went through, and a receiver
saw what its sender changed after sending. The plugin's ``simple_system`` and ``simulated_system`` now carry messages
pickled (``system._pickling``); ``ActorSystem.start("simple")`` without the option keeps handing objects over.
"""

from __future__ import annotations

import threading

import pytest

from ouroactors import ActorSystem, ActorSystemError, UnsendableAnswer, supervisor, worker

from .keeping import KEEPER

TREE = supervisor("app", [worker("k", KEEPER)])


def test_an_answer_that_cannot_travel_fails_in_a_unit_test_as_on_multiproc(simple_system) -> None:
    simple_system.start_tree(TREE)
    with pytest.raises(UnsendableAnswer) as lost:
        simple_system.ask("app/k", "lambda", timeout=10)
    assert lost.value.path == "app/k" and lost.value.answer_type == "function"
    assert simple_system.ask("app/k", "kept", timeout=10) == ("holds", None)  # the worker carries on


def test_a_request_that_cannot_travel_fails_where_it_is_sent(simple_system) -> None:
    simple_system.start_tree(TREE)
    with pytest.raises(TypeError, match=r"cannot pickle '_thread\.lock' object"):
        simple_system.ask("app/k", ("keep", threading.Lock()), timeout=10)
    with pytest.raises(TypeError, match=r"cannot pickle '_thread\.lock' object"):
        simple_system.tell("app/k", ("keep", threading.Lock()))
    assert simple_system.ask("app/k", "kept", timeout=10) == ("holds", None)  # nothing arrived


def test_the_receiver_works_on_a_copy(simulated_system) -> None:
    simulated_system.start_tree(TREE)
    items = [1, 2]
    assert simulated_system.ask("app/k", ("keep", items), timeout=10) == "kept"
    items.append(3)  # after the send: the worker's copy does not change
    _, held = simulated_system.ask("app/k", "kept", timeout=10)
    assert held == [1, 2] and held is not items


def test_without_the_option_the_in_process_base_hands_objects_over(tmp_path) -> None:
    system = ActorSystem.start("simple", data_dir=tmp_path / "d")
    try:
        system.start_tree(TREE)
        items = [1, 2]
        system.ask("app/k", ("keep", items), timeout=10)
        items.append(3)
        assert system.ask("app/k", "kept", timeout=10) == ("holds", [1, 2, 3])
        assert callable(system.ask("app/k", "lambda", timeout=10))
    finally:
        system.shutdown()


def test_pickle_messages_is_for_the_in_process_base_only(tmp_path) -> None:
    with pytest.raises(ActorSystemError, match="pickle_messages=True is for the simple base"):
        ActorSystem.start("multiproc", data_dir=tmp_path / "d", pickle_messages=True)
