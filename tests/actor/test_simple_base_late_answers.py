"""The in-process base never hands an ask the answer of another.

thespian's simple base has one external endpoint, and its ask returns the next message that reaches it. So a worker
that held a request past its ask's timeout and answered later (a group commit, a parked request) handed that answer
to the *next* ask, whose own answer then went to the one after — every later ask off by one, for good, until the
system was shut down (whose own ask for the trees then got a worker's answer). On this base each ask now carries a
ref (a worker's request inside ``Tagged``, a supervisor's ``AdminCall.ref``) and takes only the answer with its ref;
an answer whose ask timed out is dropped by whichever ask meets it. Real in-process thespian systems.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from thespian.actors import WakeupMessage

from ouroactors import Worker, supervisor, worker
from ouroactors.core.errors import ActorCrashed, AskTimeout
from ouroactors.supervision.calls import Tagged, TaggedAnswer


class Holder(Worker):
    """Holds every ``hold`` (answers it when told ``release``); echoes anything else; ``boom`` crashes it."""

    def on_start(self) -> None:
        self.held: list[Any] = []

    def on_message(self, message: Any, sender: Any) -> Any:
        if message == "hold":
            self.held.append(self.asker_of(sender))
            return None
        if message == "release":
            for n, asker in enumerate(self.held):
                self.answer_asker(asker, f"late answer {n}")
            self.held.clear()
            return "released"
        if message == "boom":
            raise RuntimeError("asked to crash")
        if isinstance(message, tuple) and message[0] == "later":  # answered by a timer of its own, after delay s
            self.wakeupAfter(timedelta(seconds=message[1]), payload=(self.asker_of(sender), message[2]))
            return None
        if isinstance(message, WakeupMessage):
            asker, answer = message.payload
            self.answer_asker(asker, answer)
            return None
        return ("echo", message)


TREE = supervisor("app", [worker("h", Holder), worker("other", Holder)])


@pytest.fixture
def system(simple_system: Any) -> Any:
    simple_system.start_tree(TREE)
    return simple_system


def test_a_late_answer_goes_to_no_later_ask(system: Any) -> None:
    with pytest.raises(AskTimeout):
        system.ask("app/h", "hold", timeout=0.1)
    assert system.ask("app/h", "release") == "released"  # was: 'late answer 0'
    assert system.ask("app/h", "x") == ("echo", "x")  # was: 'released'
    assert system.ask("app/other", "y") == ("echo", "y")
    assert [c.id for c in system.which_children("app")] == ["other", "h"]  # a supervisor's answer is its own too


def test_late_answers_of_many_timed_out_asks_are_all_dropped(system: Any) -> None:
    ref = system.ref("app/h")
    for _ in range(3):
        with pytest.raises(AskTimeout):
            ref.ask("hold", timeout=0.05)
    assert ref.ask("release") == "released"
    assert system.ask("app/other", "z") == ("echo", "z")
    assert system.trees()[0].name == "app"  # the tree host's answer (it carries no ref) is still taken


def test_a_late_answer_is_dropped_by_an_ask_to_another_actor(system: Any) -> None:
    with pytest.raises(AskTimeout):
        system.ask("app/h", ("later", 0.2, "h's late answer"), timeout=0.05)
    # h's timer answers while this ask waits for other's own, later one (the base runs timers while it is asked)
    assert system.ask("app/other", ("later", 0.4, "other's answer"), timeout=5) == "other's answer"
    assert system.ask("app/h", "again") == ("echo", "again")


def test_a_crash_still_answers_the_ask_that_caused_it(system: Any) -> None:
    with pytest.raises(ActorCrashed, match="asked to crash"):
        system.ask("app/h", "boom", timeout=5)
    system.wait_for("started", "app/h")
    assert system.ask("app/h", "back") == ("echo", "back")


def test_a_request_the_caller_tagged_itself_gets_its_tagged_answer(system: Any) -> None:
    answer = system.ask("app/h", Tagged("mine-1", "x"))
    assert answer == TaggedAnswer("mine-1", ("echo", "x"))
