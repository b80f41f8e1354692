"""Malformed AdminCalls at a real supervisor's door: each is answered with a BadRequest naming the field (inside
AdminAnswer when the call's ref is good), nothing happens — no child started, stopped or restarted, the supervisor
itself not restarted — and the supervisor serves the next valid call as before."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from ouroactors import supervisor, worker
from ouroactors.core.errors import BadRequest, StartFailed
from ouroactors.supervision.calls import AdminAnswer, AdminCall
from ouroactors.supervision.specs import ChildSpec, ChildType, Strategy

from .helpers import ECHO

TREE = supervisor("root", [
    worker("echo", ECHO),
    supervisor("inner", [worker("a", ECHO), worker("b", ECHO)]),
    supervisor("pool", [worker("job", ECHO)], strategy="simple_one_for_one"),
])

MALFORMED: list[tuple[AdminCall, str]] = [
    (AdminCall("which_child", ["a"]), "child_id"),  # type: ignore[arg-type]  # unhashable: crashed the supervisor
    (AdminCall("terminate_child", ["a"]), "child_id"),  # type: ignore[arg-type]
    (AdminCall("terminate_child", "a" * 100_000), "child_id"),
    (AdminCall(7), "op"),  # type: ignore[arg-type]
    (AdminCall("stop_everything"), "op"),
    (AdminCall("start_child", spec="worker"), "spec"),  # type: ignore[arg-type]
    (AdminCall("start_child", spec=ChildSpec.model_construct(id=["c"], actor=ECHO)), "spec.id"),
    (AdminCall("start_child", spec=ChildSpec.model_construct(id="c", actor=ECHO, restart="sometimes")),
     "spec.restart"),
    (AdminCall("start_child", extra_args="abc"), "extra_args"),  # type: ignore[arg-type]
    (AdminCall("start_child", extra_args=tuple(range(1000))), "extra_args"),
]


def snapshot(system: Any, path: str) -> list[tuple[str, int | None, int | None, int, str]]:
    return sorted((c.id, c.pid, c.generation, c.restarts, c.status) for c in system.which_children(path))


@pytest.mark.multiproc
def test_malformed_admin_calls_are_refused_naming_the_field_and_change_nothing(actor_system):
    actor_system.start_tree(TREE)
    actor_system.start_child("root/pool", ["first"])
    inner_before = actor_system.child_info("root/inner")
    pool_before = actor_system.child_info("root/pool")
    children_before = {path: snapshot(actor_system, path) for path in ("root", "root/inner", "root/pool")}
    events_before = len(actor_system.events.all())

    for target in ("root/inner", "root/pool"):
        for call, field in MALFORMED:
            with pytest.raises(BadRequest) as caught:
                actor_system.ask(target, call, timeout=10.0)
            assert (caught.value.message, caught.value.field) == ("AdminCall", field), (target, call.op, caught.value)
            assert f"AdminCall.{field}" in str(caught.value)

    # with a good ref the refusal travels inside AdminAnswer, like any answer; a bad ref is refused bare
    answer = actor_system.ask("root/inner", AdminCall("which_child", ["a"], ref="r-1"), timeout=10.0)  # type: ignore[arg-type]
    assert type(answer) is AdminAnswer and answer.ref == "r-1"
    assert isinstance(answer.value, BadRequest) and answer.value.field == "child_id"
    with pytest.raises(BadRequest) as caught:
        actor_system.ask("root/inner", AdminCall(7, ref=["r"]), timeout=10.0)  # type: ignore[arg-type]
    assert caught.value.field == "ref"
    odd = AdminCall("which_children", ref="r-2")
    odd.__dict__[1] = "x"  # a field under a name that is not a str: the call is refused as a whole, bare
    with pytest.raises(BadRequest) as caught:
        actor_system.ask("root/inner", odd, timeout=10.0)
    assert (caught.value.message, caught.value.field) == ("AdminCall", "")

    # the supervisors serve on: same processes, same children, nothing started, stopped or restarted
    listed = actor_system.ask("root/inner", AdminCall("which_children", ref="after"), timeout=10.0)
    assert listed.ref == "after" and [c.id for c in listed.value] == ["b", "a"]
    for path, before in children_before.items():
        assert snapshot(actor_system, path) == before, path
    for path, before in (("root/inner", inner_before), ("root/pool", pool_before)):
        after = actor_system.child_info(path)
        assert (after.pid, after.generation, after.restarts) == (before.pid, before.generation, before.restarts)
    assert [(e.kind, e.path) for e in actor_system.events.all()[events_before:]] == []

    # a list of extra arguments (OTP's ExtraArgs) is a well-formed start_child: taken as a tuple
    started = actor_system.ask("root/pool", AdminCall("start_child", extra_args=["second"]), timeout=10.0)
    assert started.status == "running"
    assert actor_system.ask(f"root/pool/{started.id}", "whoami", timeout=10.0)["args"] == ("second",)


@pytest.mark.multiproc
def test_a_spec_of_the_wrong_kind_that_reached_the_door_unchecked_fails_its_start_naming_both(actor_system):
    """A spec whose class no process had imported reaches the supervisor unchecked (the admin door imports
    nothing, so it cannot tell a Worker from a Supervisor): a Worker class started as a supervisor answered nothing
    (every ask through it timed out), so the start is refused when the class is loaded to be spawned."""
    actor = "tests.actor.door_kind_probe:Plain"
    assert "tests.actor.door_kind_probe" not in sys.modules  # nor in the system forked from this process
    actor_system.start_tree(TREE)
    wrong = ChildSpec.model_construct(id="sub", actor=actor, type=ChildType("supervisor"),
                                      strategy=Strategy("one_for_one"), children=(), intensity=1, period=5)
    with pytest.raises(StartFailed) as failed:
        actor_system.start_child("root", wrong, timeout=20)
    said = str(failed.value)
    assert "type = 'supervisor' needs a Supervisor subclass" in said and actor in said, said
    assert "sub" not in [c.id for c in actor_system.which_children("root")]
    assert actor_system.ask("root/echo", "still", timeout=10) == "still"  # the supervisor serves on
