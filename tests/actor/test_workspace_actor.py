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


def test_an_owner_whose_port_another_worker_holds_is_found_gone(actor_system, tmp_path):
    """A lease names its owner's worker generation: the heartbeats go addressed to it, so another worker that got a
    dead owner's port refuses them instead of answering for the dead one. Here lease ``a`` names s1's generation at
    s2's port (as if s1 had died and s2 got its port): it becomes a reservation, while lease ``b``, naming s1 at its
    own port and pinged on the same heartbeats, stays active. Before, s2 answered for s1 and both stayed active."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    actor_system.start_tree(tree(str(tmp_path)))
    s1, s2 = actor_system.resolve("agent/sessions/s1"), actor_system.resolve("agent/sessions/s2")
    s1_generation = actor_system.child_info("agent/sessions/s1").generation
    ask_authority(actor_system, "agent/workspace", Acquire(str(tmp_path / "a"), "exclusive", "session-a", owner=s2,
                                                           owner_generation=s1_generation))
    ask_authority(actor_system, "agent/workspace", Acquire(str(tmp_path / "b"), "exclusive", "session-b", owner=s1,
                                                           owner_generation=s1_generation))

    def statuses() -> dict[str, str]:
        return {lease.session_id: lease.status for lease in ask_authority(actor_system, "agent/workspace", "leases")}
    wait_until(lambda: statuses()["session-a"] == "reserved", what="the lease of the owner that is gone reserved")
    assert statuses()["session-b"] == "active"


@pytest.mark.parametrize("bad", [0, -1, 2**63, "7", 1.5, float("nan"), True, [1]])
def test_an_owner_generation_that_is_no_positive_64_bit_int_is_refused_and_nothing_is_leased(actor_system, tmp_path,
                                                                                            bad):
    from ouroactors.core.errors import BadRequest

    (tmp_path / "a").mkdir()
    actor_system.start_tree(tree(str(tmp_path)))
    with pytest.raises(BadRequest) as caught:
        ask_authority(actor_system, "agent/workspace", Acquire(str(tmp_path / "a"), "exclusive", "session-a",
                                                               owner_generation=bad))
    assert caught.value.field == "owner_generation"
    with pytest.raises(BadRequest) as caught:
        ask_authority(actor_system, "agent/workspace", Reclaim("session-a", str(tmp_path / "a"), "exclusive",
                                                               b"x" * 32, owner_generation=bad))
    assert caught.value.field == "owner_generation"
    assert ask_authority(actor_system, "agent/workspace", "leases") == []


# -- worktrees have owners; a corrupt record is quarantined, not fatal ---------------------------------


def _repo(tmp_path) -> str:
    import os

    from ouroactors.authorities.workspace import worktrees as wt
    path = os.path.join(os.path.realpath(tmp_path), "repo")
    os.mkdir(path)
    for args in (("init", "-q", "-b", "main"), ("commit", "-q", "--allow-empty", "-m", "initial")):
        wt.git(path, *args)
    return path


def test_cleanup_is_refused_while_a_lease_is_held_and_for_another_session(actor_system, tmp_path):
    import os

    from ouroactors.authorities.workspace.messages import CleanupWorktree, CreateWorktree
    from ouroactors.authorities.workspace.worktree_owners import NotWorktreeOwner, WorktreeHeld

    repo = _repo(tmp_path)
    actor_system.start_tree(tree(str(os.path.realpath(tmp_path))))
    s1 = actor_system.resolve("agent/sessions/s1")
    made = ask_authority(actor_system, "agent/workspace", CreateWorktree(repo, "s1"), timeout=30)
    granted = ask_authority(actor_system, "agent/workspace", Acquire(made.path, "exclusive", "s1", owner=s1))
    with pytest.raises(NotWorktreeOwner, match="'s1'"):  # another session: never, lease or not
        ask_authority(actor_system, "agent/workspace", CleanupWorktree(repo, made.path, session_id="s2"), timeout=30)
    with pytest.raises(NotWorktreeOwner):  # nobody named: refused
        ask_authority(actor_system, "agent/workspace", CleanupWorktree(repo, made.path), timeout=30)
    with pytest.raises(WorktreeHeld, match=granted.lease.lease_id):  # the owner, while its own lease is live
        ask_authority(actor_system, "agent/workspace", CleanupWorktree(repo, made.path, session_id="s1"), timeout=30)
    assert os.path.isdir(made.path)
    assert [x.lease_id for x in ask_authority(actor_system, "agent/workspace", "leases")] == [granted.lease.lease_id]

    ask_authority(actor_system, "agent/workspace", Release(granted.lease.lease_id, capability=granted.capability))
    done = ask_authority(actor_system, "agent/workspace", CleanupWorktree(repo, made.path, session_id="s1"), timeout=30)
    assert done.removed and not os.path.exists(made.path)
    assert ask_authority(actor_system, "agent/workspace", "worktrees") == []


def test_the_owner_survives_a_restart_and_a_verified_operator_may_clean_up(actor_system, tmp_path):
    import os

    from ouroactors.authorities.grants.operators import ensure_local_operator, read_credentials
    from ouroactors.authorities.workspace.messages import CleanupWorktree, CreateWorktree
    from ouroactors.authorities.workspace.worktree_owners import NotWorktreeOwner

    repo = _repo(tmp_path)
    ensure_local_operator(actor_system.data_dir)
    name, token = read_credentials(actor_system.data_dir)
    actor_system.start_tree(tree(str(os.path.realpath(tmp_path))))
    made = ask_authority(actor_system, "agent/workspace", CreateWorktree(repo, "s1"), timeout=30)
    mark = actor_system.mark()
    actor_system.kill("agent/workspace")
    actor_system.wait_for("started", "agent/sessions/s2", after=mark)
    [record] = ask_authority(actor_system, "agent/workspace", "worktrees")  # reloaded from LMDB
    assert (record.path, record.session_id) == (made.path, "s1")
    with pytest.raises(NotWorktreeOwner, match="'s1'"):
        ask_authority(actor_system, "agent/workspace", CleanupWorktree(repo, made.path, session_id="s2"), timeout=30)
    with pytest.raises(NotWorktreeOwner, match="not verified"):  # a name a request merely asserts proves nothing
        ask_authority(actor_system, "agent/workspace",
                      CleanupWorktree(repo, made.path, operator=name, token="forged"), timeout=30)
    assert os.path.isdir(made.path)
    done = ask_authority(actor_system, "agent/workspace",
                         CleanupWorktree(repo, made.path, operator=name, token=token), timeout=30)
    assert done.removed and not os.path.exists(made.path)


def test_a_corrupt_lease_record_is_quarantined_and_still_holds_every_root(actor_system, tmp_path):
    import os

    import msgpack

    from ouroactors.authorities.storage.actor import storage_config
    from ouroactors.authorities.storage.env import close_env, db, open_env
    from ouroactors.authorities.workspace.worktree_owners import CorruptRecordHolds

    project = tmp_path / "p"
    project.mkdir()
    other = tmp_path / "q"
    other.mkdir()
    actor_system.start_tree(tree(str(os.path.realpath(tmp_path))))
    s1 = actor_system.resolve("agent/sessions/s1")
    granted = ask_authority(actor_system, "agent/workspace", Acquire(str(project), "exclusive", "session-1", owner=s1))
    actor_system.terminate_child("agent", "workspace")
    config = storage_config(str(actor_system.data_dir))
    env = open_env(config)
    try:
        with env.begin(write=True) as txn:
            txn.put(b"lease/l1", b"\xc1\xc1garbage", db=db(env, b"workspace"))
            txn.put(b"lease/l2", msgpack.packb({"root": os.path.realpath(other), "mode": "exclusive"}),
                    db=db(env, b"workspace"))
    finally:
        close_env(config)
    actor_system.restart_child("agent", "workspace")  # before: failed_to_start_child (FormatError)

    quarantined = ask_authority(actor_system, "agent/workspace", "quarantined")
    assert [(q.where, q.root) for q in quarantined] == [("workspace/lease/l1", None),
                                                        ("workspace/lease/l2", os.path.realpath(other))]
    [kept] = ask_authority(actor_system, "agent/workspace", "leases")  # the readable lease still loads
    assert kept.lease_id == granted.lease.lease_id and kept.status == "reserved"
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    with pytest.raises(CorruptRecordHolds, match="workspace/lease/l1"):  # its root is unknown: nothing new
        ask_authority(actor_system, "agent/workspace", Acquire(str(fresh), "shared_read", "session-2", owner=s1))
    s1 = actor_system.resolve("agent/sessions/s1")
    again = ask_authority(actor_system, "agent/workspace",  # the reservation's owner still reclaims it
                          Reclaim("session-1", str(project), "exclusive", granted.capability, owner=s1))
    assert again.lease.status == "active"

    env = open_env(config)  # this process holds no environment of the node's: open it to look
    try:
        with env.begin() as txn:
            assert txn.get(b"workspace/lease/l1", db=db(env, b"quarantine")) == b"\xc1\xc1garbage"
            assert txn.get(b"lease/l1", db=db(env, b"workspace")) == b"\xc1\xc1garbage"  # left in place
    finally:
        close_env(config)


def test_cleanup_attacks_get_a_typed_refusal_and_remove_nothing(actor_system, tmp_path):
    """Wrong types, over-long fields, a forged operator, and the owned worktree reached through a symlink by another
    session: each is refused with nothing removed, and the authority goes on answering."""
    import os

    from ouroactors.authorities.workspace.messages import CleanupWorktree, CreateWorktree
    from ouroactors.authorities.workspace.worktree_owners import NotWorktreeOwner

    repo = _repo(tmp_path)
    actor_system.start_tree(tree(str(os.path.realpath(tmp_path))))
    made = ask_authority(actor_system, "agent/workspace", CreateWorktree(repo, "s1"), timeout=30)
    alias = os.path.join(os.path.realpath(tmp_path), "alias")
    os.symlink(made.path, alias)
    bad = [CleanupWorktree(repo, made.path, session_id=123),  # type: ignore[arg-type]
           CleanupWorktree(repo, made.path, session_id="s1" * 5000),
           CleanupWorktree(repo, made.path, operator="root", token=b"x"),  # type: ignore[arg-type]
           CleanupWorktree(repo, made.path, operator="root", token="t" * 100_000),
           CleanupWorktree(repo, made.path, operator="root", token="forged-token-000"),
           CleanupWorktree(repo, None, session_id="s1")]  # type: ignore[arg-type]
    for message in bad:
        with pytest.raises(Exception) as refused:
            ask_authority(actor_system, "agent/workspace", message, timeout=30)
        assert type(refused.value).__name__ not in ("ActorCrashed", "AskTimeout"), repr(refused.value)
        assert os.path.isdir(made.path), message
    with pytest.raises(NotWorktreeOwner):  # judged where the alias lands: s1's worktree, not s2's
        ask_authority(actor_system, "agent/workspace", CleanupWorktree(repo, alias, session_id="s2"), timeout=30)
    assert os.path.isdir(made.path)
    assert [w for w in ask_authority(actor_system, "agent/workspace", "worktrees")]  # still recorded, still serving


def test_a_lease_held_by_the_system_handle_never_feeds_a_heartbeat_to_its_next_ask(actor_system, tmp_path):
    """The workspace pings whoever holds a lease; held from outside the actors, that is this handle's endpoint. A
    Ping that arrived between two asks was taken by the next one as its answer (seen in CI: ``which_child`` got a
    Ping, and the shutdown's ``trees()`` then got the ChildInfo that was late)."""
    import time

    from ouroactors.authorities.workspace.leases import Lease

    project = tmp_path / "project"
    project.mkdir()
    actor_system.start_tree(tree(str(tmp_path)))
    granted = ask_authority(actor_system, "agent/workspace", Acquire(str(project), "exclusive", "session-1"))
    assert granted.lease.status == "active"  # its owner: this handle, an endpoint outside the actors
    deadline = time.monotonic() + 8 * 0.1  # heartbeats every 0.1 s: several land between these asks
    asked = 0
    while time.monotonic() < deadline or asked < 3:
        answer = ask_authority(actor_system, "agent/workspace", "leases")
        assert all(isinstance(lease, Lease) for lease in answer), answer
        assert actor_system.child_info("agent/workspace").status == "running"  # a supervisor's answer, too
        asked += 1
