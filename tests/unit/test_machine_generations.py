"""SupervisorCore: generations and authority snapshots (DESIGN.md "Generations")."""

from __future__ import annotations

from ouroactors.supervision import reasons
from ouroactors.supervision.signals import AuthorityEntry, GenerationAnnounced, NewGeneration, Spawn

from .sim import World, booted, counter_generations, tree, wk

INHERITED = (
    AuthorityEntry("storage", "top/storage", "addr-storage", 500),
    AuthorityEntry("ledger", "top/ledger", "addr-ledger", 600),
)


def snapshot_of(spawn: Spawn) -> dict[str, tuple[str, object, int]]:
    return {e.name: (e.path, e.address, e.generation) for e in spawn.snapshot}


def test_each_start_gets_a_larger_generation() -> None:
    world = World(tree(wk("a"), wk("b"), wk("c"), intensity=5)).start()
    world.crash("b")
    world.crash("a")
    generations = [s.generation for s in world.spawns()]
    assert generations == sorted(generations) and len(set(generations)) == len(generations)
    rows = {r.id: r.generation for r in world.which()}
    assert rows["a"] > rows["b"] > rows["c"]


def test_the_generation_source_is_given_the_childs_previous_generation() -> None:
    calls: list[int | None] = []
    counter = counter_generations()

    def source(previous: int | None) -> int:
        calls.append(previous)
        return counter(previous)

    world = World(tree(wk("a"), wk("b")), generations=source).start()
    assert calls == [None, None]
    world.crash("a")
    assert calls == [None, None, 1]
    world.announce("b")
    assert calls == [None, None, 1, 2]


def test_snapshot_lists_inherited_entries_and_running_earlier_siblings() -> None:
    world = World(tree(wk("a"), wk("b"), wk("c")), inherited=INHERITED).start()
    a, b, c = world.spawns()
    assert snapshot_of(a) == {"storage": ("top/storage", "addr-storage", 500),
                              "ledger": ("top/ledger", "addr-ledger", 600)}
    assert snapshot_of(b) == {**snapshot_of(a), "a": ("root/a", "addr-a", a.generation)}
    assert snapshot_of(c) == {**snapshot_of(b), "b": ("root/b", "addr-b", b.generation)}
    assert [e.name for e in c.snapshot] == ["storage", "ledger", "a", "b"]


def test_snapshot_uses_current_generations_and_skips_siblings_not_running() -> None:
    world = booted(wk("a"), wk("b"), wk("c"), intensity=5)
    world.crash("a")  # a has a new generation now
    new_a = world.spawns()[0].generation
    world.admin("terminate_child", "b")
    world.admin("terminate_child", "c")
    world.clear()
    world.admin("restart_child", "c")
    [spawn] = world.spawns()
    assert snapshot_of(spawn) == {"a": ("root/a", "addr-a", new_a)}


def test_snapshot_does_not_list_later_siblings_or_the_child_itself() -> None:
    world = booted(wk("a"), wk("b"), wk("c"), intensity=5)
    world.crash("b")
    [spawn] = world.spawns()
    assert set(snapshot_of(spawn)) == {"a"}


def test_a_sibling_shadows_an_inherited_entry_of_the_same_name() -> None:
    world = World(tree(wk("storage"), wk("b")), inherited=INHERITED).start()
    storage, b = world.spawns()
    assert snapshot_of(b)["storage"] == ("root/storage", "addr-storage", storage.generation)


def test_simple_one_for_one_children_get_only_inherited_entries() -> None:
    world = World(tree(wk("job"), strategy="simple_one_for_one"), inherited=INHERITED).start()
    world.admin("start_child")
    world.admin("start_child")
    assert all(snapshot_of(s) == snapshot_of(world.spawns()[0]) for s in world.spawns())
    assert set(snapshot_of(world.spawns()[1])) == {"storage", "ledger"}


def test_generation_change_under_rest_for_one_restarts_exactly_the_later_siblings() -> None:
    world = booted(wk("a"), wk("b"), wk("c"), wk("d"), strategy="rest_for_one")
    b = world.core.children.get("b")
    assert b is not None
    old_gen, inc = b.generation, b.incarnation
    world.announce("b", "rules revoked")
    [new] = world.new_generations()
    assert new == NewGeneration("b", inc, new.generation)
    assert old_gen is not None and new.generation > old_gen
    assert world.touched() == ["d", "c", "c", "d"]  # b itself keeps running, a untouched
    c_spawn, d_spawn = world.spawns()
    assert snapshot_of(c_spawn)["b"] == ("root/b", "addr-b", new.generation)
    assert snapshot_of(d_spawn)["b"][2] == new.generation
    assert snapshot_of(d_spawn)["c"][2] == c_spawn.generation
    [event] = world.events("generation_changed")
    assert event.child == "b"
    assert event.fields["previous"] == old_gen and event.fields["generation"] == new.generation
    assert event.fields["cause"] == "rules revoked"
    assert world.kinds()[0] == "generation_changed"
    assert "restarting" not in world.kinds()
    assert world.core.children.get("b").incarnation == inc  # type: ignore[union-attr]


def test_generation_change_of_the_last_child_restarts_nothing() -> None:
    world = booted(wk("a"), wk("b"), strategy="rest_for_one")
    world.announce("b")
    assert world.touched() == []
    assert len(world.new_generations()) == 1


def test_generation_change_under_one_for_one_restarts_nothing_else() -> None:
    world = booted(wk("a"), wk("b"), wk("c"))
    world.announce("a")
    assert world.touched() == []
    assert [n.key for n in world.new_generations()] == ["a"]


def test_generation_change_under_one_for_all_restarts_all_others_as_if_it_had_restarted() -> None:
    world = booted(wk("a"), wk("b"), wk("c"), strategy="one_for_all")
    world.announce("b")
    assert world.touched() == ["c", "a", "a", "c"]


def test_generation_change_in_simple_one_for_one_touches_nothing_else() -> None:
    world = booted(wk("job"), strategy="simple_one_for_one")
    world.admin("start_child")
    world.admin("start_child")
    world.clear()
    world.announce("job#1")
    assert world.touched() == []
    assert [n.key for n in world.new_generations()] == ["job#1"]


def test_a_generation_change_does_not_count_against_intensity() -> None:
    world = booted(wk("a"), wk("b"), wk("c"), strategy="rest_for_one", intensity=0)
    for _ in range(5):
        world.announce("a")
    assert world.exited is None
    assert world.core.window.recent == 0
    assert len(world.new_generations()) == 5
    world.crash("c")  # a real restart still escalates at intensity 0
    assert world.exited is not None


def test_a_generation_change_drops_temporary_later_siblings() -> None:
    world = booted(wk("a"), wk("t", restart="temporary"), wk("c"), strategy="rest_for_one")
    world.announce("a")
    assert world.touched() == ["c", "t", "c"]
    assert list(world.status()) == ["a", "c"]


def test_a_stale_announcement_is_ignored() -> None:
    world = booted(wk("a"), wk("b"), strategy="rest_for_one", intensity=5)
    old = world.running["a"]
    world.crash("a")
    world.clear()
    assert world.feed(GenerationAnnounced("a", old, "too late")) == []


def test_an_announcement_from_a_terminated_child_is_ignored() -> None:
    world = booted(wk("a"), wk("b"), strategy="rest_for_one")
    inc = world.running["a"]
    world.admin("terminate_child", "a")
    world.clear()
    assert world.feed(GenerationAnnounced("a", inc)) == []


def test_an_announcement_during_a_job_is_handled_after_it() -> None:
    world = booted(wk("a"), wk("b"), wk("c"), strategy="rest_for_one", intensity=5)
    world.hold_starts = {"c"}
    world.crash("c")
    world.announce("a")
    assert world.new_generations() == []
    world.answer_start("c")  # c's restart finishes; now a's announcement restarts b and c
    assert [n.key for n in world.new_generations()] == ["a"]
    assert world.touched() == ["c", "c", "b", "b", "c"]  # spawn c; stop c, b; spawn b, c
    world.answer_start("c")
    assert world.status() == dict.fromkeys("abc", "running")


def test_a_failed_start_after_a_generation_change_enters_the_retry_loop() -> None:
    world = booted(wk("a"), wk("b"), wk("c"), strategy="rest_for_one", intensity=5)
    world.fail_starts = {"b": 1}
    world.announce("a")
    assert world.touched() == ["c", "b", "b", "b", "c"]
    assert world.core.window.recent == 1  # only the retry counted
    assert world.status() == dict.fromkeys("abc", "running")


def test_restart_after_crash_gets_the_new_generation_in_the_snapshot_of_later_siblings() -> None:
    world = booted(wk("a"), wk("b"), strategy="rest_for_one", intensity=5)
    world.crash("a")
    a_spawn, b_spawn = world.spawns()
    assert snapshot_of(b_spawn)["a"][2] == a_spawn.generation
    assert world.exited is None
    assert world.events("exited")[0].fields["reason"] == reasons.crash_of("RuntimeError", "bang").to_json()


def test_consumers_restart_only_after_the_authority_adopted_its_new_generation() -> None:
    from ouroactors.supervision.signals import GenerationAdopted, GenerationAnnounced
    from ouroactors.supervision.specs import build_spec

    from .sim import World, counter_generations  # noqa: F401

    spec = build_spec({"id": "root", "type": "supervisor", "strategy": "rest_for_one", "children": [
        {"id": "auth", "actor": "ouroactors.examples.workers:Echo"},
        {"id": "consumer", "actor": "ouroactors.examples.workers:Echo"},
    ]})
    world = World(spec, auto_adopt=False).start()
    world.clear()
    inc = world.running["auth"]
    world.feed(GenerationAnnounced("auth", inc, "reopened"))
    assert world.stopped() == []  # nothing happens to consumers before the authority adopts
    new = world.core.children.get("auth").generation
    world.feed(GenerationAdopted("auth", inc, new))
    assert world.stopped() == ["consumer"] and world.spawned() == ["consumer"]
