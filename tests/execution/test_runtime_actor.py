"""The session runtime on real processes: a scripted session's turn runs grants → ledger → tool → journal.

The model is scripted (what this test is not about); the authorities, the ledger, the journal, the tools and the
files are real.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from ouroactors import supervisor, worker
from ouroactors.authorities.asking import ask_authority
from ouroactors.authorities.ledger.actor import GetEntry
from ouroactors.authorities.ledger.domain import Status
from ouroactors.authorities.workspace.messages import Acquire
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule
from ouroactors.runtime.execution.errors import AlreadyOpen, Busy, NoActiveTurn, NotOpen, SteerNotRecorded
from ouroactors.runtime.execution.messages import (
    AckOutput,
    DrainOutput,
    InterruptTurn,
    OpenSession,
    SendText,
    SteerTurn,
)
from ouroactors.runtime.execution.runtime import LeaseRefused

from ..journal_support import journal_kinds, journal_verdict

pytestmark = pytest.mark.multiproc

RULES = {"user": ["allow:Read(**)", "allow:Edit(**)", "allow:Bash(grep *)"]}


def agent_tree(root: str, rules: dict[str, list[str]] = RULES):
    return supervisor("agent", strategy="rest_for_one", intensity=10, children=[
        worker("storage", "ouroactors.authorities.storage.actor:Storage"),
        worker("ledger", "ouroactors.authorities.ledger.actor:Ledger"),
        worker("grants", "ouroactors.authorities.grants.actor:Grants", kwargs={"rules": rules}),
        worker("workspace", "ouroactors.authorities.workspace.actor:Workspace", kwargs={"allowed_roots": [root]}),
        supervisor("execution", [worker("runtime", "ouroactors.runtime.execution.runtime:Runtime",
                                        restart="transient")], strategy="simple_one_for_one", intensity=10),
    ])


class Reader:
    """A reader of one runtime's output, as a coordinator would be: drain after its cursor, ack what it took."""

    def __init__(self, system: Any, path: str) -> None:
        self.system, self.path, self.cursor = system, path, 0

    def until(self, kind: str, timeout: float = 30.0) -> list[Any]:
        events: list[Any] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            batch = self.system.ask(self.path, DrainOutput(after=self.cursor), timeout=10)
            if batch.events:
                events.extend(batch.events)
                self.cursor = batch.events[-1].cursor
                self.system.ask(self.path, AckOutput(self.cursor), timeout=10)
                if any(e.kind == kind for e in batch.events):
                    return events
            else:
                time.sleep(0.02)  # polling another process's output with a deadline
        raise AssertionError(f"no {kind!r} event within {timeout}s; got {[e.kind for e in events]}")


def drain_until(system: Any, path: str, kind: str) -> list[Any]:
    return Reader(system, path).until(kind)


@pytest.fixture
def session(actor_system, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "NOTES.md").write_text("# notes\n- [ ] try the demo\n- [ ] read the docs\n")
    actor_system.start_tree(agent_tree(str(tmp_path)))
    path, lease = runtime_with_lease(actor_system, ws, "s1")
    return actor_system, path, ws, lease


def runtime_with_lease(system, ws: Path, session: str) -> tuple[str, Any]:
    """Start a runtime and lease ``ws`` for ``session`` with the runtime as the owner the workspace watches."""
    path = f"agent/execution/{system.start_child('agent/execution', ()).id}"
    granted = ask_authority(system, "agent/workspace",
                            Acquire(str(ws), "exclusive", session, owner=system.resolve(path)))
    CAPABILITIES[granted.lease.lease_id] = granted.capability
    return path, granted.lease


CAPABILITIES: dict[str, bytes] = {}  # lease id -> the capability its grant carried (to release it)


def replacement(system: Any, ws: Path, lease: Any) -> tuple[str, Any]:
    """A new runtime for session ``s1``, and the workspace lease moved to it (released, then acquired anew)."""
    from ouroactors.authorities.workspace.messages import Release

    again = f"agent/execution/{system.start_child('agent/execution', ()).id}"
    ask_authority(system, "agent/workspace", Release(lease.lease_id, CAPABILITIES[lease.lease_id]))
    granted = ask_authority(system, "agent/workspace", Acquire(str(ws), "exclusive", "s1", owner=system.resolve(again)))
    CAPABILITIES[granted.lease.lease_id] = granted.capability
    return again, granted.lease


def test_a_scripted_turn_runs_every_call_through_grants_ledger_and_journal(session):
    system, path, ws, lease = session
    with pytest.raises(NotOpen):
        system.ask(path, SendText("hi"))
    opened = system.ask(path, OpenSession("s1", {"workspace": str(ws), "sandbox": {"mode": "none"}}, lease.lease_id))
    assert opened.session_id == "s1" and opened.runtime_id
    # the same open again (an opener that lost patience with the first answer) is answered as the first was; another
    # session's open is refused
    assert system.ask(path, OpenSession("s1", {"workspace": str(ws), "sandbox": {"mode": "none"}},
                                        lease.lease_id)) == opened
    with pytest.raises(AlreadyOpen):
        system.ask(path, OpenSession("s2", {"workspace": str(ws), "sandbox": {"mode": "none"}}, lease.lease_id))
    assert system.ask(path, SendText("please")).turn == 1
    with pytest.raises(Busy):
        system.ask(path, SendText("again"))
    events = drain_until(system, path, "turn_settled")
    kinds = [e.kind for e in events]
    assert kinds[0] == "turn_started" and kinds[-1] == "turn_settled"
    assert events[-1].data["status"] == "completed", events[-1].data
    assert [e.cursor for e in events] == list(range(1, len(events) + 1))  # no gap, no duplicate
    results = [e.data for e in events if e.kind == "tool_result"]
    assert [r["status"] for r in results] == ["ok", "ok", "ok"], results
    assert "- [x] try the demo" in (ws / "NOTES.md").read_text()
    for call in ("call_demo_read", "call_demo_edit", "call_demo_shell"):
        entry = ask_authority(system, "agent/ledger", GetEntry(f"s1/t1/{call}"))
        assert entry.status is Status.OK and entry.session_id == "s1"
        # decided in the runtime with grants' own policy, and recorded in the start's transaction
        permission = ask_authority(system, "agent/ledger", GetEntry(entry.grant.split(":")[0]))
        assert permission.kind == "permission" and permission.status is Status.OK
    with pytest.raises(NoActiveTurn):
        system.ask(path, SteerTurn("late"))

    assert journal_verdict(system.data_dir, "s1") == ["ok", "turn_settled"]
    logged = [e.kind for e in system.events.all() if e.path == path]
    for kind in ("runtime_opened", "turn_started", "turn_settled"):
        assert kind in logged, logged


def test_a_denied_call_is_recorded_and_told_to_the_model_and_nothing_runs(actor_system, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "NOTES.md").write_text("- [ ] try the demo\n")
    actor_system.start_tree(agent_tree(str(tmp_path), {"user": ["allow:Read(**)", "allow:Bash(grep *)"],
                                                       "node": ["deny:Edit(**)"]}))
    path, lease = runtime_with_lease(actor_system, ws, "s1")
    actor_system.ask(path, OpenSession("s1", {"workspace": str(ws), "sandbox": {"mode": "none"}}, lease.lease_id))
    actor_system.ask(path, SendText("please"))
    events = drain_until(actor_system, path, "turn_settled")
    statuses = {e.data["call_id"]: e.data["status"] for e in events if e.kind == "tool_result"}
    assert statuses["call_demo_edit"] == "denied"
    assert (ws / "NOTES.md").read_text() == "- [ ] try the demo\n"
    entry = ask_authority(actor_system, "agent/ledger", GetEntry("s1/t1/call_demo_edit"))
    assert entry.status is Status.DENIED


def test_open_refuses_a_lease_of_another_session(session):
    system, path, ws, lease = session
    with pytest.raises(LeaseRefused):
        system.ask(path, OpenSession("s2", {"workspace": str(ws)}, lease.lease_id))
    with pytest.raises(LeaseRefused):
        system.ask(path, OpenSession("s2", {"workspace": str(ws)}))


def open_scripted(session: Any, script: str) -> None:
    """Open ``s1`` on the session fixture's runtime with a scripted model answering ``script`` (TOML)."""
    system, path, ws, lease = session
    (ws.parent / "script.toml").write_text(script)
    system.ask(path, OpenSession("s1", {"workspace": str(ws), "sandbox": {"mode": "none"}, "model": {
        "kind": "scripted", "script": str(ws.parent / "script.toml")}}, lease.lease_id))


def talking(session: Any, words: int, pace_ms: int) -> Reader:
    """``s1`` opened and sent a message its model answers with ``words`` text chunks ``pace_ms`` apart: a reader that
    has seen the first one (so the turn runs, and its start is committed)."""
    system, path, _ws, _lease = session
    open_scripted(session, f'[[turns]]\npace_ms = {pace_ms}\nevents = [' + ", ".join(
        '{ kind = "text", text = "word " }' for _ in range(words)) + "]\n")
    system.ask(path, SendText("talk slowly"))
    reader = Reader(system, path)
    reader.until("text")
    return reader


def test_interrupt_cancels_the_running_turn(session):
    system, path, _ws, _lease = session
    reader = talking(session, words=50, pace_ms=200)
    started = time.monotonic()
    system.ask(path, InterruptTurn())
    events = reader.until("turn_settled")
    assert time.monotonic() - started < 5
    assert events[-1].data["status"] == "interrupted", events[-1].data


def test_a_steer_sent_right_after_the_message_is_delivered_in_the_turn_it_started(session):
    """The turn's thread has not begun the turn yet (held at its start by a fault plan) when the steer arrives: the
    steer is still the new turn's — tagged with the loop's count of turns, it was the previous turn's, and dropped."""
    system, path, _ws, _lease = session
    open_scripted(session, '[[turns]]\nevents = [{ kind = "tool_call", id = "r1", name = "read", arguments = { path = '
                           '"NOTES.md" } }]\n\n[[turns]]\nevents = [{ kind = "text", text = "ok" }]\n')
    system.arm_faults(path, FaultPlan((FaultRule("runtime.turn_started", FaultAction.DELAY, delay_s=0.5),)))
    assert system.ask(path, SendText("go")).turn == 1
    assert system.ask(path, SteerTurn("and be brief")).turn == 1
    Reader(system, path).until("turn_settled")
    kinds = journal_kinds(system.data_dir, "s1")
    assert kinds.count("steer_received") == 1 and kinds.count("steer") == 1, kinds  # delivered, at a later point


def test_a_steer_the_journal_cannot_record_is_refused_not_promised(session):
    system, path, _ws, _lease = session
    reader = talking(session, words=30, pace_ms=100)  # its start committed: the runtime's next commit is the steer's
    system.arm_faults(path, FaultPlan((FaultRule("storage.before_commit", FaultAction.COMMIT_REJECTED, nth=1,
                                                 times=1),)))
    with pytest.raises(SteerNotRecorded, match="not queued"):
        system.ask(path, SteerTurn("and be brief"))
    assert system.ask(path, SteerTurn("then stop")).turn == 1  # the journal writes again: promised
    system.ask(path, InterruptTurn())
    reader.until("turn_settled")
    kinds = journal_kinds(system.data_dir, "s1")
    assert kinds.count("gap") == 1 and kinds.count("steer_received") == 1, kinds


def test_a_steer_no_point_took_before_an_interrupt_still_reaches_the_conversation(session):
    """Accepted while the model streams, then the turn is interrupted during that call: no point of the turn took
    the steer. It is put in the conversation after the turn stops (the next turn's model sees it) and its event
    says so; nothing is left undelivered."""
    system, path, _ws, _lease = session
    reader = talking(session, words=50, pace_ms=200)
    assert system.ask(path, SteerTurn("mind the tests")).turn == 1
    system.ask(path, InterruptTurn())
    events = reader.until("turn_settled")
    assert events[-1].data["status"] == "interrupted" and "undelivered_steers" not in events[-1].data
    assert [e.data for e in events if e.kind == "steered"] == [
        {"text": "mind the tests", "at_call": 0, "redelivered": False, "at_end": True}]
    kinds = journal_kinds(system.data_dir, "s1")
    assert kinds[-2:] == ["steer", "turn_settled"], kinds


@pytest.mark.slow
@pytest.mark.parametrize("approve", [True, False])
def test_ask_parks_the_call_on_a_durable_approval_until_an_operator_answers(actor_system, tmp_path, approve):
    from ouroactors.authorities.grants.messages import AnswerApproval, ListApprovals
    from ouroactors.authorities.grants.operators import read_credentials

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "NOTES.md").write_text("- [ ] try the demo\n")
    actor_system.start_tree(agent_tree(str(tmp_path), {"user": ["allow:Read(**)", "allow:Bash(grep *)"]}))
    path, lease = runtime_with_lease(actor_system, ws, "s1")
    actor_system.ask(path, OpenSession("s1", {"workspace": str(ws), "sandbox": {"mode": "none"}}, lease.lease_id))
    actor_system.ask(path, SendText("please"))
    reader = Reader(actor_system, path)
    asked = [e for e in reader.until("approval_needed") if e.kind == "approval_needed"]
    assert asked[0].data["tool"] == "edit"
    assert (ws / "NOTES.md").read_text() == "- [ ] try the demo\n"  # parked: nothing ran
    pending = ask_authority(actor_system, "agent/grants", ListApprovals(status="pending", session_id="s1"))
    assert len(pending) == 1 and pending[0].arguments["path"] == "NOTES.md"
    who, token = read_credentials(str(actor_system.data_dir))
    ask_authority(actor_system, "agent/grants", AnswerApproval(pending[0].approval_id, approve, who, token,
                                                              pending[0].call_digest, pending[0].state_version))
    events = reader.until("turn_settled")
    result = next(e.data for e in events if e.kind == "tool_result" and e.data["call_id"] == "call_demo_edit")
    assert result["status"] == ("ok" if approve else "denied")
    assert ("- [x] try the demo" in (ws / "NOTES.md").read_text()) is approve
    entry = ask_authority(actor_system, "agent/ledger", GetEntry("s1/t1/call_demo_edit"))
    assert entry.status is (Status.OK if approve else Status.DENIED)


def test_a_new_runtime_continues_the_session_from_its_journal(session, tmp_path):
    from ouroactors.runtime.execution.messages import CloseSession

    system, path, ws, lease = session
    script = tmp_path / "two.toml"
    script.write_text('[[turns]]\nevents = [{ kind = "text", text = "first answer" }]\n\n'
                      '[[turns]]\nevents = [{ kind = "text", text = "second answer" }]\n')
    config = {"workspace": str(ws), "sandbox": {"mode": "none"}, "model": {"kind": "scripted", "script": str(script)}}
    system.ask(path, OpenSession("s1", config, lease.lease_id))
    system.ask(path, SendText("one"))
    Reader(system, path).until("turn_settled")
    system.ask(path, CloseSession())
    # A replacement runtime (as after a crash, or the next turn of a suspended session) holding a new lease.
    again, lease2 = replacement(system, ws, lease)
    system.ask(again, OpenSession("s1", config, lease2.lease_id))
    assert system.ask(again, SendText("two")).turn == 2  # turn numbers (and so effect ids) never repeat
    events = Reader(system, again).until("turn_settled")
    text = "".join(e.data["text"] for e in events if e.kind == "text")
    assert text == "second answer"  # the model saw the first turn: the conversation was restored
    assert journal_verdict(system.data_dir, "s1") == ["ok", "turn_settled"]


def test_the_open_commits_nothing_of_its_own_and_a_close_without_a_turn_still_journals_it(session):
    """``session_opened`` is staged at the open and rides in the first turn's start (one synced commit fewer on a
    message's way); a runtime opened and closed with no turn since still journals it (the close commits it)."""
    from ouroactors.runtime.execution.messages import CloseSession

    system, path, ws, lease = session
    config = {"workspace": str(ws), "sandbox": {"mode": "none"}}
    system.ask(path, OpenSession("s1", config, lease.lease_id))
    assert journal_kinds(system.data_dir, "s1") == []  # the open committed nothing
    system.ask(path, SendText("please"))
    Reader(system, path).until("turn_settled")
    assert journal_kinds(system.data_dir, "s1")[:2] == ["session_opened", "turn_started"]
    system.ask(path, CloseSession())

    again, lease2 = replacement(system, ws, lease)
    system.ask(again, OpenSession("s1", config, lease2.lease_id))
    assert journal_kinds(system.data_dir, "s1").count("session_opened") == 1
    system.ask(again, CloseSession())  # answered once the staged record is committed
    assert journal_kinds(system.data_dir, "s1").count("session_opened") == 2
    assert journal_verdict(system.data_dir, "s1") == ["ok", "session_opened"]


def run_turns(system: Any, path: str, config: dict[str, Any], lease_id: str, turns: int) -> tuple[Any, Any]:
    """Open ``s1`` on the runtime at ``path``, run ``turns`` turns, close it; the data dir's environment, opened here
    (and its config, to close it)."""
    from ouroactors.authorities.storage.env import StorageConfig, open_env
    from ouroactors.runtime.execution.messages import CloseSession

    system.ask(path, OpenSession("s1", config, lease_id))
    reader = Reader(system, path)
    for i in range(turns):
        system.ask(path, SendText(f"question {i}"))
        reader.until("turn_settled")
    system.ask(path, CloseSession())
    storage = StorageConfig.under(system.data_dir)
    return open_env(storage), storage


def test_a_runtime_snapshots_the_end_of_its_turns_and_the_next_open_replays_nothing(session, tmp_path):
    """Nine turns in one runtime: the end of each (a small conversation) is snapshotted in the commit of its
    turn_settled, the last two kept. With both gone, the next open replays all nine and stages one (the open commits
    nothing of its own); its turn's end goes into the other slot. The runtime after it replays nothing, and keeps the
    snapshot it opened from beside its own."""
    from ouroactors.authorities.storage.env import StorageConfig, close_env, db, open_env
    from ouroactors.runtime.execution import snapshots
    from ouroactors.runtime.execution.journal import ANCHOR_DB
    from ouroactors.runtime.execution.messages import CloseSession
    from ouroactors.supervision.events import EventReader

    system, path, ws, lease = session
    script = tmp_path / "many.toml"
    script.write_text("".join(f'[[turns]]\nevents = [{{ kind = "text", text = "answer {i}" }}]\n\n'
                              for i in range(12)))
    config = {"workspace": str(ws), "sandbox": {"mode": "none"}, "model": {"kind": "scripted", "script": str(script)}}
    env, storage = run_turns(system, path, config, lease.lease_id, 9)

    def slots() -> list[int]:
        return sorted(f.turns for f in snapshots.load_slots(env, "s1") if isinstance(f, snapshots.ConversationSnapshot))

    assert slots() == [8, 9]
    with env.begin(write=True) as txn:
        for key in snapshots.slot_keys(b"s1"):
            txn.delete(key, db=db(env, ANCHOR_DB))

    def restored() -> dict[str, Any]:
        found = [e for e in EventReader(str(system.data_dir / "events.jsonl")).poll() if e.kind == "runtime_restored"]
        return found[-1].fields

    again, lease2 = replacement(system, ws, lease)
    system.ask(again, OpenSession("s1", config, lease2.lease_id))
    assert restored()["replayed"] == 9 and restored()["snapshot_staged"] is not None
    assert journal_kinds(system.data_dir, "s1").count("session_opened") == 1  # nothing committed by the open
    assert slots() == []
    system.ask(again, SendText("question 9"))
    Reader(system, again).until("turn_settled")
    system.ask(again, CloseSession())
    assert slots() == [9, 10]  # the open's, committed with the turn's first records, and the turn's end
    close_env(storage)

    third, lease3 = replacement(system, ws, lease2)
    system.ask(third, OpenSession("s1", config, lease3.lease_id))
    seen = restored()
    assert (seen["from_snapshot"], seen["replayed"], seen["turns"], seen["snapshot_refused"]) == (10, 0, 10, None)
    assert seen["snapshot_staged"] is None  # nothing replayed: nothing to stage
    assert system.ask(third, SendText("question 10")).turn == 11
    events = Reader(system, third).until("turn_settled")
    assert "".join(e.data["text"] for e in events if e.kind == "text") == "answer 10"
    assert journal_verdict(system.data_dir, "s1") == ["ok", "turn_settled"]
    system.ask(third, CloseSession())
    storage = StorageConfig.under(system.data_dir)
    env = open_env(storage)
    try:
        assert slots() == [10, 11]
    finally:
        close_env(storage)


def test_a_session_over_its_journal_budget_continues_from_its_snapshot_or_is_refused_without_one(session, tmp_path):
    """``limits.journal_budget_bytes`` drops old turns; a runtime that ran them staged snapshots as it went (every
    few turns), so a replacement continues the session with its whole conversation and its turn numbers. Without a
    snapshot, the open refuses rather than start the session again at turn 1."""
    from ouroactors.authorities.storage.env import close_env, db
    from ouroactors.runtime.execution import reading, snapshots
    from ouroactors.runtime.execution.errors import RuntimeRefusal
    from ouroactors.runtime.execution.journal import ANCHOR_DB
    from ouroactors.runtime.execution.messages import CloseSession

    system, path, ws, lease = session
    script = tmp_path / "long.toml"
    script.write_text("".join(f'[[turns]]\nevents = [{{ kind = "text", text = "answer {i} {"x" * 2000}" }}]\n\n'
                              for i in range(32)))
    config = {"workspace": str(ws), "sandbox": {"mode": "none"}, "model": {"kind": "scripted", "script": str(script)},
              "limits": {"journal_budget_bytes": 65536}}
    env, storage = run_turns(system, path, config, lease.lease_id, 30)
    first = reading.records(env, "s1")[0]
    assert first.kind == "truncated"  # the config's budget applies
    snapshot = snapshots.load(env, "s1")
    assert isinstance(snapshot, snapshots.ConversationSnapshot) and snapshot.seq > first.seq

    again, lease2 = replacement(system, ws, lease)
    system.ask(again, OpenSession("s1", config, lease2.lease_id))
    assert system.ask(again, SendText("question 30")).turn == 31
    events = Reader(system, again).until("turn_settled")
    assert "answer 30" in "".join(e.data["text"] for e in events if e.kind == "text")
    system.ask(again, CloseSession())

    with env.begin(write=True) as txn:  # the snapshots gone: the conversation before the cut is nowhere
        for key in snapshots.slot_keys(b"s1"):
            txn.delete(key, db=db(env, ANCHOR_DB))
    third, lease3 = replacement(system, ws, lease2)
    with pytest.raises(RuntimeRefusal, match="dropped its oldest turns"):
        system.ask(third, OpenSession("s1", config, lease3.lease_id))
    close_env(storage)


def test_a_request_stamped_for_another_runtime_generation_is_refused_and_changes_nothing(session):
    """What a coordinator sends a runtime is stamped with that runtime's generation (``for_runtime``): a runtime
    whose port the kernel gave to another after a SIGKILL must not run one session's message in another's runtime.
    The runtime at the address refuses a request stamped for another generation, and takes one stamped for its
    own."""
    from ouroactors.core.errors import StaleGeneration
    from ouroactors.runtime.coordinator.runtimes import for_runtime
    from ouroactors.runtime.execution.messages import RuntimeStatus, RuntimeStatusRequest
    from ouroactors.supervision.calls import Addressed

    system, path, ws, lease = session
    generation = system.child_info(path).generation
    assert for_runtime(generation, SendText("x")) == Addressed(generation, SendText("x"))
    assert for_runtime(None, SendText("x")) == SendText("x")  # a generation nobody knows: sent as it is
    system.ask(path, OpenSession("s1", {"workspace": str(ws), "sandbox": {"mode": "none"}}, lease.lease_id))

    for request in (SendText("meant for another session"), AckOutput(0), InterruptTurn(), RuntimeStatusRequest()):
        with pytest.raises(StaleGeneration):
            system.ask(path, for_runtime(generation + 1, request))
    status = system.ask(path, for_runtime(generation, RuntimeStatusRequest()))
    assert isinstance(status, RuntimeStatus) and (status.session_id, status.turn, status.running) == ("s1", 0, False)
    assert system.ask(path, for_runtime(generation, SendText("please"))).turn == 1  # its own stamp: taken
    assert drain_until(system, path, "turn_settled")[-1].data["status"] == "completed"
