"""A runtime that dies while the coordinator waits on an ask to it is replaced within seconds, not the ask's timeout.

The runtime is SIGKILLed inside its ``AckOutput`` handler (the ``runtime.output_acked`` fault point: the ack is
done, the answer never sent), so the coordinator is waiting on that ask — 10 s before it times out — when the
runtime dies. The measure runs from the moment the test sees the execution supervisor report the death to the
moment the session's record names a replacement runtime.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule
from ouroactors.runtime.coordinator.messages import SessionView
from ouroactors.sessions import Sessions

from .actor_support import agent_tree, session_config, slow_script, wait_for

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]

RECOVERED_WITHIN_S = 6.0  # the ask waited out its 10 s timeout before the watch (12 s measured); now ~1-2 s


def running_runtime(system) -> int | None:
    """The generation of the one running runtime child, None while there is none."""
    running = [c for c in system.which_children("agent/execution") if c.status == "running"]
    return running[0].generation if len(running) == 1 else None


def attached_after(sessions: Sessions, generation: int) -> SessionView | None:
    """The session's view once its record names a runtime of a generation above ``generation``."""
    view = sessions.show("s1")
    return view if view.generation is not None and view.generation > generation else None


@pytest.mark.parametrize("workspace", [False, True], ids=["no_workspace", "workspace"])
def test_a_runtime_killed_while_its_ack_is_awaited_is_replaced_within_seconds(actor_system, tmp_path: Path,
                                                                              workspace: bool):
    ws = tmp_path / "ws" if workspace else None
    if ws is not None:
        ws.mkdir()
    system = actor_system
    system.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(system)
    sessions.new("s1", session_config(ws, model={"kind": "scripted",
                                                 "script": str(slow_script(tmp_path / "slow.toml"))}))
    # The next runtime dies at its first ack handled a second or more into the turn (a heartbeat's lazy ack):
    # the coordinator has sent AckOutput and waits for the answer that never comes.
    system.arm_faults("agent/execution", FaultPlan((FaultRule("runtime.output_acked", FaultAction.KILL,
                                                             after_s=1.0, nth=1),), forks=1))
    sessions.send("s1", "talk slowly")
    # the first runtime's generation, from its first event (the test may see the record only after the kill)
    generation = wait_for("some output committed", lambda: next(iter(sessions.events("s1")), None)).generation

    def died() -> float | None:
        return time.monotonic() if running_runtime(system) != generation else None
    killed_at = wait_for("the runtime killed at its ack", died)
    after = wait_for("a replacement runtime attached", lambda: attached_after(sessions, generation))
    took = time.monotonic() - killed_at
    assert took < RECOVERED_WITHIN_S, f"recovery began {took:.1f}s after the runtime died"
    events = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=40))
    assert [e.cursor for e in events] == list(range(1, len(events) + 1))
    assert events[-1].data["status"] == "completed" and events[-1].generation == after.generation
    assert wait_for("suspended", lambda: sessions.show("s1").state == "suspended")
    sessions.send("s1", "again")  # the workspace (if any) is free for the next turn: the reclaimed lease released
    assert list(sessions.events("s1", after=events[-1].cursor, follow=True, until="turn_settled",
                                idle_timeout=40))[-1].data["status"] == "completed"
