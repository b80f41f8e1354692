"""A command whose session directory is SIGKILLed while it holds it is answered ``ActorStopped`` at once.

The directory holds a caller's command until the coordinator it forwarded it to answers (with the caller's ref,
directly). Here that coordinator stalls (10 s) and the directory is killed meanwhile. Before, the caller heard
nothing until the stall ended, and then an internal error: the restarted directory's sweep had started a second
coordinator, and the stalled one, losing its commit to it, answered ``RevisionConflict`` ("another coordinator wrote
it; this one must stop"). The handle now reads the supervisor's ``exited`` of the directory's generation
(:mod:`ouroactors.system._stopped`) and says so within about a second; the command may have been taken, so it is
sent again with its event id, and the turn runs once.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from ouroactors import ActorStopped
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule
from ouroactors.sessions import Sessions
from ouroactors.supervision.events import EventReader

from .actor_support import child_path, suspended_after_a_turn, wait_for

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]

ASK_S = 30.0  # unfixed, the send below is answered by nobody: it fails after this


def test_a_command_held_by_a_killed_directory_is_answered_actor_stopped(actor_system, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(Sessions._ask, "__defaults__", (ASK_S,))
    system = actor_system
    sessions = suspended_after_a_turn(system, tmp_path)
    before = list(sessions.events("s1"))[-1].cursor
    directory_pid = system.child_info("agent/sessions").pid
    # the coordinator stalls on the message's resume commit, so the directory holds the command meanwhile
    system.arm_faults(child_path(system, "agent/coordinator"), FaultPlan((FaultRule(
        "coordinator.resume_committed", FaultAction.DELAY, delay_s=10.0, nth=1),)))
    events = EventReader(str(Path(system.data_dir) / "events.jsonl"))

    def kill_when_stalled() -> None:
        wait_for("the coordinator stalled", lambda: any(
            e.kind == "fault_fired" and e.fields.get("point") == "coordinator.resume_committed" for e in events.poll()),
            timeout=30)
        os.kill(directory_pid, signal.SIGKILL)

    killer = threading.Thread(target=kill_when_stalled)
    killer.start()
    sent = time.monotonic()
    with pytest.raises(ActorStopped, match="agent/sessions"):
        sessions.send("s1", "again", event_id="m-2")
    took = time.monotonic() - sent
    killer.join(30)
    assert took < 8, f"the send was answered after {took:.1f} s"  # before the stall ends: not the coordinator's
    # sent again with its event id once the directory is back: the turn runs once
    wait_for("a new directory", lambda: system.child_info("agent/sessions").status == "running", timeout=30)
    wait_for("the message taken", lambda: _send_again(sessions), timeout=60)
    turn = list(sessions.events("s1", after=before, follow=True, until="turn_settled", idle_timeout=30))
    assert turn[-1].kind == "turn_settled" and turn[-1].data["status"] == "completed"
    assert [e.kind for e in turn].count("turn_started") == 1  # taken once, whichever send it was


def _send_again(sessions: Sessions) -> bool:
    try:
        sessions.send("s1", "again", event_id="m-2")
    except Exception as exc:  # the directory still restarting, or the first one taken: "duplicate" is an answer
        return "duplicate" in str(exc)
    return True
