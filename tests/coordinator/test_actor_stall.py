"""Seed 001, "a recovery trigger detects a stalled activity": a runtime whose trio loop stops running (a call that
blocks its thread, where no activity deadline can reach) crashes with where it is stuck, and recovery takes over
as for any lost runtime — the unsettled effect reconciled, a replacement resuming from the checkpoint — instead of
the session staying ``running`` for as long as the block lasts."""

from __future__ import annotations

import time

import pytest

from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule
from ouroactors.sessions import Sessions

from .actor_support import agent_tree, session_config, wait_for

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]
BLOCKED_S = 60.0  # the block outlasts the test's deadlines: only the watchdog can end it


def stall_tree(root: str, stall_after_s: float):
    tree = agent_tree(root)
    execution = tree.children[4]
    runtime = execution.children[0].model_copy(update={"kwargs": {"stall_after_s": stall_after_s}})
    return tree.model_copy(update={"children": (*tree.children[:4],
                                                execution.model_copy(update={"children": (runtime,)}),
                                                *tree.children[5:])})


def test_a_runtime_whose_loop_stalls_mid_effect_is_crashed_and_the_session_recovers(actor_system, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.md").write_text("hello\n")
    script = tmp_path / "turn.toml"
    script.write_text('[[turns]]\nevents = [{ kind = "tool_call", id = "e0", name = "read", '
                      'arguments = { path = "notes.md" } }]\n'
                      '[[turns]]\nevents = [{ kind = "text", text = "done" }]\n')
    actor_system.start_tree(stall_tree(str(tmp_path), stall_after_s=1.0))
    # The first runtime's loop blocks right after its read ran, before the settlement: a synchronous sleep in
    # the loop's thread (the fault point runs there).
    actor_system.arm_faults("agent/execution", FaultPlan((FaultRule("effect.ran", FaultAction.DELAY,
                                                                    delay_s=BLOCKED_S),), forks=1))
    sessions = Sessions(actor_system)
    sessions.new("s1", session_config(ws, tools={"enabled": ["read"]},
                                      model={"kind": "scripted", "script": str(script)}))
    began = time.monotonic()
    sessions.send("s1", "go")
    events = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=40))
    assert events[-1].data["status"] == "completed", events[-1]
    assert time.monotonic() - began < BLOCKED_S / 2  # ended by the watchdog, not by the block running out
    assert events[-1].generation > events[0].generation  # a replacement settled the turn
    # s1's runtime (under a loaded machine another runtime, idle and unopened, may pass the 1 s limit as well)
    stalled = actor_system.wait_for("runtime_stalled", after=0, timeout=10,
                                    predicate=lambda e: e.fields.get("session") == "s1")
    assert stalled.fields.get("stalled_s", 0) >= 1.0, stalled.fields  # rounded to the ms
    assert "point (faults.py" in stalled.fields["where"], stalled.fields  # where its thread was stuck
    results = [e.data for e in events if e.kind == "tool_result"]
    assert results[-1]["status"] == "failed"  # the lost read, settled by its reconciler: the model was told
    wait_for("suspended", lambda: sessions.show("s1").state == "suspended")


@pytest.mark.parametrize("bad", [0, -1.0, "60", True])
def test_a_runtime_refuses_a_stall_limit_that_is_not_a_positive_number_by_name(actor_system, tmp_path, bad):
    actor_system.start_tree(stall_tree(str(tmp_path), stall_after_s=bad))
    with pytest.raises(Exception, match="stall_after_s") as refused:
        actor_system.start_child("agent/execution", ())
    assert repr(bad) in str(refused.value)
