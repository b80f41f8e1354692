"""Seed 001, "query downstream state before retrying an ambiguous write": a runtime lost in the middle of a file
write does not park its session. The write's start recorded what it meant to leave (the path, the digests before
and after); the ledger's ``file_write`` reconciler looks at the file — written: ``ok``, untouched: ``failed`` —
and the replacement runtime goes on from there, never writing twice."""

from __future__ import annotations

import json

import pytest

from ouroactors.authorities.asking import ask_authority
from ouroactors.authorities.ledger.messages import GetEntry
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule
from ouroactors.faults.session_checks import SessionHistory, steer_dropped
from ouroactors.faults.session_read import read_durable
from ouroactors.sessions import Sessions
from ouroactors.supervision.events import EventReader

from ..journal_support import read_journal
from .actor_support import agent_tree, session_config, wait_for

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]
WRITE = {"name": "write", "arguments": {"path": "out.txt", "content": "written once\n"}}


def lost_at(actor_system, tmp_path, point: str):
    """Session ``s1`` whose one ``write`` call (``e0``) loses its runtime (``os._exit``) at ``point``."""
    ws = tmp_path / "ws"
    ws.mkdir()
    actor_system.start_tree(agent_tree(str(tmp_path)))
    script = tmp_path / "turn.json"
    script.write_text(json.dumps({"turns": [{"events": [{"kind": "tool_call", "id": "e0", **WRITE}]},
                                            {"events": [{"kind": "text", "text": "done"}]}]}))
    actor_system.arm_faults("agent/execution", FaultPlan((FaultRule(point, FaultAction.EXIT),), forks=1))
    sessions = Sessions(actor_system)
    sessions.new("s1", session_config(ws, tools={"enabled": ["write"]},
                                      model={"kind": "scripted", "script": str(script)}))
    sessions.send("s1", "go")
    events = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=60))
    assert events[-1].kind == "turn_settled" and events[-1].data["status"] == "completed", events[-1]
    assert events[-1].generation > events[0].generation  # a replacement ended the turn
    wait_for("suspended", lambda: sessions.show("s1").state == "suspended")
    return ws, events, ask_authority(actor_system, "agent/ledger", GetEntry("s1/t1/e0"))


def test_a_runtime_lost_after_its_write_ran_is_replaced_and_the_write_settled_ok_by_looking(actor_system,
                                                                                             tmp_path):
    ws, events, entry = lost_at(actor_system, tmp_path, "effect.ran")
    assert (entry.status.value, entry.settled_by) == ("ok", "reconciler:file_write"), entry
    assert entry.evidence["intent"]["path"] == str(ws / "out.txt") and "meant to leave" in entry.evidence["finding"]
    assert (ws / "out.txt").read_text() == "written once\n"
    assert [e.data["status"] for e in events if e.kind == "tool_result"][-1] == "ok"  # the model was told it ran


def test_a_runtime_lost_before_its_write_ran_is_replaced_and_the_write_settled_failed(actor_system, tmp_path):
    ws, events, entry = lost_at(actor_system, tmp_path, "effect.started")
    assert (entry.status.value, entry.settled_by) == ("failed", "reconciler:file_write"), entry
    assert "writing again is safe" in entry.evidence["finding"]
    assert not (ws / "out.txt").exists()  # nothing was written, and the replacement did not run it either
    assert [e.data["status"] for e in events if e.kind == "tool_result"][-1] == "failed"


def test_the_replacement_takes_the_models_recorded_answer_instead_of_asking_again(actor_system, tmp_path):
    """Seed 001: "never call the model again merely to reconstruct what it previously decided". The lost runtime's
    model result rode in its write's start; the replacement's re-run of turn 1 takes it (model call 0) from the
    journal and asks the model only for the answer it never gave (call 1)."""
    lost_at(actor_system, tmp_path, "effect.ran")
    events = EventReader(str(actor_system.data_dir / "events.jsonl")).poll()
    reused = [e.fields for e in events if e.kind == "model_call_reused"]
    assert [(f["session"], f["turn"], f["index"]) for f in reused] == [("s1", 1, 0)], reused


def steered_and_lost(actor_system, tmp_path, nth: int):
    """Session ``s1``: model call 0 streams for ~2 s and asks for write ``w0``, call 1 for write ``e0``; steered as
    soon as call 0 streams (delivered before call 1), its runtime lost at the ``nth`` write's ``effect.ran``. The
    events the follower saw from the steer on, and the system's event log."""
    ws = tmp_path / "ws"
    ws.mkdir()
    actor_system.start_tree(agent_tree(str(tmp_path)))
    write = {"name": "write", "arguments": {"path": "first.txt", "content": "1\n"}}
    chunks = [{"kind": "text", "text": f"w{i} "} for i in range(20)]
    script = tmp_path / "turn.json"
    script.write_text(json.dumps({"turns": [
        {"events": [*chunks, {"kind": "tool_call", "id": "w0", **write}], "pace_ms": 100},
        {"events": [{"kind": "tool_call", "id": "e0", **WRITE}]},
        {"events": [{"kind": "text", "text": "done"}]}]}))
    actor_system.arm_faults("agent/execution", FaultPlan((FaultRule("effect.ran", FaultAction.EXIT, nth=nth),),
                                                         forks=1))
    sessions = Sessions(actor_system)
    sessions.new("s1", session_config(ws, tools={"enabled": ["write"]},
                                      model={"kind": "scripted", "script": str(script)}))
    sessions.send("s1", "go")
    first = next(e for e in sessions.events("s1", follow=True, idle_timeout=60) if e.kind == "text")
    sessions.steer("s1", "keep the files short")  # model call 0 streams on for ~2 s: delivered before call 1
    events = list(sessions.events("s1", first.cursor, follow=True, until="turn_settled", idle_timeout=60))
    assert events[-1].kind == "turn_settled" and events[-1].data["status"] == "completed", events[-1]
    assert events[-1].generation > first.generation  # a replacement ended the turn
    assert (ws / "out.txt").read_text() == "written once\n" and (ws / "first.txt").read_text() == "1\n"
    # the follower sees the steer once, where it took effect: published by the run that first delivered it (the lost
    # one when it got that far — the re-run's delivery at the same point is a repeat, not published again)
    [steered] = [e for e in events if e.kind == "steered"]
    delivered_by = first.generation if nth == 2 else events[-1].generation
    assert steered.data["at_call"] == 1 and steered.generation == delivered_by, (steered, first.generation)
    journal = read_durable(str(actor_system.data_dir), "s1")["journal"]  # the session invariant, on this crash
    assert [r["kind"] for r in journal].count("steer_received") == 1
    assert steer_dropped(SessionHistory("s1", "suspended", 0, journal=journal)) == []
    return EventReader(str(actor_system.data_dir / "events.jsonl")).poll()


def test_the_replacement_delivers_the_lost_runs_steer_again_and_takes_the_answer_that_followed(actor_system,
                                                                                                 tmp_path):
    """A steer the lost run delivered before its second model call is part of that call's request: the replacement
    delivers it again at the same point (``steer_redelivered``), so the recorded answer that followed is taken too
    and the user's message is in the conversation the turn settles with."""
    log = steered_and_lost(actor_system, tmp_path, nth=2)  # lost after e0 ran: call 1 and its steer recorded
    redelivered = [e.fields for e in log if e.kind == "steer_redelivered"]
    assert [(f["session"], f["turn"], f["at_call"], f["delivered"]) for f in redelivered] == [("s1", 1, 1, True)]
    reused = [e.fields["index"] for e in log if e.kind == "model_call_reused"]
    assert reused == [0, 1], reused  # without the steer, call 1's request differs: the model is asked again


def test_a_steer_the_runtime_acknowledged_is_delivered_by_the_replacement_though_it_never_was(actor_system,
                                                                                             tmp_path):
    """The steer was answered (its acceptance committed in the journal) while call 0 streamed; the runtime was lost
    in w0, before the loop reached the point that delivers it. The replacement delivers it there, as a first
    delivery, after taking call 0's recorded answer — it is not lost with the process that acknowledged it."""
    log = steered_and_lost(actor_system, tmp_path, nth=1)
    redelivered = [e.fields for e in log if e.kind == "steer_redelivered"]
    assert [(f["turn"], f["at_call"], f["delivered"]) for f in redelivered] == [(1, 1, False)], redelivered
    assert [e.fields["index"] for e in log if e.kind == "model_call_reused"] == [0]
    read = read_journal(actor_system.data_dir, "s1", verify=True)
    rerun = read.kinds[max(i for i, k in enumerate(read.kinds) if k == "turn_started"):]
    assert read.verdict == "ok" and read.kinds.count("steer_received") == 1
    assert read.kinds.count("steer") == 1 and "steer" in rerun  # delivered once: by the replacement
