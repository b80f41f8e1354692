"""A session command is answered as it was asked: tagged with the caller's ref, by whoever answers it.

A handle tags every ask of a worker (:class:`~ouroactors.supervision.calls.Tagged`), so that an answer meant for
another of its asks — a second answer to one request, a late one — is not taken for this one's. A command is
answered by the coordinator the directory forwards it to, or by the directory itself when its coordinator is gone
(:mod:`ouroactors.runtime.coordinator.in_flight`): the directory passes the caller's ref on (``ForSession.tag``) and
every one of those answers carries it. Before, they went bare: the directory's "outcome unknown" after an answer
whose ``answered`` notice was lost reached the caller's next ask as its answer."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from thespian.actors import ActorAddress

from ouroactors.core.errors import ActorCrashed
from ouroactors.runtime.coordinator.directory import Sessions as Directory
from ouroactors.runtime.coordinator.in_flight import Coordinator, InFlight, Next
from ouroactors.runtime.coordinator.messages import ForSession, SendMessage, Taken
from ouroactors.supervision import reasons
from ouroactors.supervision.calls import Asker, Tagged, TaggedAnswer
from ouroactors.supervision.owned import set_owned

from .actor_support import three_word_session, wait_for


class Recording:
    """A handle's endpoint that keeps what it sent and what came back (the real endpoint does the work)."""

    def __init__(self, endpoint: Any) -> None:
        self.endpoint = endpoint
        self.seen: list[tuple[Any, Any]] = []
        self.pending: Any = None  # the last message asked, until something comes back

    def ask(self, address: Any, message: Any, timeout: float) -> Any:
        self.pending = message
        return self._kept(self.endpoint.ask(address, message, timeout))

    def listen(self, timeout: float) -> Any:  # an ask that waits past its first slice gets its answer here
        return self._kept(self.endpoint.listen(timeout))

    def _kept(self, answer: Any) -> Any:
        if answer is not None and self.pending is not None:
            self.seen.append((self.pending, answer))
            self.pending = None
        return answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self.endpoint, name)


@pytest.mark.multiproc
def test_a_command_and_a_creation_are_answered_with_the_callers_ref(actor_system, tmp_path, monkeypatch):
    sessions = three_word_session(actor_system, tmp_path)
    recording = Recording(actor_system._endpoint)
    monkeypatch.setattr(actor_system, "_asker", recording)
    sessions.send("s1", "go", event_id="m-1")  # answered by the coordinator
    sessions.new("s2", {"sandbox": {"mode": "none"}})  # answered by the directory, from a job
    wait_for("the turn settled", lambda: "turn_settled" in [e.kind for e in sessions.events("s1")], timeout=30)
    [(sent, answer), (created, made)] = [(m, a) for m, a in recording.seen if isinstance(m, Tagged)
                                         and type(getattr(m.request, "payload", m.request)).__name__
                                         in ("SendMessage", "NewSession")]
    assert isinstance(answer, TaggedAnswer) and answer.ref == sent.ref, answer  # was the bare Done
    assert type(answer.value).__name__ == "Done"
    assert isinstance(made, TaggedAnswer) and made.ref == created.ref and made.value.session_id == "s2"


def directory() -> tuple[Any, list[tuple[Any, Any]]]:
    """A directory's shell with no process: what it sends is recorded."""
    sent: list[tuple[Any, Any]] = []
    d = Directory.__new__(Directory)
    d.send = lambda address, message: sent.append((address, message))  # type: ignore[method-assign]
    d.wakeupAfter = lambda *args, **kwargs: None  # type: ignore[method-assign]
    set_owned(d, "path", "agent/sessions")  # what its supervisor sets (context: None, as before it starts)
    set_owned(d, "authorities", {"coordinator": SimpleNamespace(path="agent/coordinator")})
    d.keys, d.serving = {"s1": "session#1"}, {}
    d.in_flight, d.look_armed = InFlight(), None
    return d, sent


def test_the_directory_passes_the_callers_ref_on_and_answers_with_it_itself():
    d, sent = directory()
    caller, coordinator = ActorAddress("caller"), ActorAddress("coordinator#1")
    request = SendMessage("s1", "go", "alice", "m-1")
    d._send_command(Asker(caller, "ask-ab12-7"), request, coordinator, 3)
    [(to, forwarded)] = sent
    assert to == coordinator and forwarded == ForSession(caller, request, None, forwarded.ticket, "ask-ab12-7")
    # the coordinator took it and is gone before it answered: the directory answers "unknown", with the ref
    d.in_flight.taken(forwarded.ticket, "s1", coordinator, False)
    entry = d.in_flight.entries[forwarded.ticket]
    d._carry_out(Next.UNKNOWN, entry, Coordinator(True, ActorAddress("coordinator#2"), 4), None)
    assert sent[-1][0] == caller and isinstance(sent[-1][1], TaggedAnswer) and sent[-1][1].ref == "ask-ab12-7"
    assert isinstance(sent[-1][1].value, ActorCrashed)
    # not taken, and the next incarnation runs: forwarded there with the ref still on it
    d._send_command(Asker(caller, None), request, coordinator, 3)  # a bare one stays bare
    bare = sent[-1][1]
    assert bare.tag is None
    d._carry_out(Next.GIVE_UP, d.in_flight.entries[bare.ticket], Coordinator(False), None)
    assert sent[-1][0] == caller and not isinstance(sent[-1][1], TaggedAnswer)


def test_a_crashed_coordinator_answers_a_command_with_its_callers_ref():
    from ouroactors.runtime.coordinator.actor import Coordinator as CoordinatorActor

    sent: list[tuple[Any, Any]] = []
    c = CoordinatorActor.__new__(CoordinatorActor)
    c.send = lambda address, message: sent.append((address, message))  # type: ignore[method-assign]
    caller, directory_address = ActorAddress("caller"), ActorAddress("directory")
    c.session_id, c.started_by = "s1", directory_address
    set_owned(c, "path", "agent/coordinator/session#1")
    refusal = ActorCrashed(c.path, "crash(...)")
    c.refused(ForSession(caller, SendMessage("s1", "go", "alice", "m-1"), tag="ask-ab12-9"), refusal)
    assert sent == [(caller, TaggedAnswer("ask-ab12-9", refusal))]
    # and at its stop, a command it took and had not answered
    sent.clear()
    c.callers, c.begun = [(Asker(caller, "ask-ab12-10"), 5)], {5}
    c._answer_callers(reasons.crash(RuntimeError("boom")))
    assert sent[0][0] == caller and isinstance(sent[0][1], TaggedAnswer) and sent[0][1].ref == "ask-ab12-10"
    assert sent[1] == (directory_address, Taken("s1", 5, answered=True))


@pytest.mark.parametrize(("tag", "problem"), [("", "1 to 128"), ("x" * 129, "1 to 128"), (7, "must be a str")])
def test_a_forward_whose_tag_is_no_ref_is_refused_at_the_coordinators_door(tag, problem):
    from ouroactors.core.boundary import check_message
    from ouroactors.core.errors import BadRequest

    with pytest.raises(BadRequest, match=problem) as refused:
        check_message(ForSession(ActorAddress("caller"), SendMessage("s1", "go", "alice", "m-1"), tag=tag))
    assert refused.value.field == "tag"


def test_a_returned_command_is_forwarded_to_the_replacement_or_answered_at_the_directorys_stop():
    """A coordinator that crashed returns the commands that never began with it (``Taken.returned``): the directory
    forwards each to the replacement at its next look, and if it stops first (the crash escalated: the directory is
    restarted too, and its replacement knows nothing of them) it answers them "send it again" — not a command a
    live coordinator may still run."""
    d, sent = directory()
    caller, crashed = ActorAddress("caller"), ActorAddress("coordinator#1")
    d._send_command(Asker(caller, "ask-ab12-11"), SendMessage("s1", "go", "alice", "m-1"), crashed, 3)
    d._send_command(Asker(caller, "ask-ab12-12"), SendMessage("s1", "again", "alice", "m-2"), crashed, 3)
    first, _live = (m.ticket for _, m in sent)
    assert d._taken(Taken("s1", first, returned=True), ActorAddress("stranger")) is not None  # only its coordinator
    assert d._taken(Taken("s1", first, returned=True), crashed) is None
    entry = d.in_flight.entries[first]
    assert entry.dead and not entry.taken
    from ouroactors.runtime.coordinator.in_flight import decide
    assert decide(entry, Coordinator(True, ActorAddress("coordinator#2"), 4), 0.0) is Next.FORWARD
    d.followers = []
    sent.clear()
    d.on_stop(reasons.shutdown())
    assert [(to, m.ref, type(m.value).__name__) for to, m in sent] == [(caller, "ask-ab12-11", "DirectoryError")]
    assert "send it again" in str(sent[0][1].value) and d.in_flight.entries == {}  # the live one (m-2) left alone
