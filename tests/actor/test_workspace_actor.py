"""The workspace authority on real processes: leases survive as reservations, fencing stops zombies."""

from __future__ import annotations

import pytest

from ouroactors import supervisor, worker
from ouroactors.authorities.asking import ask_authority
from ouroactors.authorities.workspace.actor import Acquire, CheckFence, Reclaim, Release
from ouroactors.authorities.workspace.leases import LeaseConflict, NotReservationOwner, StaleFence
from ouroactors.authorities.workspace.paths import PathEscapes

from .helpers import ECHO, wait_until

pytestmark = pytest.mark.multiproc


def tree(root: str):
    return supervisor("agent", strategy="rest_for_one", intensity=10, children=[
        worker("storage", "ouroactors.authorities.storage.actor:Storage"),
        worker("workspace", "ouroactors.authorities.workspace.actor:Workspace",
               kwargs={"allowed_roots": [root], "heartbeat_s": 0.1, "owner_lost_after_s": 0.5}),
        supervisor("sessions", [worker("s1", ECHO), worker("s2", ECHO)], intensity=10),
    ])


def test_leases_conflicts_owner_death_reclaim_and_fencing(actor_system, tmp_path):
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    actor_system.start_tree(tree(str(tmp_path)))
    s1, s2 = actor_system.resolve("agent/sessions/s1"), actor_system.resolve("agent/sessions/s2")
    granted = ask_authority(actor_system, "agent/workspace", Acquire(str(project), "exclusive", "session-1", owner=s1))
    lease = granted.lease
    assert lease.root == str(project) and lease.status == "active"

    with pytest.raises(LeaseConflict) as caught:  # an overlapping root, another session
        ask_authority(actor_system, "agent/workspace",
                      Acquire(str(project / "src"), "shared_read", "session-2", owner=s2))
    assert "session-1" in str(caught.value)
    with pytest.raises(PathEscapes):
        ask_authority(actor_system, "agent/workspace",
                      Acquire(str(project / ".." / ".."), "exclusive", "session-2", owner=s2))

    assert ask_authority(actor_system, "agent/workspace",
                         CheckFence(str(project / "src" / "x.py"), lease.fencing_token))
    mark = actor_system.mark()
    actor_system.kill("agent/sessions/s1")  # the owner dies; its session is not known to be over
    actor_system.wait_for("started", "agent/sessions/s1", after=mark)
    wait_until(lambda: ask_authority(actor_system, "agent/workspace", "leases")[0].status == "reserved",
               what="the lease to become a reservation")
    with pytest.raises(LeaseConflict):  # a reservation still blocks others
        ask_authority(actor_system, "agent/workspace", Acquire(str(project), "exclusive", "session-2", owner=s2))
    with pytest.raises(StaleFence):  # the zombie's late write is refused
        ask_authority(actor_system, "agent/workspace", CheckFence(str(project / "src" / "x.py"), lease.fencing_token))
    with pytest.raises(NotReservationOwner):  # a claim without the session's proof
        ask_authority(actor_system, "agent/workspace", Reclaim("session-1", str(project), "exclusive", b"\0" * 32))

    new_owner = actor_system.resolve("agent/sessions/s1")
    again = ask_authority(actor_system, "agent/workspace",
                          Reclaim("session-1", str(project), "exclusive", granted.capability,
                                                        owner=new_owner))
    assert again.lease.fencing_token > lease.fencing_token and again.lease.status == "active"
    assert ask_authority(actor_system, "agent/workspace", CheckFence(str(project), again.lease.fencing_token))
    released = ask_authority(actor_system, "agent/workspace",
                             Release(again.lease.lease_id, capability=again.capability))
    assert released.status == "released"
    assert ask_authority(actor_system, "agent/workspace",
                         Release(again.lease.lease_id, capability=again.capability)).status \
        == "released"  # idempotent


def test_workspace_restart_turns_live_leases_into_reservations(actor_system, tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    actor_system.start_tree(tree(str(tmp_path)))
    owner = actor_system.resolve("agent/sessions/s1")
    granted = ask_authority(actor_system, "agent/workspace",
                            Acquire(str(project), "exclusive", "session-1", owner=owner))
    mark = actor_system.mark()
    actor_system.kill("agent/workspace")  # rest_for_one restarts the sessions too: no owner survives
    actor_system.wait_for("started", "agent/sessions/s2", after=mark)
    [lease] = ask_authority(actor_system, "agent/workspace", "leases")
    assert lease.lease_id == granted.lease.lease_id and lease.status == "reserved"  # rebuilt from LMDB
    new_owner = actor_system.resolve("agent/sessions/s1")
    reclaimed = ask_authority(actor_system, "agent/workspace", Reclaim("session-1", str(project), "exclusive",
                                                            granted.capability, owner=new_owner))
    assert reclaimed.lease.fencing_token > granted.lease.fencing_token
