"""The runtime's side of carried checkpoints (execution.carried.CarriedOutput) as a ledger rider, on real LMDB.

The rider is driven the way the ledger's direct writer drives it: ``put_staged`` inside a write transaction that
also writes something of its own, then ``settle_staged`` with that transaction's outcome.
"""

from __future__ import annotations

from ouroactors.authorities.storage.commit import Committed, Rejected, write
from ouroactors.authorities.storage.env import db
from ouroactors.core.codec import seq_key
from ouroactors.runtime.coordinator.keys import log_prefix
from ouroactors.runtime.coordinator.record import RuntimeAttachment
from ouroactors.runtime.coordinator.store import SessionStore
from ouroactors.runtime.coordinator.workflow import Event
from ouroactors.runtime.execution.carried import CarriedOutput
from ouroactors.runtime.execution.output import OutputEvent

from .support import new_record


def ev(cursor: int, kind: str = "tool_call") -> OutputEvent:
    return OutputEvent(cursor, kind, 1, {"call_id": f"c{cursor}"})


def attached(store: SessionStore) -> None:
    assert isinstance(store.create(new_record()), Committed)
    store.transition("s1", 0, Event.MESSAGE, runtime=RuntimeAttachment(runtime_id="rt-1", generation=3),
                     last_generation=3)


def rider(store: SessionStore, generation: int = 3, reader: bool = True) -> tuple[CarriedOutput, list]:
    pushed: list[tuple[int, ...]] = []

    def push(events: tuple[OutputEvent, ...]) -> bool:
        if reader:
            pushed.append(tuple(e.cursor for e in events))
        return reader

    return CarriedOutput(store, "s1", "rt-1", generation, push), pushed


def ledger_commit(store: SessionStore, out: CarriedOutput, *, reject: bool = False) -> object:
    """A transaction of the ledger's own (one put) with ``out`` riding in it, settled as the direct writer does."""
    own = db(store.env, b"ledger")
    staged: list[object] = []

    def run(txn):
        txn.put(b"entry", b"started", db=own)
        staged.append(out.put_staged(txn, isolate=True))
        if reject:
            raise _Reject()

    try:
        outcome = write(store.env, run)
    except _Reject:
        outcome = Rejected("refused for the test")
    out.settle_staged(staged[0], outcome)
    return outcome


class _Reject(Exception):
    pass


def test_a_riding_event_is_pushed_only_after_the_commit_that_carried_it(store) -> None:
    attached(store)
    out, pushed = rider(store)
    out.emitted(ev(1), rides=True)
    assert pushed == []  # held for the commit: nothing seen before it is durable
    assert isinstance(ledger_commit(store, out), Committed)
    assert pushed == [(1,)]
    record = store.get("s1")
    assert (record.committed_cursor, [e.carried for e in store.events("s1")]) == (1, [True])
    assert out.carried == 1


def test_a_rejected_commit_pushes_nothing_and_the_next_event_takes_the_held_one_along(store) -> None:
    attached(store)
    out, pushed = rider(store)
    out.emitted(ev(1), rides=True)
    ledger_commit(store, out, reject=True)
    assert pushed == [] and store.get("s1").committed_cursor == 0 and store.events("s1") == []
    out.emitted(ev(2, "text"))  # not riding: pushed now, the held event first (the coordinator commits both)
    assert pushed == [(1, 2)]


def test_a_zombie_runtime_carries_nothing_and_its_events_are_still_pushed(store) -> None:
    attached(store)
    out, pushed = rider(store, generation=2)  # the record names generation 3
    out.emitted(ev(1), rides=True)
    ledger_commit(store, out)
    assert pushed == [] and store.get("s1").committed_cursor == 0 and store.events("s1") == []
    out.flush()
    assert pushed == [(1,)]


def test_a_failed_carry_leaves_the_ledger_transaction_whole(store) -> None:
    attached(store)
    # a stray log entry at cursor 1 (never committed by a checkpoint): the carry's put is refused inside its
    # nested transaction, and the ledger's own write still commits
    assert isinstance(write(store.env, lambda txn: txn.put(log_prefix("s1") + seq_key(1), b"junk",
                                                           db=store.log)), Committed)
    out, pushed = rider(store)
    out.emitted(ev(1), rides=True)
    assert isinstance(ledger_commit(store, out), Committed)
    with store.env.begin() as txn:
        assert txn.get(b"entry", db=db(store.env, b"ledger")) == b"started"
    assert store.get("s1").committed_cursor == 0 and pushed == []


def test_events_already_committed_by_the_coordinator_are_not_carried_again(store) -> None:
    attached(store)
    out, pushed = rider(store)
    out.emitted(ev(1), rides=True)
    out.emitted(ev(2), rides=True)
    record = store.get("s1")
    from ouroactors.runtime.coordinator.publication import plan
    from ouroactors.runtime.execution.output import Batch
    store.checkpoint("s1", record.revision, plan(Batch((ev(1),), 0, 1, False), 0, "", ""))  # the coordinator's
    ledger_commit(store, out)
    assert pushed == [(2,)]
    assert [(e.cursor, e.carried) for e in store.events("s1")] == [(1, False), (2, True)]


def test_nothing_is_held_when_nobody_reads(store) -> None:
    attached(store)
    out, _ = rider(store, reader=False)
    out.emitted(ev(1), rides=True)
    out.emitted(ev(2, "text"))  # the push finds no reader: the held event is not kept for a commit either
    ledger_commit(store, out)
    assert store.get("s1").committed_cursor == 0


def test_an_event_pushed_but_not_yet_committed_is_carried_with_the_riding_one(store) -> None:
    attached(store)
    out, pushed = rider(store)
    out.emitted(ev(1, "turn_started"))  # pushed at once; the coordinator's checkpoint of it has not landed yet
    out.emitted(ev(2), rides=True)
    ledger_commit(store, out)  # without event 1 the tool call would not follow the cursor: both are carried
    assert pushed == [(1,), (1, 2)]
    assert [(e.cursor, e.carried) for e in store.events("s1")] == [(1, True), (2, True)]


def test_without_a_session_record_nothing_is_held(store) -> None:
    out, pushed = rider(store)  # a runtime opened with no coordinator: no record names it
    for cursor in range(1, 4):
        out.emitted(ev(cursor), rides=True)
        ledger_commit(store, out)
    assert pushed == [] and out._pending == [] and out._window == []  # held for no commit: not kept growing
