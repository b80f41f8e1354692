"""A turn that waits for an approval after a call with a large output goes on once the approval is answered.

The wait ends the turn's runtime; the answer re-runs the turn on a new one, which does not run the earlier call
again (the ledger holds its effect) but tells the model the result the journal recorded. An output too large to
keep inline is a blob in its record, and the re-run took the blob's reference for the output: the runtime crashed on
it, every replacement crashed the same way, and the session never went on (found by using the CLI as a user would).
"""

from __future__ import annotations

import pytest

from ouroactors.sessions import Sessions

from ..e2e.cli_helpers import cli
from .actor_support import RULES, agent_tree, session_config, wait_for

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]


def test_the_rerun_after_an_approval_replays_a_large_recorded_output(actor_system, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "big.txt").write_text("y\n" * 50_000)  # grep's output: 100 kB, capped to 64 KiB, kept as a blob
    script = tmp_path / "turns.toml"
    one = '[[turns]]\nevents = [{{ kind = "tool_call", id = "{}", name = "shell", arguments = {{ command = "{}" }}}}]\n'
    script.write_text(one.format("c1", "grep y big.txt") + one.format("c2", "touch ok.txt")
                      + '[[turns]]\nevents = [{ kind = "text", text = "done" }]\n')
    actor_system.start_tree(agent_tree(str(tmp_path), {"user": [*RULES["user"], "ask:Bash(touch *)"]}))
    sessions = Sessions(actor_system)
    sessions.new("s1", session_config(ws, model={"kind": "scripted", "script": str(script)}))
    sessions.send("s1", "go")
    wait_for("waiting", lambda: sessions.show("s1").state == "waiting:approval")
    [pending] = sessions.approvals("s1")
    sessions.approve("s1", pending.approval_id, "fine")
    events = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=30))
    assert events[-1].kind == "turn_settled" and events[-1].data["status"] == "completed", events[-1]
    assert [e.data["status"] for e in events if e.kind == "tool_result"] == ["ok", "ok"]
    assert (ws / "ok.txt").exists()
    crashed = [e for e in actor_system.events.all() if e.kind == "exited" and e.reason.get("kind") == "crash"]
    assert crashed == []


def test_a_write_too_large_to_show_whole_is_put_to_the_operator_and_runs_once_approved(actor_system, tmp_path):
    """A ``write`` of 92 kB needs an approval. Its arguments were over what the grants door lets an approval keep:
    the request was refused, the coordinator asked again at every drain, and the session stayed ``running`` for
    ever. Now the approval shows a bounded view (the content's size, SHA-256 and first characters) and binds it."""
    ws = tmp_path / "ws"
    ws.mkdir()
    content = "line of generated text\\n" * 4000
    script = tmp_path / "turns.toml"
    script.write_text('[[turns]]\nevents = [{ kind = "tool_call", id = "w1", name = "write", arguments = '
                      f'{{ path = "BIG.md", content = "{content}" }} }}]\n'
                      '[[turns]]\nevents = [{ kind = "text", text = "written" }]\n')
    actor_system.start_tree(agent_tree(str(tmp_path), {"user": ["allow:Read(**)"]}))  # a write is asked about
    sessions = Sessions(actor_system)
    sessions.new("s1", session_config(ws, model={"kind": "scripted", "script": str(script)},
                                      tools={"enabled": ["read", "write"]}))
    sessions.send("s1", "go")
    wait_for("waiting", lambda: sessions.show("s1").state == "waiting:approval", timeout=60)
    [pending] = sessions.approvals("s1")
    shown = pending.arguments["content"]["$elided"]
    assert shown["bytes"] == len(content) - 4000 and shown["head"].startswith("line of generated text")
    seen = cli("session", "show", "s1", "--data-dir", str(actor_system.data_dir), cwd=tmp_path)
    assert seen.returncode == 0 and "every byte is in its tool_call event" in " ".join(seen.stdout.split()), seen
    sessions.approve("s1", pending.approval_id, "fine")
    events = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=30))
    assert events[-1].data["status"] == "completed", events[-1]
    assert [e.data["status"] for e in events if e.kind == "tool_result"] == ["ok"]
    assert (ws / "BIG.md").read_text() == "line of generated text\n" * 4000


def test_an_approval_grants_refuses_to_take_parks_the_session_saying_why(actor_system, tmp_path):
    """Grants refuses the request (here: no approval may be pending in a session). The coordinator took the refusal
    for a lost request and asked again at every drain, the session ``running`` for ever; now it parks, naming it."""
    ws = tmp_path / "ws"
    ws.mkdir()
    script = tmp_path / "turns.toml"
    script.write_text('[[turns]]\nevents = [{ kind = "tool_call", id = "c1", name = "shell", '
                      'arguments = { command = "touch x" } }]\n[[turns]]\nevents = [{ kind = "text", text = "ok" }]\n')
    actor_system.start_tree(agent_tree(str(tmp_path), {"user": [*RULES["user"], "ask:Bash(touch *)"]},
                                       grants_kwargs={"max_pending_per_session": 0}))
    sessions = Sessions(actor_system)
    sessions.new("s1", session_config(ws, model={"kind": "scripted", "script": str(script)}))
    sessions.send("s1", "go")
    view = wait_for("parked", lambda: (v := sessions.show("s1")).state == "parked" and v, timeout=60)
    assert "the approval of shell could not be asked" in view.reason and "pending approvals" in view.reason, view
    assert not (ws / "x").exists() and sessions.approvals("s1") == []
