"""The session store on real LMDB: compare-and-set writes, the commit contract's outcomes, quarantine, projections."""

from __future__ import annotations

import multiprocessing

import pytest

from ouroactors.authorities.storage.commit import Committed, Rejected, Unknown
from ouroactors.authorities.storage.env import close_env, db, open_env
from ouroactors.core import faults
from ouroactors.core.errors import CorruptRecord
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule
from ouroactors.runtime.coordinator.errors import NotOwner, RevisionConflict, SessionExists, UnknownSession
from ouroactors.runtime.coordinator.publication import CursorGap, CursorMoved, plan, reconciled
from ouroactors.runtime.coordinator.record import PendingWait, RuntimeAttachment
from ouroactors.runtime.coordinator.store import SessionStore
from ouroactors.runtime.coordinator.workflow import Event, InvalidTransition, State
from ouroactors.runtime.execution.output import Batch, OutputEvent

from .support import cas_writer, new_record


def committed(outcome):
    assert isinstance(outcome, Committed), outcome
    return outcome.value


def batch(first: int, last: int) -> Batch:
    return Batch(tuple(OutputEvent(c, "text", 1, {"n": c}) for c in range(first, last + 1)), 0, last, False)


def running(store: SessionStore, sid: str = "s1"):
    """A session created and moved to running with runtime rt-1 generation 1 attached."""
    committed(store.create(new_record(sid)))
    return committed(store.transition(sid, 0, Event.MESSAGE, runtime=RuntimeAttachment(runtime_id="rt-1", generation=1),
                                      last_generation=1))


def test_a_sessions_configuration_is_stored_in_the_transaction_that_creates_it(store) -> None:
    from ouroactors.runtime.coordinator.configs import config_writer, get_config

    before = store.env.info()["last_txnid"]
    committed(store.create(new_record("c1"), also=config_writer(store, "c1", {"workspace": "/a"})))
    assert store.env.info()["last_txnid"] == before + 1  # one commit for both
    assert get_config(store, "c1") == {"workspace": "/a"}
    with pytest.raises(SessionExists):  # a second creation stores nothing, its configuration neither
        store.create(new_record("c1"), also=config_writer(store, "c1", {"workspace": "/b"}))
    assert get_config(store, "c1") == {"workspace": "/a"}
    assert store.env.info()["last_txnid"] == before + 1


def test_create_get_and_reopen(store, config) -> None:
    record = committed(store.create(new_record()))
    assert record.created_ns > 0 and record.updated_ns == record.created_ns
    close_env(config)
    assert SessionStore(open_env(config)).get("s1") == record
    with pytest.raises(SessionExists):
        SessionStore(open_env(config)).create(new_record())
    assert SessionStore(open_env(config)).get("nope") is None


def test_an_id_with_a_journal_already_is_refused(store) -> None:
    """A session created under the id of an imported (or orphaned) journal would continue that history as its own
    conversation: refused, with nothing written, and the error survives pickling (it crosses actors)."""
    import pickle
    from pathlib import Path

    from ouroactors.runtime.execution.archive import read_archive

    corpus = Path(__file__).resolve().parents[1] / "data" / "journals" / "tools.journal"
    read_archive(store.env, corpus, session="imported-1")
    before = store.env.info()["last_txnid"]
    with pytest.raises(SessionExists, match="has a journal here already") as refused:
        store.create(new_record("imported-1"))
    assert store.get("imported-1") is None and store.env.info()["last_txnid"] == before
    again = pickle.loads(pickle.dumps(refused.value))
    assert str(again) == str(refused.value) and again.session_id == "imported-1"
    committed(store.create(new_record("imported-2")))  # other ids as before


def test_bad_ids_are_refused_and_write_nothing(store) -> None:
    with pytest.raises(ValueError):
        new_record("a/b")
    with pytest.raises(ValueError):
        store.get("x\x00y")


def test_transition_is_a_compare_and_set(store) -> None:
    committed(store.create(new_record()))
    moved = committed(store.transition("s1", 0, Event.MESSAGE))
    assert (moved.state, moved.state_version, moved.revision) == (State.RUNNING, 1, 1)
    with pytest.raises(RevisionConflict) as info:
        store.transition("s1", 0, Event.MESSAGE)
    assert (info.value.expected, info.value.found) == (0, 1)
    with pytest.raises(InvalidTransition):
        store.transition("s1", 1, Event.TIMER_FIRED)
    with pytest.raises(UnknownSession):
        store.transition("nope", 0, Event.MESSAGE)
    assert store.get("s1") == moved  # the refusals changed nothing


def test_update_bumps_the_revision_but_not_the_state_version(store) -> None:
    rec = running(store)
    after = committed(store.update("s1", rec.revision, lambda r: r.model_copy(update={"reason": "note"})))
    assert (after.revision, after.state_version, after.reason) == (rec.revision + 1, rec.state_version, "note")
    with pytest.raises(ValueError, match="transition"):
        store.update("s1", after.revision, lambda r: r.model_copy(update={"state": State.COMPLETED}))


def test_leaving_running_releases_the_runtime_and_waiting_needs_a_wait(store) -> None:
    rec = running(store)
    with pytest.raises(ValueError, match="pending approval wait"):
        store.transition("s1", rec.revision, Event.WAIT_APPROVAL)
    wait = PendingWait(kind="approval", wait_id="ap1", issued_at_version=rec.state_version + 1)
    waiting = committed(store.transition("s1", rec.revision, Event.WAIT_APPROVAL, waits=(wait,)))
    assert waiting.runtime is None and waiting.waits == (wait,) and waiting.last_generation == 1


def test_two_coordinators_in_two_processes_cannot_both_win(store, config) -> None:
    committed(store.create(new_record()))
    ctx = multiprocessing.get_context("spawn")  # each child opens the environment itself, never across fork
    ready, go, results = ctx.Queue(), ctx.Event(), ctx.Queue()
    children = [ctx.Process(target=cas_writer, args=(config, "s1", tag, ready, go, results))
                for tag in ("coord-a", "coord-b")]
    for child in children:
        child.start()
    try:
        assert sorted(ready.get(timeout=60) for _ in children) == ["coord-a", "coord-b"]
        go.set()  # both read revision 0 and race to claim it
        answers = [results.get(timeout=60) for _ in children]
    finally:
        for child in children:
            child.join(60)
            if child.is_alive():
                child.kill()
                child.join()
    assert sorted(a.split(":")[0] for a in answers) == ["conflict", "won"], answers
    winner = next(a.split(":")[1] for a in answers if a.startswith("won"))
    assert store.get("s1").coordinator == winner


def test_claimed_sessions_refuse_other_coordinators(store) -> None:
    rec = committed(store.claim(committed(store.create(new_record())).session_id, 0, "coord-a"))
    with pytest.raises(NotOwner):
        store.transition("s1", rec.revision, Event.MESSAGE, coordinator="coord-b")
    committed(store.transition("s1", rec.revision, Event.MESSAGE, coordinator="coord-a"))


def test_checkpoint_writes_cursor_digest_and_events_in_one_transaction(store, config) -> None:
    rec = running(store)
    step = plan(batch(1, 3), rec.committed_cursor, rec.log_digest, rec.conversation_digest)
    after = committed(store.checkpoint("s1", rec.revision, step))
    assert (after.committed_cursor, after.log_digest) == (3, step.log_digest)
    assert [e.cursor for e in store.events("s1")] == [1, 2, 3]
    assert [e.cursor for e in store.events("s1", after=2)] == [3]
    assert all(e.generation == 1 for e in store.events("s1"))
    with pytest.raises(CursorMoved):
        store.checkpoint("s1", after.revision, step)  # the same plan again: the cursor is past it, plan again
    with pytest.raises(CursorGap):
        store.checkpoint("s1", after.revision, plan(batch(6, 7), 5, "", ""))
    close_env(config)
    reopened = SessionStore(open_env(config))  # subscribers resume from any cursor after a restart
    assert [e.cursor for e in reopened.events("s1", after=1)] == [2, 3]


def test_checkpoint_with_a_transition(store) -> None:
    rec = running(store)
    step = plan(Batch((OutputEvent(1, "turn_settled", 1, {"conversation_digest": "cd"}),), 0, 1, False), 0, "", "")
    after = committed(store.checkpoint("s1", rec.revision, step, then=Event.TURN_COMPLETE))
    assert (after.state, after.conversation_digest, after.runtime) == (State.SUSPENDED, "cd", None)


def arm(point: str, action: FaultAction) -> None:
    faults.arm(FaultPlan((FaultRule(point, action),)))


def test_a_rejected_checkpoint_writes_and_publishes_nothing(store) -> None:
    rec = running(store)
    step = plan(batch(1, 2), 0, "", "")
    arm("storage.before_commit", FaultAction.COMMIT_REJECTED)
    assert isinstance(store.checkpoint("s1", rec.revision, step), Rejected)
    faults.disarm()
    assert store.get("s1") == rec and store.events("s1") == []
    committed(store.checkpoint("s1", rec.revision, step))  # the same batch commits later


@pytest.mark.parametrize(("point", "landed"), [("storage.before_commit", False), ("storage.after_commit", True)])
def test_commit_outcome_unknown_surfaces_and_is_reconciled_by_reading_back(store, point, landed) -> None:
    rec = running(store)
    step = plan(batch(1, 2), 0, "", "")
    arm(point, FaultAction.COMMIT_UNKNOWN)
    outcome = store.checkpoint("s1", rec.revision, step)
    faults.disarm()
    assert isinstance(outcome, Unknown) and outcome.kind == "commit_outcome_unknown"
    durable = store.get("s1")
    assert reconciled(step, durable.committed_cursor, durable.log_digest) is landed
    assert [e.cursor for e in store.events("s1")] == ([1, 2] if landed else [])


def test_a_corrupt_record_fails_closed_and_is_quarantined(store, env) -> None:
    rec = running(store)
    with env.begin(write=True) as txn:
        txn.put(b"s1", b"\x93garbage", db=db(env, b"sessions"))
    with pytest.raises(CorruptRecord) as info:
        store.get("s1")
    assert "sessions/s1" in str(info.value)
    with pytest.raises(CorruptRecord):
        store.transition("s1", rec.revision, Event.COMPLETE)
    with pytest.raises(SessionExists):  # never replaced by a fresh, empty session
        store.create(new_record())
    with env.begin(db=db(env, b"quarantine")) as txn:
        assert txn.get(b"sessions/s1") == b"\x93garbage"
    assert "sessions/s1" in store.quarantined


def test_list_recoverable_is_the_non_terminal_sessions_of_the_node(store, env) -> None:
    running(store, "a")
    committed(store.create(new_record("b")))
    committed(store.create(new_record("c", node="n2")))
    done = committed(store.create(new_record("d", state=State.RUNNING)))
    committed(store.transition("d", done.revision, Event.COMPLETE))
    sweep = store.list_recoverable("n1")
    assert [(s.session_id, s.state, s.runtime_id) for s in sweep.sessions] == [
        ("a", State.RUNNING, "rt-1"), ("b", State.SUSPENDED, None)]
    assert [s.session_id for s in store.list_recoverable("n2").sessions] == ["c"]
    with env.begin(write=True) as txn:
        txn.put(b"n1/b", b"junk", db=db(env, b"sessions_live"))
    assert store.list_recoverable("n1").corrupt == ["b"]  # reported, not dropped


def test_a_node_change_moves_the_projection(store) -> None:
    rec = committed(store.create(new_record()))
    committed(store.update("s1", rec.revision, lambda r: r.model_copy(update={"node": "n2"})))
    assert store.list_recoverable("n1").sessions == []
    assert [s.session_id for s in store.list_recoverable("n2").sessions] == ["s1"]


def test_the_sweep_of_one_node_never_sees_a_node_whose_name_extends_it(store) -> None:
    committed(store.create(new_record("a", node="n1")))
    committed(store.create(new_record("b", node="n1x")))
    assert [s.session_id for s in store.list_recoverable("n1").sessions] == ["a"]


@pytest.mark.parametrize(("point", "landed"), [("storage.before_commit", False), ("storage.after_commit", True)])
def test_reconcile_a_transition_of_unknown_outcome(store, point, landed) -> None:
    rec = committed(store.claim("s1", committed(store.create(new_record())).revision, "coord-a"))
    arm(point, FaultAction.COMMIT_UNKNOWN)
    assert isinstance(store.transition("s1", rec.revision, Event.MESSAGE, coordinator="coord-a"), Unknown)
    faults.disarm()
    did, durable = store.reconcile("s1", rec.revision, coordinator="coord-a")
    assert did is landed and durable.state is (State.RUNNING if landed else State.SUSPENDED)


def test_reconcile_refuses_when_another_coordinator_wrote(store) -> None:
    rec = committed(store.create(new_record()))
    committed(store.claim("s1", rec.revision, "coord-b"))
    with pytest.raises(RevisionConflict):
        store.reconcile("s1", rec.revision, coordinator="coord-a")
    committed(store.transition("s1", rec.revision + 1, Event.MESSAGE))
    with pytest.raises(RevisionConflict):
        store.reconcile("s1", rec.revision)


@pytest.mark.parametrize("point", ["coordinator.transition_committed", "coordinator.checkpoint_committed"])
def test_a_crash_at_a_named_boundary_comes_after_the_commit(store, point) -> None:
    """Crash enumeration can stop the coordinator right after each durable step: the step is on disk."""
    assert point in faults.known_points()
    rec = running(store)
    step = plan(batch(1, 2), 0, "", "")
    faults.arm(FaultPlan((FaultRule(point, FaultAction.RAISE),)))
    with pytest.raises(faults.FaultInjected):
        if point == "coordinator.checkpoint_committed":
            store.checkpoint("s1", rec.revision, step)
        else:
            store.transition("s1", rec.revision, Event.RUNTIME_LOST)
    faults.disarm()
    durable = store.get("s1")
    assert durable.revision == rec.revision + 1
    assert durable.committed_cursor == (2 if point == "coordinator.checkpoint_committed" else 0)
