"""A posture or session rule an operator sets is for a session that exists (review: ``grants add --session nosuch2``
exited 0, and ``session new nosuch2`` then started with the pre-seeded ``allow:Bash(*)``; ``grants posture s55 plan``
protected nothing)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from ouroactors import supervisor, worker
from ouroactors.authorities.asking import ask_authority
from ouroactors.authorities.grants.messages import AddRules, SetPosture, UnknownSession
from ouroactors.authorities.storage.commit import Committed
from ouroactors.authorities.storage.env import StorageConfig, close_env, open_env
from ouroactors.runtime.coordinator.record import PinnedVersions, SessionRecord
from ouroactors.runtime.coordinator.store import SessionStore
from ouroactors.runtime.coordinator.workflow import State

from ..e2e.cli_helpers import Served, agent_tree, cli

pytestmark = pytest.mark.multiproc


def _tree():
    return supervisor("agent", strategy="rest_for_one", intensity=10, children=[
        worker("storage", "ouroactors.authorities.storage.actor:Storage"),
        worker("ledger", "ouroactors.authorities.ledger.actor:Ledger"),
        worker("grants", "ouroactors.authorities.grants.actor:Grants"),
    ])


def _create_session(data_dir, session_id: str) -> None:
    """A coordinator's session record, written from this process as the coordinator writes it."""
    config = StorageConfig.under(data_dir)
    store = SessionStore(open_env(config))
    try:
        record = SessionRecord(session_id=session_id, node="n1", state=State.SUSPENDED, state_version=0, revision=0,
                               pinned=PinnedVersions(prompt="p", model="m", tools="t", workflow="w", policy="pol"),
                               principal="alice", tenant="t", channels=("cli",))
        assert isinstance(store.create(record), Committed)
    finally:
        close_env(config)


def test_the_authority_refuses_a_posture_or_session_rule_for_a_session_that_does_not_exist(actor_system):
    actor_system.start_tree(_tree())
    for refused in (SetPosture("s55", "plan", session_must_exist=True),
                    AddRules("session", ("allow:Bash(*)",), "nosuch2", session_must_exist=True)):
        with pytest.raises(UnknownSession, match="no session"):
            ask_authority(actor_system, "agent/grants", refused)
    stored = ask_authority(actor_system, "agent/grants", "rules")
    assert "session/nosuch2" not in stored["rules"] and stored["postures"] == {}  # nothing kept

    _create_session(actor_system.data_dir, "s1")  # once the session exists, the same requests are taken
    assert ask_authority(actor_system, "agent/grants", SetPosture("s1", "plan", session_must_exist=True)) == "plan"
    assert ask_authority(actor_system, "agent/grants",
                         AddRules("session", ("allow:Bash(make *)",), "s1", session_must_exist=True))
    # user and workspace rules name no session; a bare runtime's principal (no record) is not asked to exist
    assert ask_authority(actor_system, "agent/grants", AddRules("user", ("allow:Bash(ls)",), session_must_exist=True))
    assert ask_authority(actor_system, "agent/grants", SetPosture("bare", "plan")) == "plan"


@pytest.mark.slow
def test_the_cli_refuses_an_unknown_session_and_a_later_session_of_that_id_inherits_nothing(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    served = Served(tmp_path, agent_tree(tmp_path, workspace))
    try:
        for args in (["add", "allow:Bash(*)", "--session", "nosuch2"], ["posture", "s55", "plan"],
                     ["add", "--scope", "session", "--session", "nosuch2", "allow:Bash(*)"]):
            refused = cli("grants", *args, cwd=tmp_path)
            assert refused.returncode == 2, (args, refused.stdout, refused.stderr)
            name = "s55" if args[0] == "posture" else "nosuch2"
            assert f"UnknownSession: no session {name!r}" in refused.stderr, refused.stderr

        created = cli("session", "new", "nosuch2", "--workspace", str(workspace), "--sandbox", "none", cwd=tmp_path)
        assert created.returncode == 0, created.stderr
        listed = json.loads(cli("grants", "list", "--session", "nosuch2", "--json", cwd=tmp_path).stdout)
        assert "session/nosuch2" not in listed["rules"], listed  # the refused allow:Bash(*) was never kept
        assert listed["postures"] == {"nosuch2": "default"}

        added = cli("grants", "add", "allow:Bash(echo *)", "--session", "nosuch2", cwd=tmp_path)  # it exists now
        assert added.returncode == 0 and added.stdout.strip() == "session/nosuch2: allow:Bash(echo *)", added.stderr
        posture = cli("grants", "posture", "nosuch2", "plan", cwd=tmp_path)
        assert posture.returncode == 0 and posture.stdout.strip() == "nosuch2: posture plan", posture.stderr

        served.proc.send_signal(signal.SIGTERM)
        assert served.finish()[0] == 0
    finally:
        served.kill()
