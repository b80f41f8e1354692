"""A tell expects nothing back: what the told actor sends its caller never becomes the answer to a later ask.

An ask through the handle takes the next message that reaches its endpoint. Before tells had an endpoint of their
own, an actor that answers every message (or a crash report to the teller) put one stray message there, and every
later ask on the handle got the answer meant for the ask before it: a ``which_child`` got a list, ``trees()`` a
``ChildInfo``, for good.
"""

from __future__ import annotations

import pytest

from ouroactors import supervisor, worker

from .helpers import ECHO

pytestmark = pytest.mark.multiproc


@pytest.mark.parametrize("base", ["multiproc", "simple"])
def test_what_a_tell_provokes_never_answers_a_later_ask(actor_system_factory, base):
    system = actor_system_factory(base)
    system.start_tree(supervisor("r", [worker("a", ECHO), worker("b", ECHO)], intensity=10))
    mark = system.mark()
    system.tell("r/a", "told")  # Echo answers every message, to whoever sent it
    system.tell("r/a", "crash")  # and a crash is reported to the sender of the message that caused it
    system.wait_for("exited", "r/a", after=mark)  # both were delivered and handled
    for n in range(3):
        assert system.ask("r/b", f"asked-{n}") == f"asked-{n}"
    assert system.child_info("r/b").status == "running"  # the supervisor's answer, not a stray one
    ref = system.ref("r/b")
    ref.tell("told through a ref")
    assert ref.ask("asked through a ref") == "asked through a ref"
    assert [tree.name for tree in system.trees()] == ["r"]


@pytest.mark.parametrize("base", ["multiproc", "simple"])
def test_odd_told_values_change_no_later_answer(actor_system_factory, base):
    """Attacks on the tell path: None, a non-finite number, a huge int, an over-long string, bytes — each is
    delivered (Echo answers it to the teller) and none becomes the answer to the next ask."""
    system = actor_system_factory(base)
    system.start_tree(supervisor("r", [worker("a", ECHO), worker("b", ECHO)], intensity=10))
    for value in (None, float("nan"), float("inf"), 10**400, "k" * 1_000_000, b"\0" * 4096):
        system.tell("r/a", value)
        assert system.ask("r/b", "after") == "after", repr(value)[:40]
    assert system.ask("r/a", "still here") == "still here"


def test_a_tell_after_an_isolated_view_was_used_still_goes_out(actor_system):
    """The fault harness's private views (``faults._asking.isolated``) were copies of the handle that closed, on the
    way out, the endpoint the handle tells through: the handle's next tell failed deep in thespian
    (``'TCPTransport' object has no attribute '_transmitIntents'``)."""
    from ouroactors.faults._asking import isolated

    actor_system.start_tree(supervisor("app", [worker("c", "ouroactors.examples.workers:Counter")]))
    actor_system.tell("app/c", "incr")  # the handle's teller exists from here on
    with isolated(actor_system) as view:
        assert view.ask("app/c", "get") == 1
        view.tell("app/c", "incr")  # through the view's own teller, closed with the view
    actor_system.tell("app/c", "incr")
    assert actor_system.ask("app/c", "get") == 3
