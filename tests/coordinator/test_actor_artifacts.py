"""A session's artifacts (seed 001: the durable record names them): the content its settled file effects left,
named by SHA-256 and read from the ledger — on real processes, and the pure derivation's edge cases."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace

import pytest

from ouroactors.runtime.coordinator.artifacts import artifacts_of
from ouroactors.sessions import Sessions

from .actor_support import RULES, agent_tree, session_config, wait_for


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def entry(seq: int, status: str, intent: dict | None, kind: str = "tool_call", effect_id: str | None = None):
    return SimpleNamespace(seq=seq, status=SimpleNamespace(value=status), effect_id=effect_id or f"e{seq}", kind=kind,
                           evidence={"intent": intent} if intent is not None else None, settled_ns=seq * 10)


def test_only_settled_file_effects_are_artifacts_and_the_latest_of_a_path_is_current() -> None:
    found = artifacts_of([
        entry(3, "ok", {"path": "/w/a", "before": sha("1"), "after": sha("2")}),
        entry(1, "ok", {"path": "/w/a", "before": None, "after": sha("1")}),
        entry(2, "ambiguous", {"path": "/w/b", "before": None, "after": sha("x")}),  # may not have happened
        entry(4, "failed", {"path": "/w/c", "before": None, "after": sha("y")}),  # did not happen
        entry(5, "ok", None),  # a shell call: no file intent
        entry(6, "ok", {"path": "/w/b", "before": sha("b"), "after": None}, kind="compensation"),  # undone: removed
    ])
    assert [(a.effect_id, a.artifact_id, a.replaced, a.current) for a in found] == [
        ("e1", f"sha256:{sha('1')}", None, False), ("e3", f"sha256:{sha('2')}", f"sha256:{sha('1')}", True),
        ("e6", "deleted", f"sha256:{sha('b')}", True)]


@pytest.mark.multiproc
@pytest.mark.slow
def test_a_sessions_artifacts_name_the_content_its_writes_left(actor_system, tmp_path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("draft\n")
    script = tmp_path / "write.toml"
    script.write_text('[[turns]]\nevents = [{ kind = "tool_call", id = "c1", name = "edit", arguments = '
                      '{ path = "notes.txt", old = "draft", new = "final" } }]\n'
                      '[[turns]]\nevents = [{ kind = "text", text = "edited" }]\n')
    actor_system.start_tree(agent_tree(str(tmp_path), RULES))
    sessions = Sessions(actor_system)
    sessions.new("s1", session_config(ws, model={"kind": "scripted", "script": str(script)}))
    assert sessions.artifacts("s1") == []
    sessions.send("s1", "finish the notes")
    wait_for("settled", lambda: sessions.show("s1").state == "suspended")
    [artifact] = sessions.artifacts("s1")
    assert (ws / "notes.txt").read_text() == "final\n"
    assert artifact.artifact_id == f"sha256:{sha('final' + chr(10))}" and artifact.current
    assert artifact.replaced == f"sha256:{sha('draft' + chr(10))}"
    assert artifact.path == str((ws / "notes.txt").resolve())
