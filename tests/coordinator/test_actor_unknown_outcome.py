"""A tool call whose outcome is unknown ends the turn, and the session goes to recovery before anything else runs.

Seed 001: "query downstream state before retrying an ambiguous write". An ``http`` POST whose reply comes after the
tool's deadline may or may not have been applied. The model is not asked again (it could only guess, or retry the
write under a new idempotency key); the turn settles ``ambiguous`` and the coordinator takes the session to
``recovering``: the effect's reconciler settles it and the session waits for the next message, or — with no
reconciler — the session parks for an operator, naming the effect.
"""

from __future__ import annotations

import json

import pytest

from ouroactors.sessions import Sessions

from .actor_support import journal_kinds, session_config, wait_for
from .test_actor_recovery import ledger_entry, world_system

pytestmark = [pytest.mark.multiproc]


def unknown_post(actor_system_factory, world, tmp_path, *, reconciler: bool = True):
    """Session ``s1``: one turn whose model asks for an http POST (id ``e0``) that the world applies but answers
    after the tool's 0.5 s deadline, then — if it were asked again — would retry it under another call id."""
    ws = tmp_path / "ws"
    ws.mkdir()
    system = world_system(actor_system_factory, world, tmp_path, reconciler=reconciler)
    post = {"name": "http", "arguments": {"method": "POST", "url": f"{world.url}/items",
                                          "json_body": {"payload": {"reply_delay_s": 3}}}}
    retry = {**post, "id": "e1"}
    script = tmp_path / "turn.json"
    script.write_text(json.dumps({"turns": [{"events": [{"kind": "tool_call", "id": "e0", **post}]},
                                            {"events": [{"kind": "tool_call", **retry}]},
                                            {"events": [{"kind": "text", "text": "done"}]}]}))
    sessions = Sessions(system)
    sessions.new("s1", session_config(ws, tools={"enabled": ["http"]}, limits={"tool_deadline_s": 0.5},
                                      model={"kind": "scripted", "script": str(script)}))
    sessions.send("s1", "go")
    return system, sessions


def test_an_unknown_outcome_ends_the_turn_and_recovery_reconciles_it_before_the_next_message(actor_system_factory,
                                                                                              fault_world, tmp_path):
    system, sessions = unknown_post(actor_system_factory, fault_world, tmp_path)
    events = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=60))
    settled = events[-1]
    assert settled.kind == "turn_settled" and settled.data["status"] == "ambiguous", settled
    assert [e.data["status"] for e in events if e.kind == "tool_result"] == ["unknown"]
    try:
        view = wait_for("suspended after recovery", lambda: (v := sessions.show("s1")).state == "suspended" and v,
                        timeout=60)
    except AssertionError as exc:  # say where it is instead, and why (a park names its reason)
        shown = sessions.show("s1")
        log = system.data_dir / "admin.out"  # every actor's log lines (system._logs)
        said = [line for line in (log.read_text(errors="replace").splitlines() if log.exists() else [])
                if "reconcil" in line or "ambiguous" in line]
        raise AssertionError(f"{exc}; the session is {shown.state}: {shown.reason}; "
                             f"{ledger_entry(system, 's1/t1/e0')}; the log said: {said[-10:]}") from None
    entry = ledger_entry(system, "s1/t1/e0")
    assert (entry.status.value, entry.settled_by) == ("ok", "reconciler:http_request"), entry
    kinds = journal_kinds(system.data_dir, "s1")
    assert kinds.count("model_call") == 1, " ".join(kinds)  # the model was not asked again after the unknown outcome
    with pytest.raises(Exception, match="no effect 's1/t1/e1'"):  # so it could not retry under another key
        ledger_entry(system, "s1/t1/e1")
    with fault_world.client() as world:
        assert world.lookup("s1/t1/e0")["deliveries"] == 1
    assert view.state == "suspended"
    # the record says why the turn stopped short (it was None: a turn cut short with no reason on the session)
    assert view.reason is not None and view.reason.startswith("the last turn stopped on an effect of unknown outcome")


def test_an_unknown_outcome_with_no_reconciler_parks_the_session_naming_the_effect(actor_system_factory,
                                                                                    fault_world, tmp_path):
    system, sessions = unknown_post(actor_system_factory, fault_world, tmp_path, reconciler=False)
    view = wait_for("parked", lambda: (v := sessions.show("s1")).state == "parked" and v, timeout=60)
    assert "ambiguous_effect" in view.reason and "s1/t1/e0" in view.reason, view.reason
    assert journal_kinds(system.data_dir, "s1").count("model_call") == 1
    assert ledger_entry(system, "s1/t1/e0").status.value in ("started", "ambiguous")  # surfaced, never guessed
