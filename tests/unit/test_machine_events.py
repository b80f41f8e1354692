"""SupervisorCore: the structured events it emits, in order, with their reasons and fields."""

from __future__ import annotations

from ouroactors.supervision import reasons
from ouroactors.supervision.signals import Emit

from .sim import World, booted, tree, wk


def story(world: World) -> list[tuple[str, str | None]]:
    return [(e.kind, e.child) for e in world.events()]


def test_child_events_carry_generation_and_incarnation_of_that_incarnation() -> None:
    world = World(tree(wk("a"), wk("b"))).start()
    spawns = {s.key: s for s in world.spawns()}
    for event in world.events("started"):
        assert event.child is not None
        spawn = spawns[event.child]
        assert event.fields["generation"] == spawn.generation
        assert event.fields["incarnation"] == spawn.incarnation
        assert event.fields["pid"] == 1000 + spawn.incarnation
    [done] = world.events("supervisor_started")
    assert done.child is None and done.fields == {}


def test_one_for_one_crash_story() -> None:
    world = booted(wk("a"), wk("b"))
    old = world.core.children.get("a")
    assert old is not None
    old_inc, old_gen = old.incarnation, old.generation
    world.crash("a", reasons.crash_of("ValueError", "bad input", "d1"))
    assert story(world) == [("exited", "a"), ("restarting", "a"), ("started", "a")]
    exited, restarting, started = world.events()
    assert exited.fields == {
        "reason": {"kind": "crash", "exc_type": "ValueError", "message": "bad input", "traceback_digest": "d1"},
        "generation": old_gen, "incarnation": old_inc,
    }  # the exit names the incarnation and generation that ended
    assert restarting.fields["restarts"] == 1 and restarting.fields["strategy"] == "one_for_one"
    assert started.fields["incarnation"] > old_inc
    assert old_gen is not None and started.fields["generation"] > old_gen


def test_one_for_all_crash_story() -> None:
    world = booted(wk("a"), wk("b"), wk("c"), strategy="one_for_all")
    world.crash("b")
    assert story(world) == [
        ("exited", "b"), ("restarting", "b"), ("terminated", "c"), ("terminated", "a"),
        ("started", "a"), ("started", "b"), ("started", "c"),
    ]
    for event in world.events("terminated"):
        assert event.fields["reason"] == {"kind": "shutdown"}
        assert event.fields["shutdown_error"] is False
    assert world.events("restarting")[0].fields["strategy"] == "one_for_all"


def test_boot_failure_story() -> None:
    world = World(tree(wk("a"), wk("b"), wk("c")), fail_starts={"b": 1}).start()
    assert story(world) == [
        ("started", "a"), ("start_failed", "b"), ("terminated", "a"), ("supervisor_start_failed", None),
    ]
    [failed] = world.events("supervisor_start_failed")
    assert failed.fields["reason"]["kind"] == "shutdown"
    assert failed.fields["reason"]["info"].startswith("failed_to_start_child b")


def test_escalation_story() -> None:
    world = booted(wk("a"), wk("b"), intensity=0, period=7)
    world.crash("a")
    assert story(world) == [
        ("exited", "a"), ("escalated", "a"), ("terminated", "b"), ("supervisor_exit", None),
    ]
    assert world.events("supervisor_exit")[0].fields["reason"] == {
        "kind": "shutdown", "info": "reached_max_restart_intensity"
    }
    escalated = world.events("escalated")[0].fields
    assert (escalated["intensity"], escalated["period"]) == (0, 7)


def test_failed_restart_story() -> None:
    world = booted(wk("a"), intensity=5)
    world.fail_starts = {"a": 1}
    world.crash("a")
    assert story(world) == [
        ("exited", "a"), ("restarting", "a"), ("start_failed", "a"), ("restart_failed", "a"),
        ("restarting", "a"), ("started", "a"),
    ]
    assert [e.fields["restarts"] for e in world.events("restarting")] == [1, 2]


def test_shutdown_timeout_story() -> None:
    world = booted(wk("a", shutdown=10))
    world.stubborn = {"a"}
    world.shutdown(reasons.shutdown("stop"))
    world.advance(0.01)
    assert story(world) == [
        ("shutdown_requested", None), ("shutdown_timeout", "a"), ("terminated", "a"), ("supervisor_exit", None),
    ]
    assert world.events("terminated")[0].fields["reason"] == {"kind": "killed"}


def test_auto_shutdown_story() -> None:
    world = booted(wk("a"), wk("s", restart="temporary", significant=True), auto_shutdown="any_significant")
    world.exit("s", reasons.shutdown("finished"))
    assert story(world) == [
        ("exited", "s"), ("auto_shutdown", "s"), ("terminated", "a"), ("supervisor_exit", None),
    ]
    assert world.events("exited")[0].fields["reason"] == {"kind": "shutdown", "info": "finished"}
    assert world.events("supervisor_exit")[0].fields["reason"] == {"kind": "shutdown", "info": "auto_shutdown"}


def test_generation_change_story() -> None:
    world = booted(wk("a"), wk("b"), strategy="rest_for_one")
    world.announce("a", "policy reloaded")
    assert story(world) == [("generation_changed", "a"), ("terminated", "b"), ("started", "b")]


def test_every_event_is_an_emit_with_plain_json_fields() -> None:
    import json

    world = booted(wk("a"), wk("b", shutdown=5), strategy="one_for_all", intensity=1)
    world.crash("a")
    world.announce("a")
    world.stubborn = {"b"}
    world.crash("a")
    world.advance(1)
    assert world.exited is not None
    for event in world.events():
        assert isinstance(event, Emit)
        json.dumps(event.fields)  # every field is plain data the event writer can store
