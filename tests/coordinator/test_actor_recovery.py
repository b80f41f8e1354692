"""Recovery adopts before it repeats, on real processes: SIGKILL the coordinator, then the runtime, mid-turn."""

from __future__ import annotations

import json

import pytest

from ouroactors.sessions import Sessions

from .actor_support import agent_tree, journal_kinds, session_config, slow_script, wait_for

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]


@pytest.fixture
def agent(actor_system, tmp_path):
    actor_system.start_tree(agent_tree(str(tmp_path)))
    config = session_config(None, model={"kind": "scripted", "script": str(slow_script(tmp_path / "slow.toml"))})
    return actor_system, Sessions(actor_system), config


def child_path(system, supervisor: str) -> str:
    running = [c for c in system.which_children(supervisor) if c.status == "running"]
    assert len(running) == 1, running
    return f"{supervisor}/{running[0].id}"


def ledger_entry(system, effect_id: str):
    from ouroactors.authorities.asking import ask_authority
    from ouroactors.authorities.ledger.messages import GetEntry

    return ask_authority(system, "agent/ledger", GetEntry(effect_id))


def committed_at_least(sessions: Sessions, session: str, n: int):
    return lambda: (view := sessions.show(session)).committed_cursor >= n and view


def test_a_killed_coordinator_is_replaced_and_reattaches_to_the_same_runtime(agent):
    system, sessions, config = agent
    sessions.new("s1", config)
    sessions.send("s1", "talk slowly")
    follower = sessions.events("s1", follow=True, until="turn_settled", idle_timeout=30)
    seen = [next(follower) for _ in range(4)]  # a subscriber is reading when the coordinator dies
    before = wait_for("some output committed", committed_at_least(sessions, "s1", 4))
    coordinator = child_path(system, "agent/coordinator")
    old_pid = system.kill(coordinator)

    def reattached():
        view = sessions.show("s1")
        return system.pid_of(coordinator) != old_pid and view.committed_cursor > before.committed_cursor and view
    after = wait_for("a new coordinator publishing again", reattached)
    assert after.runtime_id == before.runtime_id and after.generation == before.generation  # adopted, not replaced
    events = seen + list(follower)  # the same subscriber goes on: no gap, no duplicate
    assert [e.cursor for e in events] == list(range(1, len(events) + 1))  # no gap, no duplicate
    assert [e.kind for e in events].count("turn_started") == 1 and events[-1].data["status"] == "completed"
    assert {e.generation for e in events} == {before.generation}
    kinds = journal_kinds(system.data_dir, "s1")
    assert kinds.count("model_call") == 1 and kinds.count("turn_started") == 1  # the model was not asked again
    assert wait_for("suspended", lambda: sessions.show("s1").state == "suspended")


def test_a_killed_runtime_is_replaced_from_the_checkpoint(agent):
    system, sessions, config = agent
    sessions.new("s1", config)
    sessions.send("s1", "talk slowly")
    before = wait_for("some output committed", committed_at_least(sessions, "s1", 4))
    system.kill(child_path(system, "agent/execution"))

    def replaced():
        view = sessions.show("s1")
        return view.runtime_id not in (None, before.runtime_id) and view
    after = wait_for("a replacement runtime attached", replaced)
    assert after.generation > before.generation and after.state == "running"
    events = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=30))
    assert [e.cursor for e in events] == list(range(1, len(events) + 1))  # the replacement continued the cursor
    kinds = [e.kind for e in events]
    assert kinds.count("turn_resumed") == 1 and kinds[-1] == "turn_settled"  # the lost turn ran again, once,
    assert kinds.count("turn_started") == 1  # and what it repeated of the lost run's events is not published again
    texts = [e.data["text"] for e in events if e.kind == "text"]
    assert len(texts) == len(set(texts))  # (the slow script's deltas differ from each other)
    generations = [e.generation for e in events]
    assert generations == sorted(generations) and generations[-1] == after.generation
    assert wait_for("suspended", lambda: sessions.show("s1").state == "suspended")
    assert [e.cursor for e in sessions.events("s1")] == [e.cursor for e in events]


def test_a_replacement_reclaims_the_workspace_reservation_with_its_capability(actor_system, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    actor_system.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(actor_system)
    script = slow_script(tmp_path / "slow.toml")
    sessions.new("s1", session_config(ws, model={"kind": "scripted", "script": str(script)}))
    sessions.send("s1", "talk slowly")
    before = wait_for("some output committed", committed_at_least(sessions, "s1", 4))
    actor_system.kill(child_path(actor_system, "agent/execution"))
    events = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=40))
    assert [e.cursor for e in events] == list(range(1, len(events) + 1))
    assert events[-1].data["status"] == "completed" and max(e.generation for e in events) > before.generation
    assert wait_for("suspended", lambda: sessions.show("s1").state == "suspended")
    # The workspace is free again for the next turn: the reclaimed lease was released, not left reserved.
    sessions.send("s1", "again")
    assert list(sessions.events("s1", after=events[-1].cursor, follow=True, until="turn_settled",
                                idle_timeout=40))[-1].data["status"] == "completed"


def test_an_adopted_runtime_is_pushed_to_the_new_coordinator_and_closing_it_releases_its_lease(actor_system,
                                                                                                  tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    actor_system.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(actor_system)
    sessions.new("s1", session_config(ws, model={"kind": "scripted",
                                                 "script": str(slow_script(tmp_path / "slow.toml", 20, 50))}))
    sessions.send("s1", "talk slowly")
    before = wait_for("some output committed", committed_at_least(sessions, "s1", 3))
    system = actor_system
    coordinator = child_path(system, "agent/coordinator")
    old_pid = system.kill(coordinator)  # mid-turn, after a partial checkpoint: the runtime holds the lease
    events = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=30))
    assert [e.kind for e in events].count("turn_started") == 1  # adopted: the turn was not run again
    assert system.pid_of(coordinator) != old_pid
    after = wait_for("suspended", lambda: (v := sessions.show("s1")).state == "suspended" and v)
    assert after.state_version == before.state_version + 1
    wait_for("the adopted runtime closed", lambda: not [c for c in system.which_children("agent/execution")
                                                         if c.status == "running"])
    sessions.send("s1", "again")  # the adopted runtime's lease was released with it: the root can be leased again
    second = list(sessions.events("s1", after=after.committed_cursor, follow=True, until="turn_settled",
                                  idle_timeout=30))
    assert second[-1].data["status"] == "completed"


def world_system(actor_system_factory, world, tmp_path, *, reconciler: bool = True):
    """A multiproc system serving the agent tree with the fault workload's rules for ``world`` — and the world's
    reconciler on its ledger unless ``reconciler`` is False."""
    from ouroactors.faults.runner import prepare_tree

    with world.environ():  # the ledger's reconciler finds the world through the environment it inherits
        system = actor_system_factory()
    tree = prepare_tree(agent_tree(str(tmp_path)), allowed_root=str(tmp_path))
    if not reconciler:  # the same tree, its ledger without the world's reconciler
        ledger = tree.children[1].model_copy(update={"kwargs": {}})
        tree = tree.model_copy(update={"children": (tree.children[0], ledger, *tree.children[2:])})
    system.start_tree(tree)
    return system


def lost_mid_effect(actor_system_factory, world, tmp_path, call: dict, *, reconciler: bool = True):
    """An agent tree (the world's reconciler on its ledger unless ``reconciler`` is False) and session ``s1`` sent a
    turn whose one tool ``call`` (id ``e0``) runs — and whose runtime then exits (``os._exit`` at ``effect.ran``)
    before the settlement is committed. Returns (system, sessions)."""
    from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.md").write_text("hello\n")
    system = world_system(actor_system_factory, world, tmp_path, reconciler=reconciler)
    script = tmp_path / "turn.json"
    script.write_text(json.dumps({"turns": [{"events": [{"kind": "tool_call", "id": "e0", **call}]},
                                            {"events": [{"kind": "text", "text": "done"}]}]}))
    system.arm_faults("agent/execution", FaultPlan((FaultRule("effect.ran", FaultAction.EXIT),), forks=1))
    sessions = Sessions(system)
    sessions.new("s1", session_config(ws, tools={"enabled": [call["name"]]},
                                      model={"kind": "scripted", "script": str(script)}))
    sessions.send("s1", "go")
    return system, sessions


def http_call(world) -> dict:
    return {"name": "http", "arguments": {"method": "POST", "url": f"{world.url}/items", "json_body": {"p": "one"}}}


def test_a_runtime_lost_mid_effect_is_replaced_once_the_reconciler_settled_the_effect(actor_system_factory,
                                                                                       fault_world, tmp_path):
    """Seed 001: a lost runtime's unsettled effects are reconciled first, and only then does a replacement resume.

    The coordinator's recovery moves the session to ``recovering``, asks the ledger to reconcile it — the world's
    reconciler finds the idempotency key applied and settles the entry ``ok`` — and replaces the runtime, whose
    re-run turn finds the effect in the ledger and does not repeat it: the session completes, the world saw the
    effect once. Without a reconciler the same crash parks the session (next test).
    """
    system, sessions = lost_mid_effect(actor_system_factory, fault_world, tmp_path, http_call(fault_world))
    events = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=60))
    assert events[-1].kind == "turn_settled" and events[-1].data["status"] == "completed", events[-1]
    wait_for("suspended", lambda: sessions.show("s1").state == "suspended")
    assert events[-1].generation > events[0].generation  # a replacement ended the turn, not the runtime that died
    entry = ledger_entry(system, "s1/t1/e0")
    assert (entry.status.value, entry.settled_by) == ("ok", "reconciler:http_request"), entry
    with fault_world.client() as world:
        assert world.lookup("s1/t1/e0")["deliveries"] == 1  # the effect ran once, the replacement did not repeat it


def test_a_runtime_lost_mid_effect_without_a_reconciler_parks_the_session(actor_system_factory, fault_world,
                                                                          tmp_path):
    system, sessions = lost_mid_effect(actor_system_factory, fault_world, tmp_path, http_call(fault_world),
                                       reconciler=False)
    view = wait_for("parked", lambda: (v := sessions.show("s1")).state == "parked" and v, timeout=60)
    assert "ambiguous_effect" in view.reason and "s1/t1/e0" in view.reason, view.reason
    wait_for("the entry ambiguous", lambda: ledger_entry(system, "s1/t1/e0").status.value == "ambiguous")  # the
    # ledger's check of its writers makes it so within a quarter second: surfaced, never guessed (nor failed)


def test_a_runtime_lost_mid_read_is_replaced_and_the_model_told_the_read_failed(actor_system_factory, fault_world,
                                                                                 tmp_path):
    """A read changes nothing: the ledger's default reconciler settles a lost runtime's read ``failed`` (its result
    was lost), so the session is replaced and completes instead of parking for an operator."""
    system, sessions = lost_mid_effect(actor_system_factory, fault_world, tmp_path,
                                       {"name": "read", "arguments": {"path": "notes.md"}})
    events = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=60))
    assert events[-1].data["status"] == "completed", events[-1]
    entry = ledger_entry(system, "s1/t1/e0")
    assert (entry.kind, entry.status.value, entry.settled_by) == ("read", "failed", "reconciler:read"), entry
    results = [e.data for e in events if e.kind == "tool_result"]
    assert results[-1]["status"] == "failed"  # the replacement told the model what the ledger holds, not "ok"


def test_cancelling_a_parked_session_frees_its_reserved_workspace(actor_system_factory, fault_world, tmp_path):
    """A parked session keeps its workspace reserved for its recovery; cancelled, nobody will reclaim it, so the
    workspace releases the reservation (read from the durable record, not from a message) and another session may
    lease the root — what a rerun of an interrupted `ouroactors demo` needs."""
    from ouroactors.authorities.asking import ask_authority

    system, sessions = lost_mid_effect(actor_system_factory, fault_world, tmp_path, http_call(fault_world),
                                       reconciler=False)
    wait_for("parked", lambda: sessions.show("s1").state == "parked", timeout=60)

    def reserved() -> list:
        return [lease for lease in ask_authority(system, "agent/workspace", "leases")
                if lease.session_id == "s1" and lease.status == "reserved"]
    wait_for("the lost runtime's lease reserved for the session", reserved, timeout=30)
    before = sessions.show("s1").committed_cursor
    sessions.cancel("s1")
    wait_for("the reservation released", lambda: not reserved(), timeout=30)
    # the turn its lost runtime never settled ends in the log with the cancel (the ledger keeps the unknown effect)
    [settled] = list(sessions.events("s1", before))
    assert (settled.kind, settled.data["status"], settled.data["settled_by"]) == ("turn_settled", "cancelled",
                                                                                 "coordinator")
    ws = tmp_path / "ws"
    sessions.new("s2", session_config(ws, model={"kind": "scripted", "script": str(tmp_path / "turn.json")},
                                      tools={"enabled": ["read"]}))
    sessions.send("s2", "go")  # its runtime leases the same root now
    wait_for("s2 ran its turn", lambda: sessions.show("s2").state in ("suspended", "parked", "recovering")
             and sessions.show("s2").committed_cursor > 0, timeout=60)


def test_a_turn_whose_runtime_is_lost_before_it_published_anything_runs_again(actor_system, tmp_path):
    """The session's second message: its runtime dies at the turn's first step, before any event of the turn is
    committed, so the log still ends with the first turn's turn_settled. That settlement is an earlier turn's (it
    moved the session on when it was committed): recovery runs the message — it does not take the old settlement
    for this turn's and drop the message."""
    from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule

    from .actor_support import suspended_after_a_turn

    sessions = suspended_after_a_turn(actor_system, tmp_path)
    first = sessions.show("s1").committed_cursor
    actor_system.arm_faults("agent/execution", FaultPlan((FaultRule("runtime.turn_started", FaultAction.EXIT),),
                                                         forks=1))
    sessions.send("s1", "again")
    events = list(sessions.events("s1", first, follow=True, until="turn_settled", idle_timeout=30))
    assert events and (events[0].kind, events[0].turn) == ("turn_started", 2), events
    assert events[-1].data["status"] == "completed" and "two" in [e.data.get("text") for e in events]
    assert wait_for("suspended", lambda: sessions.show("s1").state == "suspended")
    fired = [e for e in actor_system.events.all() if e.kind == "fault_fired"]
    assert [e.fields["point"] for e in fired] == ["runtime.turn_started"]  # the first runtime of turn 2 was lost
