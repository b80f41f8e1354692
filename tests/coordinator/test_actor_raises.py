"""Code that raises in a runtime or a coordinator (``enumerate-sessions --action raise`` found each of these).

A turn whose code raises crashes its runtime, visibly and at once: the exception goes from the turn's trio
thread to the actor's thread through the outbox (thespian's ``send`` belongs to the actor's thread, and a message
sent from another thread was never delivered: the runtime went on serving with its turn gone and the session stayed
``running`` with nothing to run it). The coordinator then recovers the session on another runtime, which runs the
turn to the end. A runtime that crashes while opening is replaced as one that died there. A coordinator that crashes
in a command answers its caller ``ActorCrashed``, as a worker does: never the raw exception."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from ouroactors.core.errors import ActorCrashed
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule
from ouroactors.faults._asking import isolated
from ouroactors.runtime.coordinator.commands import CoordinatorError
from ouroactors.runtime.coordinator.in_flight import LOOK_AFTER_S
from ouroactors.sessions import SessionRejected, Sessions

from .actor_support import three_word_session, wait_for

pytestmark = [pytest.mark.multiproc]


def events(system) -> list[dict]:
    path = Path(system.data_dir) / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_turn_that_raises_crashes_its_runtime_and_the_session_goes_on_elsewhere(actor_system, tmp_path):
    sessions = three_word_session(actor_system, tmp_path)
    # the next runtime forked raises where its turn's loop is about to run (the first hit only)
    actor_system.arm_faults("agent/execution", FaultPlan((FaultRule("runtime.turn_started", FaultAction.RAISE,
                                                                     nth=1),), forks=1))
    sessions.send("s1", "go")
    crashed = wait_for("the runtime crashed", lambda: [
        e for e in events(actor_system) if e["kind"] == "exited" and e["path"].startswith("agent/execution/")
        and e["reason"]["kind"] == "crash"], timeout=15)
    assert "a turn of session s1 failed: FaultInjected" in crashed[0]["reason"]["message"]
    wait_for("the session completed", lambda: sessions.show("s1").state in ("suspended", "completed"), timeout=30)
    kinds = [e.kind for e in sessions.events("s1")]
    assert kinds.count("turn_settled") == 1, kinds
    opened = [e["path"] for e in events(actor_system) if e["kind"] == "runtime_opened"]
    assert len(opened) == 2 and opened[0] != opened[1] and opened[0] == crashed[0]["path"]  # recovered elsewhere


def test_a_runtime_that_crashes_opening_is_replaced_as_one_that_died_there(actor_system, tmp_path):
    """Answered ``ActorCrashed`` instead of ``Opened``, the coordinator starts another runtime for the turn, as for a
    runtime killed while opening (it had suspended the session with the crash as its reason: a turn left to an
    operator's ``resume`` although nothing had run)."""
    sessions = three_word_session(actor_system, tmp_path)
    actor_system.arm_faults("agent/execution", FaultPlan((FaultRule("runtime.opened", FaultAction.RAISE, nth=1),),
                                                         forks=1))
    sessions.send("s1", "go")
    wait_for("the turn settled", lambda: "turn_settled" in [e.kind for e in sessions.events("s1")], timeout=30)
    crashed = [e for e in events(actor_system) if e["kind"] in ("exited", "terminated")
               and e["path"].startswith("agent/execution/") and e["reason"]["kind"] == "crash"]
    assert len(crashed) == 1 and "runtime.opened" in crashed[0]["reason"]["message"], crashed
    served = {e["path"] for e in events(actor_system) if e["kind"] == "turn_started"}
    assert served and crashed[0]["path"] not in served  # the turn ran on the replacement


def test_a_coordinator_crashing_in_a_command_answers_actor_crashed_and_the_retry_is_known(actor_system, tmp_path):
    sessions = three_word_session(actor_system, tmp_path, arm_first=("agent/coordinator", FaultPlan((FaultRule(
        "coordinator.resume_committed", FaultAction.RAISE, nth=1),), forks=1)))
    crashed = actor_system.which_children("agent/coordinator")[0].generation
    with pytest.raises(ActorCrashed, match="FaultInjected"):  # was the FaultInjected itself: no OuroactorsError
        sessions.send("s1", "go", event_id="m-1")
    # the message was committed before the crash: its retry is a duplicate, and the recovered session runs it. (Sent
    # once the coordinator is replaced: the crashed one, until its supervisor ends it, refuses it ActorCrashed again.)
    wait_for("the coordinator replaced", lambda: [c for c in actor_system.which_children("agent/coordinator")
                                                  if c.status == "running" and c.generation != crashed])
    with pytest.raises(SessionRejected, match="duplicate"):
        sessions.send("s1", "go", event_id="m-1")
    wait_for("the turn settled", lambda: "turn_settled" in [e.kind for e in sessions.events("s1")], timeout=30)
    # the crashed coordinator had taken the command (and answered it): the directory never forwards it again (its
    # look at a command not taken comes LOOK_AFTER_S after the forward: watched for four times that)
    deadline = time.monotonic() + 4 * LOOK_AFTER_S
    while time.monotonic() < deadline:
        assert not [e for e in events(actor_system) if e["kind"] == "command_forwarded_again"]
        time.sleep(0.02)


def test_a_coordinator_stopped_with_a_command_in_hand_answers_its_caller(actor_system, tmp_path):
    """Stopped while a command's job waits (here on the runtime it starts), the coordinator answers that command's
    caller at its stop — the command may have been taken, so the answer says to send it again — instead of leaving
    it to wait out its ask (a minute)."""
    three_word_session(actor_system, tmp_path, arm_first=("agent/coordinator", FaultPlan((FaultRule(
        "coordinator.resume_committed", FaultAction.DELAY, delay_s=0.5),), forks=1)))
    answers: list[object] = []

    def send() -> None:
        with isolated(actor_system) as view:  # its own endpoint: the main thread asks meanwhile
            try:
                answers.append(Sessions(view).send("s1", "go", event_id="m-1"))
            except Exception as exc:  # whatever came back is the test's to judge
                answers.append(exc)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    wait_for("the command in hand", lambda: [e for e in events(actor_system) if e["kind"] == "fault_fired"])
    [child] = actor_system.which_children("agent/coordinator")
    actor_system.terminate_child("agent/coordinator", child.id)
    sender.join(timeout=20)
    assert not sender.is_alive(), "the command's caller was not answered when its coordinator stopped"
    [answer] = answers
    assert isinstance(answer, CoordinatorError) and "stopped (shutdown) before it answered" in str(answer), answer


def test_a_command_refused_after_the_crash_is_told_to_its_caller_not_only_to_the_directory():
    """(The hook alone: a command reaching a crashed coordinator in the moments before its supervisor ends it.)"""
    from thespian.actors import ActorAddress

    from ouroactors.runtime.coordinator.actor import Coordinator
    from ouroactors.runtime.coordinator.messages import ForSession, ReadEvents, SendMessage

    sent: list[tuple[object, object]] = []
    coordinator = Coordinator.__new__(Coordinator)
    coordinator.send = lambda address, message: sent.append((address, message))  # type: ignore[method-assign]
    caller, refusal = ActorAddress("caller"), ActorCrashed("agent/coordinator/session#1", "crash(...)")
    coordinator.refused(ForSession(caller, SendMessage("s1", "go", "alice", "m-1")), refusal)
    assert sent == [(caller, refusal)]
    sent.clear()
    coordinator.refused(ForSession(caller, ReadEvents("s1", 0, wait_s=5.0, request_id="r")), refusal)  # a lent poll
    coordinator.refused(ForSession("not an address", SendMessage("s1", "go", "alice", "m-1")), refusal)  # type: ignore[arg-type]
    assert sent == []  # the directory answers lent polls itself; a forged reply_to is nobody to tell
    # a tracked command: its caller is told, and the directory that forwarded it hears it was taken (answered here,
    # it must not be forwarded again: the caller would hear twice)
    from ouroactors.runtime.coordinator.messages import Taken

    directory = ActorAddress("directory")
    coordinator.session_id, coordinator.started_by = "s1", directory
    coordinator.refused(ForSession(caller, SendMessage("s1", "go", "alice", "m-1"), ticket=7), refusal)
    assert sent == [(caller, refusal), (directory, Taken("s1", 7, answered=True))]
    # after a crash, a tracked command that never began here is returned to the directory (it forwards it to the
    # replacement); an untracked one is still answered
    from ouroactors.supervision import reasons

    sent.clear()
    coordinator._crash_reason, coordinator.begun = reasons.crash(RuntimeError("boom")), {3}
    coordinator.refused(ForSession(caller, SendMessage("s1", "go", "alice", "m-1"), ticket=8), refusal)
    assert sent == [(directory, Taken("s1", 8, returned=True))]  # returned: the directory forwards it
    sent.clear()
    coordinator.refused(ForSession(caller, SendMessage("s1", "go", "alice", "m-1")), refusal)
    assert sent == [(caller, refusal)]


def test_a_command_queued_behind_a_crashing_one_is_run_by_the_coordinators_replacement(actor_system, tmp_path):
    """A command that came while another ran and never began is not lost with the crash, nor answered with it: the
    crashed coordinator leaves it to the directory, which forwards it to the replacement, whose answer its caller
    gets. (It was answered ``ActorCrashed`` at the crash — "send it again" — although nothing of it had run.)"""
    sessions = three_word_session(actor_system, tmp_path, arm_first=("agent/coordinator", FaultPlan((
        FaultRule("coordinator.resume_committed", FaultAction.DELAY, delay_s=1.0, nth=1),
        FaultRule("coordinator.resume_committed", FaultAction.RAISE, nth=1)), forks=1)))
    answers: dict[str, object] = {}

    def send(who: str) -> None:
        with isolated(actor_system) as view:  # its own endpoint: the two sends overlap
            try:
                answers[who] = Sessions(view).send("s1", "go", event_id="m-1")
            except Exception as exc:  # whatever came back is the test's to judge
                answers[who] = exc

    first = threading.Thread(target=send, args=("first",), daemon=True)
    first.start()
    wait_for("the first command in hand", lambda: [e for e in events(actor_system) if e["kind"] == "fault_fired"])
    second = threading.Thread(target=send, args=("second",), daemon=True)  # queued behind it: the message again
    second.start()
    for sender in (first, second):
        sender.join(timeout=30)
        assert not sender.is_alive()
    assert isinstance(answers["first"], ActorCrashed) and "FaultInjected" in str(answers["first"])
    # the replacement ran it: the message the crashed one had committed is a duplicate there
    assert isinstance(answers["second"], SessionRejected) and "duplicate" in str(answers["second"]), answers
    forwarded = [e for e in events(actor_system) if e["kind"] == "command_forwarded_again"]
    # once: returned by the crashed coordinator, or (a look between the crash and that word) seen not taken
    assert [e["session"] for e in forwarded] == ["s1"] and forwarded[0]["why"] in ("returned", "not_taken"), forwarded
    wait_for("the turn settled", lambda: "turn_settled" in [e.kind for e in sessions.events("s1")], timeout=30)
