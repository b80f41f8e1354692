"""Generations (stamps, announced changes, durability across system restarts) and the admin API."""

from __future__ import annotations

import pytest

from ouroactors import (
    AlreadyPresent,
    AlreadyStarted,
    ChildNotFound,
    ChildRunning,
    MaxChildren,
    SimpleOneForOneOnly,
    StaleGeneration,
    StartFailed,
    supervisor,
    worker,
)

from .helpers import AUTHORITY, ECHO, FAILING_START

AUTH_TREE = supervisor("root", strategy="rest_for_one", children=[
    worker("auth", AUTHORITY), worker("consumer", ECHO), worker("other", ECHO),
])


@pytest.mark.multiproc
def test_snapshot_names_earlier_siblings_with_generations(actor_system):
    actor_system.start_tree(AUTH_TREE)
    me = actor_system.ask("root/other", "whoami")
    auth = actor_system.child_info("root/auth").generation
    consumer = actor_system.child_info("root/consumer").generation
    assert me["authorities"] == {"auth": auth, "consumer": consumer}
    assert me["generation"] > consumer > auth


@pytest.mark.multiproc
def test_stale_stamp_is_refused_and_current_stamp_served(actor_system):
    actor_system.start_tree(AUTH_TREE)
    gen = actor_system.child_info("root/auth").generation
    assert actor_system.ask("root/auth", "x", stamp=gen) == ("done", "x")
    with pytest.raises(StaleGeneration) as caught:
        actor_system.ask("root/auth", "x", stamp=gen - 1)
    assert caught.value.expected == gen and caught.value.got == gen - 1


@pytest.mark.multiproc
def test_generation_change_restarts_exactly_the_later_siblings(actor_system):
    tree = supervisor("root", strategy="rest_for_one", children=[
        worker("first", ECHO), worker("auth", AUTHORITY), worker("consumer", ECHO), worker("other", ECHO),
    ])
    actor_system.start_tree(tree)
    before = {c.id: (c.pid, c.generation) for c in actor_system.which_children("root")}
    mark = actor_system.mark()
    assert actor_system.ask("root/auth", "revoke") == "revoking"
    changed = actor_system.wait_for("generation_changed", "root/auth", after=mark)
    actor_system.wait_for("started", "root/other", after=mark)
    after = {c.id: (c.pid, c.generation) for c in actor_system.which_children("root")}
    assert after["first"] == before["first"]  # earlier sibling untouched
    assert after["auth"][0] == before["auth"][0]  # same process: no crash ...
    assert after["auth"][1] == changed.generation > before["auth"][1]  # ... new generation
    for later in ("consumer", "other"):
        assert after[later][0] != before[later][0]
    assert actor_system.ask("root/consumer", "whoami")["authorities"]["auth"] == changed.generation
    with pytest.raises(StaleGeneration):
        actor_system.ask("root/auth", "x", stamp=before["auth"][1])
    assert not any(e.kind == "escalated" for e in actor_system.events.all())


@pytest.mark.multiproc
def test_generations_grow_across_whole_system_restarts(actor_system_factory, tmp_path):
    data = tmp_path / "node"
    first = actor_system_factory("multiproc", data_dir=data)
    first.start_tree(AUTH_TREE)
    old = first.child_info("root/auth").generation
    first.shutdown()
    second = actor_system_factory("multiproc", data_dir=data)
    second.start_tree(AUTH_TREE)
    assert second.child_info("root/auth").generation > old
    with pytest.raises(StaleGeneration):
        second.ask("root/auth", "x", stamp=old)


@pytest.mark.parametrize("base", ["simple", "multiproc"])
def test_admin_api_sequence_with_every_outcome(actor_system_factory, base):
    system = actor_system_factory(base)
    system.start_tree(supervisor("root", [worker("a", ECHO)]))
    b = worker("b", ECHO)
    assert system.start_child("root", b).status == "running"
    with pytest.raises(AlreadyStarted):
        system.start_child("root", b)
    with pytest.raises(ChildRunning):
        system.restart_child("root", "b")
    with pytest.raises(ChildRunning):
        system.delete_child("root", "b")
    system.terminate_child("root", "b")
    system.terminate_child("root", "b")  # idempotent
    with pytest.raises(AlreadyPresent):
        system.start_child("root", b)
    assert [c.id for c in system.which_children("root")] == ["b", "a"]  # newest first, as OTP
    assert system.count_children("root") == {"specs": 2, "active": 1, "supervisors": 0, "workers": 2}
    assert system.get_childspec("root", "b").actor == ECHO
    assert system.restart_child("root", "b").status == "running"
    system.terminate_child("root", "b")
    system.delete_child("root", "b")
    for call in (system.terminate_child, system.restart_child, system.delete_child, system.get_childspec):
        with pytest.raises(ChildNotFound):
            call("root", "b")
    with pytest.raises(StartFailed):
        system.start_child("root", worker("bad", FAILING_START))
    assert [c.id for c in system.which_children("root")] == ["a"]  # a failed start keeps no spec


def test_dynamic_children_2000_and_max_children(simple_system):
    pool = supervisor("pool", [worker("w", ECHO, restart="temporary")], strategy="simple_one_for_one",
                      max_children=2000)
    simple_system.start_tree(supervisor("root", [pool]))
    for i in range(2000):
        simple_system.start_child("root/pool", (i,))
    assert simple_system.count_children("root/pool")["active"] == 2000
    with pytest.raises(MaxChildren):
        simple_system.start_child("root/pool", ())
    with pytest.raises(SimpleOneForOneOnly):
        simple_system.delete_child("root/pool", "w#1")
    assert simple_system.ask("root/pool/w#1999", "whoami")["args"] == (1998,)
    simple_system.terminate_child("root/pool", "w#7")
    assert simple_system.count_children("root/pool") == {"specs": 1, "active": 1999, "supervisors": 0,
                                                         "workers": 1999}
    simple_system.stop_tree("root")
    terminated = [e for e in simple_system.events.all() if e.kind == "terminated" and e.supervisor == "root/pool"]
    assert len(terminated) == 2000


@pytest.mark.multiproc
def test_dynamic_children_on_real_processes(actor_system):
    pool = supervisor("pool", [worker("w", ECHO)], strategy="simple_one_for_one")
    actor_system.start_tree(supervisor("root", [pool]))
    infos = [actor_system.start_child("root/pool", (i,)) for i in range(20)]
    assert len({i.pid for i in infos}) == 20
    mark = actor_system.mark()
    actor_system.kill("root/pool/w#3")
    actor_system.wait_for("started", "root/pool/w#3", after=mark)
    assert actor_system.ask("root/pool/w#3", "whoami")["args"] == (2,)  # restarted with its extra args
