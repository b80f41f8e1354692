"""A command sent the moment its session's coordinator dies is forwarded again to the restarted one, not lost.

The coordinator's supervisor calls a SIGKILLed child running for the few milliseconds before it handles the exit;
a command the directory forwarded then reached no one, and its caller waited out its whole ask (60 s). Now the
forward comes back to the directory as a dead letter and goes to the next incarnation.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ouroactors.sessions import Sessions

from .actor_support import child_path, suspended_after_a_turn

pytestmark = [pytest.mark.multiproc]

ASK_S = 15.0  # unfixed, the send below is never answered: fail after this, not after the default 60 s


def test_a_message_sent_as_its_coordinator_dies_reaches_the_restarted_one(actor_system, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(Sessions._ask, "__defaults__", (ASK_S,))
    system = actor_system
    sessions = suspended_after_a_turn(system, tmp_path)
    first = list(sessions.events("s1"))
    assert first[-1].kind == "turn_settled"
    system.kill(child_path(system, "agent/coordinator"))
    sent = time.monotonic()
    sessions.send("s1", "again")  # at once: the supervisor has not handled the exit yet
    took = time.monotonic() - sent
    second = list(sessions.events("s1", after=first[-1].cursor, follow=True, until="turn_settled", idle_timeout=30))
    assert second[-1].kind == "turn_settled" and second[-1].data["status"] == "completed"
    assert [e.cursor for e in second] == list(range(first[-1].cursor + 1, first[-1].cursor + 1 + len(second)))
    assert took < ASK_S / 2, f"the send was answered after {took:.1f}s"
