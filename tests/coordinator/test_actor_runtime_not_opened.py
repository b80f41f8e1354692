"""A runtime the coordinator started but could not open the session on is stopped, not left running.

The coordinator starts a runtime child first, then leases the workspace for it (the runtime is the lease's owner),
then opens it. When the lease is refused — here the root is held, exclusively, by someone else — the turn does not
start (the session is suspended with the reason); the runtime started for it ran nothing and must not outlive it.
It used to be left running, one idle process per refused turn, until the system stopped.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ouroactors.authorities.asking import ask_authority
from ouroactors.authorities.workspace.messages import Acquire
from ouroactors.sessions import Sessions

from .actor_support import agent_tree, child_path, session_config, suspended_after_a_turn, wait_for

pytestmark = [pytest.mark.multiproc]


def running_runtimes(system) -> list[str]:
    return [c.id for c in system.which_children("agent/execution") if c.status == "running"]


def test_a_runtime_whose_workspace_lease_is_refused_is_stopped_with_the_turn_that_did_not_start(actor_system,
                                                                                               tmp_path: Path):
    system = actor_system
    ws = tmp_path / "ws"
    ws.mkdir()
    system.start_tree(agent_tree(str(tmp_path)))
    # someone else holds the root exclusively, with a live owner (the grants actor stands in for one)
    held = ask_authority(system, "agent/workspace", Acquire(str(ws), "exclusive", "other",
                                                            owner=system.resolve("agent/grants")))
    sessions = Sessions(system)
    (tmp_path / "never-read.toml").write_text('[[turns]]\nevents = [{kind = "text", text = "ok"}]\n')  # read by new
    sessions.new("s1", session_config(ws, model={"kind": "scripted", "script": str(tmp_path / "never-read.toml")}))
    with pytest.raises(Exception, match="the turn did not start: workspace lease refused"):
        sessions.send("s1", "hello")
    assert sessions.show("s1").state == "suspended"
    assert running_runtimes(system) == []  # the runtime started for the refused turn is gone with it
    [lease] = ask_authority(system, "agent/workspace", "leases")
    assert lease.lease_id == held.lease.lease_id  # and the other holder's lease is untouched


def test_a_runtime_started_for_an_idle_session_and_never_opened_is_stopped_by_its_next_coordinator(actor_system,
                                                                                                  tmp_path: Path):
    """A coordinator that died between starting a runtime (its location kept) and opening it leaves a runtime that
    opened nothing; when the session's next coordinator finds it idle, it stops that runtime (it used to leave it
    running: as the owner of a lease granted to it, it kept that lease from every later turn)."""
    system = actor_system
    sessions = suspended_after_a_turn(system, tmp_path)
    stray = system.start_child("agent/execution", ())  # what the dead coordinator had started and located
    code = ("import sys\nfrom ouroactors.runtime.coordinator.configs import put_runtime\n"
            "from ouroactors.runtime.coordinator.store import SessionStore\n"
            "put_runtime(SessionStore.open(sys.argv[1]), 's1', sys.argv[2], int(sys.argv[3]))\n")
    subprocess.run([sys.executable, "-c", code, str(system.data_dir), stray.id, str(stray.generation)], check=True,
                   timeout=60)
    coordinator = child_path(system, "agent/coordinator")
    system.kill(coordinator)  # its supervisor restarts it, and the new one recovers the session first
    wait_for("the coordinator back", lambda: system.child_info(coordinator).status == "running")
    sessions.send("s1", "again")
    events = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=30, after=0))
    assert events[-1].data["status"] == "completed"
    wait_for("the unopened runtime stopped", lambda: stray.id not in running_runtimes(system), timeout=15)
