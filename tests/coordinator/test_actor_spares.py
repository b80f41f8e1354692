"""Spare runtimes (``agent/sessions``' ``spare_runtimes``) on real processes: a message's turn runs on the runtime
started after the message before it; an offer from anybody else is checked, and a bad one neither used nor
stopped; a runtime nobody opens ends itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ouroactors.runtime.coordinator.messages import ForSession, SendMessage, SpareRuntime
from ouroactors.runtime.execution.messages import RuntimeStatusRequest
from ouroactors.sessions import SessionRejected, Sessions

from ..security.session_door_support import coordinator_path
from .actor_support import agent_tree, session_config, slow_script, wait_for, waiting_on_an_approval

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]


def events(system: Any) -> list[dict[str, Any]]:
    path = Path(system.data_dir) / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def opened_on(system: Any, session: str) -> list[str]:
    """The runtime paths that opened ``session``, in order (its ``runtime_opened`` events)."""
    return [e["path"] for e in events(system)
            if e.get("kind") == "runtime_opened" and (e.get("data") or e).get("session") == session]


def running(system: Any) -> list[Any]:
    return [c for c in system.which_children("agent/execution") if c.status == "running"]


def settle(system: Any, sessions: Sessions, session: str, tmp_path: Path, event_id: str | None = None) -> None:
    sessions.new(session, session_config(None, model={"kind": "scripted", "script": str(slow_script(
        tmp_path / f"{session}.toml", words=2, pace_ms=1))}))
    sessions.send(session, "go", event_id=event_id)
    wait_for(f"{session} settled", lambda: sessions.show(session).state == "suspended"
             and "turn_settled" in [e.kind for e in sessions.events(session)])


def serves(system: Any, child: Any) -> Any:
    return system.ask(f"agent/execution/{child.id}", RuntimeStatusRequest(), timeout=10.0).session_id


def the_spare(system: Any, not_keys: set[str] = frozenset()) -> Any:
    """The one running execution child once the sessions' runtimes are gone: the directory's spare (it says it
    serves no session)."""
    return wait_for("one spare runtime, nothing else", lambda: (r := running(system)) and len(r) == 1
                    and r[0].id not in not_keys and serves(system, r[0]) is None and r[0])


def test_a_message_runs_on_the_spare_started_after_the_message_before(actor_system, tmp_path):
    actor_system.start_tree(agent_tree(str(tmp_path), spares=1))
    sessions = Sessions(actor_system)
    settle(actor_system, sessions, "a", tmp_path)  # the first message starts its runtime, then a spare is started
    first = opened_on(actor_system, "a")
    spare = the_spare(actor_system)
    assert [f"agent/execution/{spare.id}"] != first
    # the directory says when it holds the spare to offer (what the session workload's operator waits for: the
    # runtime's own rehearsal may be logged before the directory has the supervisor's answer)
    kept = wait_for("spare_kept", lambda: [e for e in events(actor_system) if e.get("kind") == "spare_kept"])
    assert [(e["path"], e["runtime"], e["generation"]) for e in kept] == [
        ("agent/sessions", f"agent/execution/{spare.id}", spare.generation)]
    settle(actor_system, sessions, "b", tmp_path)
    assert opened_on(actor_system, "b") == [f"agent/execution/{spare.id}"]  # without spares: a child started now
    the_spare(actor_system, not_keys={spare.id})  # and the next one is started after b's message


def test_a_cold_refill_waits_for_the_coordinators_runtime_however_slow_its_start(actor_system, tmp_path):
    """The first message finds no spare: its coordinator starts the runtime itself, and the directory's refill
    waits for its word (RuntimeStarted), so the spare is newer and the session's next message can take it — even
    when the coordinator's start lags (here its resume commit is held 0.6 s; a refill on a timer ran first and
    started a spare the session then had to refuse)."""
    from ouroactors.core.fault_plans import FaultAction, FaultPlan, FaultRule

    actor_system.start_tree(agent_tree(str(tmp_path), spares=1))
    sessions = Sessions(actor_system)
    sessions.new("a", session_config(None, model={"kind": "scripted", "script": str(slow_script(
        tmp_path / "a.toml", words=2, pace_ms=1))}))
    actor_system.arm_faults(coordinator_path(actor_system, "a"), FaultPlan((FaultRule(
        "coordinator.resume_committed", FaultAction.DELAY, nth=1, delay_s=0.6),)))
    sessions.send("a", "go")
    wait_for("a settled", lambda: sessions.show("a").state == "suspended"
             and [e.kind for e in sessions.events("a")].count("turn_settled") == 1)
    first = opened_on(actor_system, "a")
    spare = the_spare(actor_system)
    assert first and first != [f"agent/execution/{spare.id}"]
    sessions.send("a", "again")
    wait_for("a settled twice", lambda: sessions.show("a").state == "suspended"
             and [e.kind for e in sessions.events("a")].count("turn_settled") == 2)
    assert opened_on(actor_system, "a")[-1] == f"agent/execution/{spare.id}"  # the spare was newer: taken
    # the word is taken from the session's coordinator only: anybody else's is refused, naming the field
    from ouroactors.core.errors import BadRequest
    from ouroactors.runtime.coordinator.messages import RuntimeStarted

    with pytest.raises(BadRequest) as refused:
        actor_system.ask("agent/sessions", RuntimeStarted("a"), timeout=10.0)
    assert refused.value.field == "session_id"


def test_an_approvals_answer_resumes_the_turn_on_a_spare(actor_system, tmp_path):
    sessions, ws = waiting_on_an_approval(actor_system, tmp_path, "touch approved.txt", "ask:Bash(touch *)", "done",
                                          spares=1)
    spare = the_spare(actor_system)  # the waiting session holds no runtime: the one running is the spare
    [pending] = sessions.approvals("s1")
    sessions.approve("s1", pending.approval_id, "fine")
    wait_for("the resumed turn settled", lambda: [e.kind for e in sessions.events("s1")].count("turn_settled") == 1)
    assert opened_on(actor_system, "s1")[-1] == f"agent/execution/{spare.id}" and (ws / "approved.txt").exists()


def test_a_spare_offered_with_a_message_that_starts_no_turn_is_stopped_and_replaced(actor_system, tmp_path):
    actor_system.start_tree(agent_tree(str(tmp_path), spares=1))
    sessions = Sessions(actor_system)
    settle(actor_system, sessions, "a", tmp_path, event_id="m-once")
    spare = the_spare(actor_system)
    with pytest.raises(SessionRejected, match="duplicate"):  # the same event again: refused, no turn, no runtime
        sessions.send("a", "go", event_id="m-once")
    replaced = the_spare(actor_system, not_keys={spare.id})  # the offered one stopped, not left idle for minutes
    assert not [c for c in running(actor_system) if c.id == spare.id] and replaced.id != spare.id


def test_an_offer_not_from_the_directory_is_checked_and_a_bad_one_neither_used_nor_stopped(actor_system, tmp_path):
    """Attack: whoever holds the system's secret sends a coordinator a ``ForSession`` whose spare names a real
    spare's key and generation but another actor's address (the grants authority), then the wrong generation.
    Neither is opened or stopped; each turn runs on a runtime started for it, and the real spare lives on."""
    actor_system.start_tree(agent_tree(str(tmp_path), spares=1))
    sessions = Sessions(actor_system)
    settle(actor_system, sessions, "a", tmp_path)
    spare = the_spare(actor_system)
    grants = actor_system.resolve("agent/grants")
    for n, forged in enumerate((SpareRuntime(spare.id, spare.generation, grants),
                                SpareRuntime(spare.id, spare.generation + 1, spare.address))):
        victim = f"v{n}"
        sessions.new(victim, session_config(None, model={"kind": "scripted", "script": str(slow_script(
            tmp_path / f"{victim}.toml", words=2, pace_ms=1))}))
        request = SendMessage(victim, "go", sessions.principal, f"m-forged-{n}")
        actor_system.tell(coordinator_path(actor_system, victim), ForSession(grants, request, forged))
        wait_for(f"{victim} settled", lambda v=victim: "turn_settled" in [e.kind for e in sessions.events(v)])
        used = opened_on(actor_system, victim)
        assert len(used) == 1 and used != [f"agent/execution/{spare.id}"]
        still = [c for c in running(actor_system) if c.id == spare.id]
        assert still and still[0].generation == spare.generation and still[0].restarts == spare.restarts
    settle(actor_system, sessions, "b", tmp_path)  # the directory's own offer still stands
    assert opened_on(actor_system, "b") == [f"agent/execution/{spare.id}"]


def test_a_runtime_nobody_opens_ends_itself(actor_system, tmp_path):
    actor_system.start_tree(agent_tree(str(tmp_path), runtime_kwargs={"unopened_limit_s": 0.5}))
    child = actor_system.start_child("agent/execution", ())
    wait_for("the unopened runtime gone", lambda: not [c for c in running(actor_system) if c.id == child.id])
    unused = [e for e in events(actor_system) if e.get("kind") == "runtime_unused"]
    assert [e["path"] for e in unused] == [f"agent/execution/{child.id}"]
    assert not [e for e in events(actor_system) if e.get("kind") in ("child_crashed", "crashed")
                and "execution" in e.get("path", "")]


@pytest.mark.parametrize("bad", [-1, 9, True, "1"])
def test_spare_runtimes_must_be_a_small_integer(actor_system, tmp_path, bad):
    with pytest.raises(Exception, match=r"kwargs\.spare_runtimes"):
        actor_system.start_tree(agent_tree(str(tmp_path), spares=bad))
