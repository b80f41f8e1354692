"""Which turn a suspended session keeps, read from its store: ``resume``'s ``_pending_turn`` and a retried message's
``_never_started`` (the coordinator's mixins over a real session store, no actor system).

The log's order decides, never the clock: a message accepted after the log's last settlement started a turn that
has not run (its settlement is an earlier turn's); one accepted before it ran and settled.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ouroactors.authorities.storage.commit import Committed
from ouroactors.runtime.coordinator.commands import Commands
from ouroactors.runtime.coordinator.messages import SendMessage
from ouroactors.runtime.coordinator.publication import plan
from ouroactors.runtime.coordinator.resume import ActorKind, Kind, ResumeEvent, VerifiedActor
from ouroactors.runtime.coordinator.store import SessionStore
from ouroactors.runtime.coordinator.waits import Waits
from ouroactors.runtime.coordinator.workflow import Event
from ouroactors.runtime.execution.output import Batch, OutputEvent

from .support import new_record

ALICE = VerifiedActor("alice", ActorKind.PRINCIPAL)


def committed(outcome: Any) -> Any:
    assert isinstance(outcome, Committed), outcome
    return outcome.value


def send(store: SessionStore, event_id: str, text: str) -> Any:
    record = store.get("s1")
    event = ResumeEvent(event_id=event_id, kind=Kind.MESSAGE, session_id="s1", channel="cli", tenant="t",
                        actor="alice", expected_version=record.state_version, payload={"text": text, "last": False})
    applied = committed(store.resume("s1", event, ALICE))
    assert applied.accepted, applied
    return applied.record


def run_turn(store: SessionStore, turn: int, status: str = "completed") -> Any:
    """The turn's events committed by the coordinator, and the session moved on as the settlement does."""
    record = store.get("s1")
    first = record.committed_cursor + 1
    events = (OutputEvent(first, "turn_started", turn, {"prompt": "p"}),
              OutputEvent(first + 1, "turn_settled", turn, {"status": status, "conversation_digest": "cd"}))
    step = plan(Batch(events, 0, first + 1, False), record.committed_cursor, record.log_digest,
                record.conversation_digest)
    return committed(store.checkpoint("s1", record.revision, step, then=Event.TURN_COMPLETE))


def coordinator(store: SessionStore, principal: str | None = "alice") -> Any:
    """The mixins' view of a coordinator: its store and session, and who the channel verified."""
    shell: Any = SimpleNamespace(store=store, session_id="s1")
    shell._turn_context = lambda record: Waits._turn_context(shell, record)
    shell._unstarted_message = lambda record: Commands._unstarted_message(shell, record)
    shell._principal = lambda claimed, token: (VerifiedActor(principal, ActorKind.PRINCIPAL)
                                               if principal == claimed else None)
    return shell


def not_started(store: SessionStore) -> Any:
    """The session as :meth:`Waits._turn_not_started` leaves it: its accepted message's turn never ran."""
    record = store.get("s1")
    return committed(store.transition("s1", record.revision, Event.SUSPEND, reason="the turn did not start: x"))


def test_a_message_whose_turn_did_not_start_is_pending_though_the_log_ends_with_a_settlement(store) -> None:
    committed(store.create(new_record()))
    send(store, "m1", "first")
    run_turn(store, 1)
    shell = coordinator(store)
    assert Waits._pending_turn(shell, store.get("s1")) is None  # its turn settled: nothing to resume
    send(store, "m2", "second")
    record = not_started(store)
    assert Waits._pending_turn(shell, record) == "second"  # turn 1's settlement is an earlier turn's
    retry = SendMessage("s1", "second", "alice", "m2")
    assert Commands._never_started(shell, record, retry)  # the same message, retried: runs its turn
    assert not Commands._never_started(shell, record, SendMessage("s1", "other", "alice", "m2"))  # another text
    assert not Commands._never_started(shell, record, SendMessage("s1", "second", "alice", "m3"))  # another id
    assert not Commands._never_started(coordinator(store, principal=None), record, retry)  # nobody verified
    # a new message goes on without it: the message it leaves unrun is the one named in its answer
    assert Commands._unstarted_message(shell, record).event_id == "m2"


def test_a_message_whose_turn_ran_is_not_pending_nor_run_again_by_a_retry(store) -> None:
    committed(store.create(new_record()))
    send(store, "m1", "first")
    record = run_turn(store, 1)
    shell = coordinator(store)
    assert Waits._pending_turn(shell, record) is None
    assert not Commands._never_started(shell, record, SendMessage("s1", "first", "alice", "m1"))
    assert Commands._unstarted_message(shell, record) is None  # it ran: a new message replaces nothing


def test_an_interrupted_turn_is_pending_but_not_a_retried_message(store) -> None:
    committed(store.create(new_record()))
    send(store, "m1", "first")
    record = run_turn(store, 1, status="interrupted")
    shell = coordinator(store)
    assert Waits._pending_turn(shell, record) == "first"  # resume runs it again, as the next turn
    assert not Commands._never_started(shell, record, SendMessage("s1", "first", "alice", "m1"))  # it did run
    assert Commands._unstarted_message(shell, record) is None
