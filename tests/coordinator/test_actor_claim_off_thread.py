"""A new coordinator reports its start before its claim of the session is committed: the claim's synced commit runs
beside its actor thread (``OffThread``), so creating a session does not wait for it, and the recovery that follows
still runs before any command (commands wait behind the recovery job)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule
from ouroactors.sessions import Sessions

from .actor_support import agent_tree, session_config, wait_for

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]

CLAIM_DELAY_S = 2.0


def claimed_by(data_dir: str, session_id: str) -> str:
    """The incarnation the session's record names as its writer ("" for none), read in another process (this one
    runs the system and must not hold the environment)."""
    code = ("import sys\n"
            "from ouroactors.runtime.coordinator.store import SessionStore\n"
            "record = SessionStore.open(sys.argv[1]).get(sys.argv[2])\n"
            "print(record.coordinator or '' if record is not None else 'missing')\n")
    out = subprocess.run([sys.executable, "-c", code, str(data_dir), session_id], capture_output=True, text=True,
                         timeout=60, check=True)
    return out.stdout.strip()


def test_creating_a_session_does_not_wait_for_its_coordinators_claim_commit(actor_system, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    actor_system.start_tree(agent_tree(str(tmp_path)))
    # the next coordinator's first commit (its claim) is held back; without the claim off the actor thread, its
    # start (and with it the session's creation) waited for it
    actor_system.arm_faults("agent/coordinator", FaultPlan((FaultRule("storage.before_commit", FaultAction.DELAY,
                                                                      nth=1, delay_s=CLAIM_DELAY_S),), forks=1))
    sessions = Sessions(actor_system)
    sessions.new("s1", session_config(ws))
    assert claimed_by(actor_system.data_dir, "s1") == ""  # created and answered; the claim still on its way
    incarnation = wait_for("the claim", lambda: claimed_by(actor_system.data_dir, "s1") or None)
    assert incarnation.startswith("c.")
    sessions.send("s1", "hello")  # waited behind the recovery, then ran as usual
    events = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=30))
    assert events[-1].data["status"] == "completed", events[-1]
