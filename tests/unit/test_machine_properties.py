"""SupervisorCore against a small reference model of OTP's rules, over random sequences.

The model keeps children in start order with a status (running / undefined) and applies
otp.md 1.2 (which children a strategy touches, temporary siblings dropped, children stopped by
terminate_child started again by a group restart), 1.6 (restart type x reason) and 1.10 (admin
calls). Every step checks the exact commands the core produced and the state it ends in.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ouroactors.core.errors import AlreadyPresent, AlreadyStarted, ChildNotFound, ChildRunning
from ouroactors.supervision import reasons
from ouroactors.supervision.reasons import ExitKind, ExitReason

from .sim import World, tree, wk

REASONS = st.sampled_from([
    reasons.normal(), reasons.shutdown(), reasons.shutdown("info"), reasons.killed(),
    reasons.crash_of("E", "m"),
])
RESTARTS = st.sampled_from(["permanent", "transient", "temporary"])
STATIC = ["one_for_one", "one_for_all", "rest_for_one"]


@dataclass
class Kid:
    key: str
    restart: str
    running: bool = True


class Model:
    """OTP's supervisor, as the notes describe it, with unlimited intensity."""

    def __init__(self, strategy: str, kids: list[Kid]) -> None:
        self.strategy = strategy
        self.kids = kids

    def get(self, key: str) -> Kid | None:
        return next((k for k in self.kids if k.key == key), None)

    def order(self) -> list[str]:
        return [k.key for k in self.kids]

    def group(self, key: str) -> tuple[list[Kid], list[Kid]]:
        """(siblings to terminate, in start order; children to start, in start order)."""
        index = self.order().index(key)
        if self.strategy == "one_for_all":
            others = [k for k in self.kids if k.key != key]
            return others, list(self.kids)
        if self.strategy == "rest_for_one":
            return self.kids[index + 1 :], self.kids[index:]
        return [], [self.kids[index]]

    def restart(self, key: str, include_self: bool = True) -> list[str]:
        """Expected touched keys of a (group) restart; updates the model."""
        victims, starts = self.group(key)
        touched = [v.key for v in reversed(victims) if v.running]
        dropped = {v.key for v in victims if v.restart == "temporary"}
        self.kids = [k for k in self.kids if k.key not in dropped]
        for kid in starts:
            if kid.key in dropped or (not include_self and kid.key == key):
                continue
            touched.append(kid.key)
            kid.running = True
        return touched

    def exit(self, key: str, reason: ExitReason) -> list[str]:
        kid = self.get(key)
        assert kid is not None and kid.running
        kid.running = False
        normal = reason.kind in (ExitKind.NORMAL, ExitKind.SHUTDOWN)
        if kid.restart == "permanent" or (kid.restart == "transient" and not normal):
            return self.restart(key)
        if kid.restart == "temporary":
            self.kids.remove(kid)
        return []

    def announce(self, key: str) -> list[str]:
        if self.strategy == "one_for_one":
            return []
        return self.restart(key, include_self=False)


def check(world: World, model: Model) -> None:
    assert world.status() == {k.key: "running" if k.running else "undefined" for k in model.kids}
    assert set(world.running) == {k.key for k in model.kids if k.running}
    assert [row.id for row in world.which()] == list(reversed(model.order()))
    counts = world.admin("count_children")
    assert counts["specs"] == len(model.kids)
    assert counts["active"] == sum(k.running for k in model.kids)
    world.clear()


def boot(strategy: str, restarts: list[str]) -> tuple[World, Model]:
    specs = [wk(f"c{i}", restart=r) for i, r in enumerate(restarts)]
    world = World(tree(*specs, strategy=strategy, intensity=10**9)).start()
    assert world.boot is None
    model = Model(strategy, [Kid(s.id, r) for s, r in zip(specs, restarts, strict=True)])
    check(world, model)
    return world, model


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(STATIC), st.lists(RESTARTS, min_size=1, max_size=6), st.data())
def test_random_sequences_match_the_reference_model(
    strategy: str, restarts: list[str], data: st.DataObject
) -> None:
    world, model = boot(strategy, restarts)
    fresh = itertools.count()
    for _ in range(data.draw(st.integers(min_value=1, max_value=25), label="steps")):
        running = [k.key for k in model.kids if k.running]
        stopped = [k.key for k in model.kids if not k.running]
        ops = ["start"]
        if running:
            ops += ["exit", "exit", "exit", "terminate", "announce", "restart_running"]
        if stopped:
            ops += ["restart", "delete"]
        op = data.draw(st.sampled_from(ops), label="op")
        if op == "exit":
            key = data.draw(st.sampled_from(running), label="key")
            reason = data.draw(REASONS, label="reason")
            earlier = set(model.order()[: model.order().index(key)])
            expected = model.exit(key, reason)
            world.exit(key, reason)
            assert world.touched() == expected
            if strategy == "rest_for_one":
                assert not earlier & set(world.touched())
        elif op == "terminate":
            key = data.draw(st.sampled_from(running), label="key")
            assert world.admin("terminate_child", key) == "ok"
            assert world.touched() == [key]
            kid = model.get(key)
            assert kid is not None
            kid.running = False
            if kid.restart == "temporary":
                model.kids.remove(kid)
        elif op == "announce":
            key = data.draw(st.sampled_from(running), label="key")
            expected = model.announce(key)
            world.announce(key)
            assert world.touched() == expected
        elif op == "restart_running":
            key = data.draw(st.sampled_from(running), label="key")
            assert isinstance(world.admin("restart_child", key), ChildRunning)
            assert isinstance(world.admin("delete_child", key), ChildRunning)
            assert isinstance(world.admin("start_child", spec=wk(key)), AlreadyStarted)
        elif op == "restart":
            key = data.draw(st.sampled_from(stopped), label="key")
            assert isinstance(world.admin("start_child", spec=wk(key)), AlreadyPresent)
            assert world.admin("restart_child", key).status == "running"
            assert world.touched() == [key]
            model.get(key).running = True  # type: ignore[union-attr]
        elif op == "delete":
            key = data.draw(st.sampled_from(stopped), label="key")
            assert world.admin("delete_child", key) == "ok"
            model.kids.remove(model.get(key))  # type: ignore[arg-type]
            assert isinstance(world.admin("delete_child", key), ChildNotFound)
        else:
            key = f"n{next(fresh)}"
            restart = data.draw(RESTARTS, label="restart")
            assert world.admin("start_child", spec=wk(key, restart=restart)).status == "running"
            assert world.touched() == [key]
            model.kids.append(Kid(key, restart))
        check(world, model)
    # after any sequence the running set is exactly the specs minus deleted temporaries and
    # children that ended normally / were stopped by hand; a shutdown stops them newest first
    live = [k.key for k in model.kids if k.running]
    world.shutdown()
    assert world.stopped() == list(reversed(live))
    assert world.exited == reasons.shutdown()


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(STATIC), st.lists(RESTARTS, min_size=1, max_size=6), st.data())
def test_random_crashes_with_failing_restarts_keep_the_invariants(
    strategy: str, restarts: list[str], data: st.DataObject
) -> None:
    world, model = boot(strategy, restarts)
    for _ in range(data.draw(st.integers(min_value=1, max_value=15), label="steps")):
        running = [k.key for k in model.kids if k.running]
        if not running:
            break
        key = data.draw(st.sampled_from(running), label="key")
        # some children of the group fail to start a few times: the retry loop must converge
        for other in model.order():
            world.fail_starts[other] = data.draw(st.integers(min_value=0, max_value=2), label=f"fail {other}")
        index = model.order().index(key)
        before = set(model.order()[:index])
        others = set(model.order()) - {key}
        model.exit(key, reasons.crash_of("E", "m"))
        world.crash(key)
        touched = set(world.touched())
        if strategy == "rest_for_one":
            assert not touched & before  # earlier siblings are never touched, even by retries
        if strategy == "one_for_one":
            assert not touched & others
        world.fail_starts.clear()
        assert world.exited is None
        check(world, model)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(min_value=0, max_value=4),
    st.integers(min_value=1, max_value=10),
    st.lists(st.tuples(st.integers(min_value=0, max_value=6), st.integers(0, 2)), min_size=1, max_size=30),
)
def test_escalation_happens_exactly_when_the_reference_window_refuses(
    intensity: int, period: int, crashes: list[tuple[int, int]]
) -> None:
    world = World(tree(wk("a"), wk("b"), wk("c"), intensity=intensity, period=period)).start()
    stamps: list[float] = []
    for gap, which in crashes:
        world.advance(gap)
        stamps.append(world.now)
        inside = [t for t in stamps if world.now - t <= period]
        world.crash("abc"[which])
        if len(inside) > intensity:
            assert world.exited is not None and world.exited.info == "reached_max_restart_intensity"
            assert len(world.events("escalated")) == 1
            return
        assert world.exited is None
    assert world.events("escalated") == []


@pytest.mark.parametrize("strategy", STATIC)
def test_group_restart_of_every_child_position(strategy: str) -> None:
    for position in range(5):
        world, model = boot(strategy, ["permanent", "temporary", "transient", "permanent", "temporary"])
        key = model.order()[position]
        expected = model.exit(key, reasons.killed())
        world.exit(key, reasons.killed())
        assert world.touched() == expected
        check(world, model)


@settings(max_examples=100, deadline=None)
@given(RESTARTS, st.data())
def test_simple_one_for_one_random_sequences(restart: str, data: st.DataObject) -> None:
    world = World(tree(wk("job", restart=restart), strategy="simple_one_for_one", intensity=10**9)).start()
    live: list[str] = []
    made = 0
    for _ in range(data.draw(st.integers(min_value=1, max_value=30), label="steps")):
        op = data.draw(st.sampled_from(["start", "exit", "terminate"] if live else ["start"]), label="op")
        world.clear()
        if op == "start":
            made += 1
            args = data.draw(st.tuples(st.integers()), label="args")
            assert world.admin("start_child", extra_args=args).id == f"job#{made}"
            assert world.spawns()[0].args == args
            live.append(f"job#{made}")
        elif op == "exit":
            key = data.draw(st.sampled_from(live), label="key")
            reason = data.draw(REASONS, label="reason")
            args = world.core.children.get(key).args  # type: ignore[union-attr]
            world.exit(key, reason)
            normal = reason.kind in (ExitKind.NORMAL, ExitKind.SHUTDOWN)
            if restart == "permanent" or (restart == "transient" and not normal):
                assert [(s.key, s.args) for s in world.spawns()] == [(key, args)]  # same extra args
            else:
                assert world.spawns() == []
                live.remove(key)  # a dynamic child that is not restarted is forgotten
        else:
            key = data.draw(st.sampled_from(live), label="key")
            assert world.admin("terminate_child", key) == "ok"
            live.remove(key)
        assert set(world.status()) == set(live)
        assert set(world.running) == set(live)
        assert world.admin("count_children")["workers"] == len(live)
    world.clear()
    world.shutdown()
    assert sorted(world.stopped()) == sorted(live)
    assert world.exited == reasons.shutdown()
