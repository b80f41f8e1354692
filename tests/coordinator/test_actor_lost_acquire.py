"""A workspace killed after recording a session's lease, before answering it: the next coordinator reclaims it by key.

The coordinator has started the turn's runtime and asked the workspace for its lease; the workspace is SIGKILLed at
``workspace.lease_recorded`` — the grant is durable, its answer lost, nothing kept beside the session's record.
rest_for_one restarts everything after the workspace; the rebuilt lease is a reservation of the session. The next
coordinator incarnation starts another runtime, whose own Acquire meets that reservation (``ReservationPending``),
and takes it over with the key of the runtime before its own, recomputed from the durable record (the ``earlier``
fallback of ``_lease_workspace``). That key is an HMAC under the data dir's coordinator secret
(:mod:`ouroactors.runtime.coordinator.request_keys`): the lease the workspace holds is keyed by it, never by the
old ``"<session>.g<generation>"`` anyone could derive.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ouroactors.authorities.asking import ask_authority
from ouroactors.authorities.workspace.leases import request_digest
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule
from ouroactors.runtime.coordinator.messages import SendMessage
from ouroactors.runtime.coordinator.request_keys import KEY_FILE, acquire_request_id
from ouroactors.sessions import Sessions
from ouroactors.system._secret import read_secret_file

from .actor_support import agent_tree, session_config, slow_script, wait_for

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]


def two_slow_turns(path: Path) -> Path:
    """The slow turn, and a next one slow enough (~1 s) that its lease is seen held, however loaded the box."""
    slow_script(path)
    chunks = ", ".join(f'{{ kind = "text", text = "n{i} " }}' for i in range(10))
    first = path.read_text().split("\n\n")[0]
    path.write_text(f"{first}\n\n[[turns]]\npace_ms = 100\nevents = [{chunks}]\n")
    return path


def live_leases(system) -> list:
    return ask_authority(system, "agent/workspace", "leases")


def runtime_generations(system) -> list[int]:
    """The generation of every runtime started in this run, in start order (from the supervision event log)."""
    system.events.poll()
    return [e.generation for e in system.events.seen
            if e.kind == "started" and e.path.startswith("agent/execution/") and e.generation is not None]


def test_a_grant_lost_with_the_workspace_is_reclaimed_by_the_next_coordinator_with_the_earlier_runtimes_key(
        actor_system, tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    system = actor_system
    system.start_tree(agent_tree(str(tmp_path)))
    system.arm_faults("agent/workspace", FaultPlan((FaultRule("workspace.lease_recorded", FaultAction.KILL, nth=1),)))
    sessions = Sessions(system)
    sessions.new("s1", session_config(ws, model={"kind": "scripted",
                                                 "script": str(two_slow_turns(tmp_path / "slow.toml"))}))
    # told, not asked: the directory that would answer is restarted with everything after the workspace
    system.tell(sessions.directory, SendMessage("s1", "talk slowly", sessions.principal, "m-lost-acquire"))
    fired = system.wait_for("fault_fired", "agent/workspace", timeout=20)
    assert fired.fields["point"] == "workspace.lease_recorded" and fired.fields["action"] == "kill"

    secret = read_secret_file(system.data_dir / KEY_FILE)  # written by the coordinator before its first Acquire

    def key_of(generation: int) -> str:
        return request_digest("s1", acquire_request_id(secret, "s1", generation))

    # The lost grant's lease, taken over for a later runtime: still keyed by the key of the runtime whose Acquire
    # was lost (the first one started), recomputed by the next incarnation — the earlier fallback.
    held = wait_for("the session's lease active again",
                    lambda: (x := live_leases(system)) and x[0].status == "active" and x, timeout=40)
    [lease] = held
    first, *later = runtime_generations(system)
    assert later, "no runtime was started after the workspace's restart"
    assert lease.request_sha256 == key_of(first), "not keyed by the HMAC of the lost runtime's generation"
    assert lease.request_sha256 != request_digest("s1", f"s1.g{first}")  # not the old, guessable key
    assert lease.fencing_token > 1  # reclaimed after the restart: a larger token than the lost grant's

    events = list(sessions.events("s1", follow=True, until="turn_settled", idle_timeout=40))
    assert [e.cursor for e in events] == list(range(1, len(events) + 1))
    assert events[-1].data["status"] == "completed", events[-1]  # not refused: the reservation was reclaimed
    assert wait_for("suspended", lambda: sessions.show("s1").state == "suspended")
    wait_for("the lease released", lambda: live_leases(system) == [])

    sessions.send("s1", "again")  # the root is free for the next turn, leased under its own runtime's key
    [lease] = wait_for("the next turn's lease", lambda: (x := live_leases(system)) and x[0].status == "active" and x)
    assert lease.request_sha256 == key_of(runtime_generations(system)[-1])
    assert list(sessions.events("s1", after=events[-1].cursor, follow=True, until="turn_settled",
                                idle_timeout=40))[-1].data["status"] == "completed"
