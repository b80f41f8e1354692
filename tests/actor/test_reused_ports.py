"""An actor's address is only a TCP port: once the actor is dead, whoever binds that port next receives what is sent
to it. When that is one of the handle's own endpoints, thespian delivers the message back to the handle.

Found by a runtime chaos campaign (seed 36098 of ``--first-seed 36000``): a runtime killed under it freed its port,
the harness's next private endpoint was given that port, and its ``ask(runtime, RuntimeStatusRequest())`` returned
the ``RuntimeStatusRequest`` itself as the answer. An ask to a stale address must behave as an ask to a dead actor
(nothing at once, then the path is resolved again), and a tell to one must not land in the handle's own inbox, where
the next ask would take it as its answer.

The kernel's choice of port cannot be forced from a test, so each test puts the handle's own endpoint address where
the dead actor's address would be: in the handle's address cache, or in a ref.
"""

from __future__ import annotations

import pytest

from ouroactors import supervisor, worker
from ouroactors.core.errors import AskTimeout, NoSuchActor

pytestmark = pytest.mark.multiproc

COUNTER = "ouroactors.examples.workers:Counter"


def own_address(system):
    """The address of the endpoint the handle asks through (thespian's transport knows it)."""
    return system._endpoint._systemBase.transport.myAddress


@pytest.fixture
def counting(actor_system):
    actor_system.start_tree(supervisor("app", [worker("counter", COUNTER)]))
    assert actor_system.ask("app/counter", "get") == 0  # the path's address is cached now
    return actor_system


def test_an_ask_through_a_stale_address_that_is_now_the_handles_own_is_answered_by_the_actor(counting):
    counting._addresses["app/counter"] = own_address(counting)  # the cached address's port is now the handle's
    assert counting.ask("app/counter", "incr") == 1  # not "incr": the request is never sent back to its asker
    assert counting.ask("app/counter", "get") == 1


def test_a_ref_whose_port_is_now_the_handles_own_gets_no_answer_rather_than_its_own_request(counting):
    ref = counting.ref("app/counter")
    ref.address = own_address(counting)
    with pytest.raises(NoSuchActor, match=r"app/counter .*is gone: the ask came back undelivered; nothing was asked"):
        ref.ask("incr", timeout=1.0)  # (the port is the handle's own: the actor that had it is dead)
    assert counting.ask("app/counter", "get") == 0  # nothing was delivered to the counter either


def test_a_tell_through_a_stale_address_never_becomes_the_answer_to_a_later_ask(counting):
    counting._addresses["app/counter"] = own_address(counting)
    counting.tell("app/counter", "incr")  # sent to the port the handle asks through, it would wait there
    counting._addresses.pop("app/counter")
    assert counting.ask("app/counter", "get") == 0  # the counter's answer, not the stray "incr"


def test_a_stop_request_for_another_child_is_ignored_and_the_supervisors_own_still_stops_it(counting):
    """A supervisor's stop request names the child it is for: sent to a dead child's address, it reaches whoever
    holds that port now, which must not stop in the dead child's place."""
    from ouroactors.supervision import reasons
    from ouroactors.supervision.protocol import StopRequest

    assert StopRequest(reasons.shutdown(), "counter", 3).names_another("counter", 4)
    assert not StopRequest(reasons.shutdown()).names_another("counter", 4)  # a sender that names nobody
    counting.ask("app/counter", "incr")
    mark = counting.mark()
    counting.tell("app/counter", StopRequest(reasons.shutdown(), "some-other-child", 1))
    assert counting.ask("app/counter", "get") == 1  # handled after the stop request: still running, same state
    counting.events.poll()
    assert [e.kind for e in counting.events.seen[mark:] if e.path == "app/counter"] == []
    counting.terminate_child("app", "counter")  # the supervisor's own request names it: it stops
    assert counting.child_info("app/counter").status != "running"


def test_a_heartbeat_for_another_child_goes_unanswered_and_a_lease_holders_heartbeat_is_answered(counting):
    """A supervisor's heartbeat names its remote child: answered by whoever now holds a dead child's port, it kept
    the dead child alive in its supervisor's eyes. The workspace's and the ledger's heartbeat to a lease holder
    (incarnation 0) asks whoever is there, and is answered as before."""
    from ouroactors.supervision.protocol import Ping, Pong

    assert counting.ask("app/counter", Ping("workspace", 0), timeout=5) == Pong("workspace", 0)
    with pytest.raises(AskTimeout):
        counting.ask("app/counter", Ping("some-other-child", 7), timeout=0.5)
    assert counting.ask("app/counter", "get") == 0  # still serving


def test_a_ref_whose_port_went_to_another_worker_is_refused_there_not_answered(actor_system):
    """A ref names one incarnation: what it sends is stamped with the generation the worker had when the ref was
    made, so another worker at the dead one's port (here: the address of a sibling) refuses it."""
    from ouroactors.core.errors import StaleGeneration

    actor_system.start_tree(supervisor("app", [worker("a", COUNTER), worker("b", COUNTER, kwargs={"start": 41})]))
    ref_a = actor_system.ref("app/a")
    assert ref_a.ask("incr") == 1 and ref_a.generation == actor_system.child_info("app/a").generation
    ref_a.address = actor_system.resolve("app/b")  # a's port, given to b
    with pytest.raises(StaleGeneration):
        ref_a.ask("incr")  # before: b counted it and answered 42
    ref_a.tell("incr")  # refused there too
    assert actor_system.ask("app/b", "get") == 41 and actor_system.ask("app/a", "get") == 1
    assert actor_system.ref("app/b").ask("incr") == 42  # a ref made now is b's own


def test_an_ask_by_path_whose_cached_port_went_to_another_worker_is_refused_there_and_asked_again(actor_system):
    """The handle's address cache, like a ref: an ask by path goes addressed to the generation the worker had when
    the path was resolved. Another worker at the cached port refuses it, and the path is resolved again."""
    actor_system.start_tree(supervisor("app", [worker("a", COUNTER), worker("b", COUNTER, kwargs={"start": 41})]))
    assert actor_system.ask("app/a", "get") == 0 and actor_system.ask("app/b", "get") == 41
    actor_system._addresses["app/a"] = actor_system._addresses["app/b"]  # a's port, given to b
    assert actor_system.ask("app/a", "incr") == 1  # refused by b, asked again where a is
    assert actor_system.ask("app/b", "get") == 41  # b counted nothing


def test_an_ask_by_path_while_the_supervisor_still_names_a_port_another_worker_holds_is_never_asked_of_it(
        actor_system, monkeypatch):
    """The window before a supervisor notices its worker died: it still reports the dead worker's address and
    generation, and another worker holds that port. That worker refuses the addressed ask; asking it again bare (as
    for a worker whose own generation moved on in place) would have it act on the request. It is not asked."""
    from ouroactors.core.errors import NoSuchActor

    actor_system.start_tree(supervisor("app", [worker("a", COUNTER), worker("b", COUNTER, kwargs={"start": 41})]))
    assert actor_system.ask("app/a", "get") == 0 and actor_system.ask("app/b", "get") == 41
    b_address, a_info = actor_system.resolve("app/b"), actor_system.child_info("app/a")
    locate = actor_system._locate
    monkeypatch.setattr(actor_system, "_locate", lambda path, timeout=10.0, deadline=None: (b_address, a_info)
                        if path == "app/a" else locate(path, timeout, deadline))
    actor_system._addresses.pop("app/a")
    with pytest.raises(NoSuchActor, match="app/b"):
        actor_system.ask("app/a", "incr")  # before: asked bare of b, which counted it and answered 42
    assert actor_system.ask("app/b", "get") == 41
    monkeypatch.undo()
    assert actor_system.ask("app/a", "incr") == 1  # resolved again once the supervisor names a's own port


def test_an_ask_by_path_to_a_worker_whose_own_generation_moved_on_unheard_is_asked_again_bare(actor_system,
                                                                                              monkeypatch):
    """The other case of the same window: the worker at the port is the path's own, its generation moved on in
    place (an authority's does) and its supervisor has not heard yet. Its refusal names its own path, so the ask
    goes again bare and is answered."""
    import dataclasses

    actor_system.start_tree(supervisor("app", [worker("a", COUNTER)]))
    assert actor_system.ask("app/a", "get") == 0
    info = actor_system.child_info("app/a")
    unheard = dataclasses.replace(info, generation=info.generation - 1)  # what the supervisor still says
    locate = actor_system._locate
    monkeypatch.setattr(actor_system, "_locate", lambda path, timeout=10.0, deadline=None: (info.address, unheard)
                        if path == "app/a" else locate(path, timeout, deadline))
    actor_system._addresses.pop("app/a")
    assert actor_system.ask("app/a", "incr") == 1


def test_a_tell_by_path_whose_cached_port_went_to_another_worker_is_refused_there(actor_system):
    """A tell by path is addressed too: the worker that got the cached port drops it (nothing comes back to resend
    it, as with a dead actor's unbound port), and once the path is resolved again tells reach the worker again."""
    actor_system.start_tree(supervisor("app", [worker("a", COUNTER), worker("b", COUNTER, kwargs={"start": 41})]))
    assert actor_system.ask("app/a", "get") == 0 and actor_system.ask("app/b", "get") == 41
    actor_system._addresses["app/a"] = actor_system._addresses["app/b"]  # a's port, given to b
    actor_system.tell("app/a", "incr")
    assert actor_system.ask("app/b", "get") == 41  # before: b counted a's tell (42)
    actor_system._addresses.pop("app/a")  # resolved again (as an ask refused at the stale port does)
    actor_system.tell("app/a", "incr")
    assert actor_system.ask("app/a", "get") == 1


def test_an_addressed_message_meets_every_check_at_the_door_a_bare_one_does(counting):
    """The envelope is unwrapped before the door's checks: a timer forged inside it is refused as a bare one is."""
    from thespian.actors import WakeupMessage

    from ouroactors.core.errors import BadRequest
    from ouroactors.supervision.calls import Addressed

    generation = counting.child_info("app/counter").generation
    with pytest.raises(BadRequest, match="is a timer of the actor itself"):
        counting.ask("app/counter", Addressed(generation, WakeupMessage(0, "ouroactors:self-exit")))
    assert counting.ask("app/counter", "get") == 0  # not ended by the forged timer


@pytest.mark.parametrize("generation", ["x", float("nan"), float("inf"), 2**200, -(2**70), b"7", [7], True])
@pytest.mark.parametrize("envelope", ["Addressed", "Stamped"])
def test_an_envelope_whose_generation_is_no_64_bit_int_is_refused_typed_and_the_worker_lives(counting, envelope,
                                                                                             generation):
    """Attack on both envelopes' one field: a str, NaN or a list there crashed the worker (building the refusal's
    text raised), and its supervisor escalated — a whole tree brought down by one message."""
    from ouroactors.core.errors import BadRequest, StaleGeneration
    from ouroactors.supervision import calls

    with pytest.raises(BadRequest, match=rf"{envelope}\.generation"):
        counting.ask("app/counter", getattr(calls, envelope)(generation, "incr"))
    with pytest.raises(StaleGeneration, match="stamped nothing"):  # None: no generation named, stale as before
        counting.ask("app/counter", getattr(calls, envelope)(None, "incr"))
    assert counting.ask("app/counter", "get") == 0 and counting.child_info("app/counter").status == "running"


def test_odd_names_in_a_stop_request_or_heartbeat_change_nothing(counting):
    """Attack on the new naming fields: ints, NaN, lists, None where a key or an incarnation goes — each is a
    request for another child (ignored, unanswered), never a crash and never a stop."""
    from ouroactors.supervision import reasons
    from ouroactors.supervision.protocol import Ping, StopRequest

    for key, incarnation in ((123, "x"), ([1], float("nan")), ("counter", None), ("x", 2**200)):
        counting.tell("app/counter", StopRequest(reasons.shutdown(), key, incarnation))  # type: ignore[arg-type]
        counting.tell("app/counter", Ping(key, incarnation))  # type: ignore[arg-type]
    assert counting.ask("app/counter", "incr") == 1 and counting.child_info("app/counter").status == "running"


def test_requests_sent_to_a_dead_actors_port_that_is_now_the_handles_never_pass_for_an_answer(actor_system):
    """Whoever still sends to a dead actor (its supervisor, its coordinator, a runtime pushing output, a peer's
    ref) reaches a handle endpoint that got its port. Those are requests: an ask takes the answer, never one of
    them (before, the ask returned the first stray, an ``Addressed``)."""
    from .planted_stray import STRAY_SENDER

    actor_system.start_tree(supervisor("app", [worker("stray", STRAY_SENDER)]))
    assert actor_system.ask("app/stray", "stray", timeout=10) == "the answer"
    assert actor_system.ref("app/stray").ask("stray", timeout=10) == "the answer"


def test_pushes_and_tagged_answers_sent_to_a_dead_actors_port_never_pass_for_an_answer(actor_system):
    """The same for what reaches a dead supervisor (its children's pushes) and a dead coordinator (answers to its
    own asks, tagged with the refs it sent). Before, the ask returned the first of them, a ``ChildStarted``; and
    an answer tagged with another asker's ref was taken whole, wrapper and all."""
    from .planted_stray import STRAY_SENDER

    actor_system.start_tree(supervisor("app", [worker("stray", STRAY_SENDER)]))
    assert actor_system.ask("app/stray", "stray answers", timeout=10) == "the answer"
    assert actor_system.ref("app/stray").ask("stray answers", timeout=10) == "the answer"
