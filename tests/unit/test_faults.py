"""Unit tests for ouroactors.core.faults (the fault-point primitive)."""

from __future__ import annotations

import dataclasses
import logging
import os
import pickle
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ouroactors.core import faults
from ouroactors.core.faults import (
    FaultAction,
    FaultFiring,
    FaultInjected,
    FaultPlan,
    FaultRule,
    arm,
    armed,
    disarm,
    firings,
    known_points,
    point,
    register_point,
    validate_plan,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
# The autouse fixture only restores module state; each hypothesis example re-arms (arm() resets).
fixture_ok = settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)


@pytest.fixture(autouse=True)
def _clean_fault_state() -> Iterator[None]:
    saved_points = dict(faults._KNOWN_POINTS)
    disarm()
    faults._LAST = None
    yield
    disarm()
    faults._LAST = None
    faults._KNOWN_POINTS.clear()
    faults._KNOWN_POINTS.update(saved_points)


def fired_hits(rule: FaultRule, hits: int, name: str = "p") -> list[int]:
    """Arm a one-rule plan, reach ``name`` ``hits`` times, return the hit numbers that fired."""
    arm(FaultPlan((rule,)))
    for _ in range(hits):
        try:
            point(name)
        except FaultInjected:
            pass
    return [f.hit for f in firings()]


# --- disarmed / matching ------------------------------------------------------------------------


def test_disarmed_point_is_a_noop() -> None:
    assert armed() is None
    assert point("ledger.after_start") is None
    assert firings() == []
    arm(FaultPlan((FaultRule("ledger.after_start", FaultAction.RAISE),)))
    disarm()
    assert armed() is None
    point("ledger.after_start")  # would raise if still armed
    assert firings() == []


def test_armed_plan_without_matching_rule_does_nothing() -> None:
    arm(FaultPlan((FaultRule("ledger.after_start", FaultAction.RAISE),)))
    point("ledger.before_start")
    point("ledger.after_start.x")
    assert firings() == []


@pytest.mark.parametrize(
    ("pattern", "name", "matches"),
    [
        ("ledger.after_start", "ledger.after_start", True),
        ("ledger.after_start", "ledger.after_star", False),
        ("ledger.after_start", "Ledger.after_start", False),
        ("ledger.*", "ledger.after_start", True),
        ("ledger.*", "ledgerx.after_start", False),
        ("ledger.*", "mailbox.ledger.x", False),
        ("*.after_*", "mailbox.after_put", True),
        ("ledger.?", "ledger.a", True),
        ("ledger.?", "ledger.ab", False),
        ("ledger.[ab]", "ledger.b", True),
        ("ledger.[ab]", "ledger.c", False),
        ("Ledger.*", "ledger.x", False),  # case-sensitive on every platform (fnmatchcase)
    ],
)
def test_exact_and_glob_matching(pattern: str, name: str, matches: bool) -> None:
    arm(FaultPlan((FaultRule(pattern, FaultAction.RAISE),)))
    if matches:
        with pytest.raises(FaultInjected):
            point(name)
    else:
        point(name)
    assert len(firings()) == int(matches)


def test_glob_flag_is_precomputed_at_arm_time() -> None:
    arm(FaultPlan((FaultRule("a.b", FaultAction.DELAY), FaultRule("a.*", FaultAction.DELAY))))
    state = faults._ARMED
    assert state is not None
    assert [c.is_glob for c in state.rules] == [False, True]


# --- triggers -----------------------------------------------------------------------------------


@fixture_ok
@given(nth=st.integers(1, 20), hits=st.integers(0, 40))
def test_nth_fires_only_on_the_nth_hit(nth: int, hits: int) -> None:
    assert fired_hits(FaultRule("p", FaultAction.DELAY, nth=nth), hits) == ([nth] if hits >= nth else [])


@fixture_ok
@given(every=st.integers(1, 10), hits=st.integers(0, 50))
def test_every_fires_on_each_multiple(every: int, hits: int) -> None:
    expected = [h for h in range(1, hits + 1) if h % every == 0]
    assert fired_hits(FaultRule("p", FaultAction.DELAY, every=every), hits) == expected


def test_default_trigger_fires_on_every_hit() -> None:
    assert fired_hits(FaultRule("p", FaultAction.DELAY), 5) == [1, 2, 3, 4, 5]


@fixture_ok
@given(times=st.integers(1, 10), every=st.integers(1, 4), hits=st.integers(0, 40))
def test_times_caps_the_number_of_firings(times: int, every: int, hits: int) -> None:
    unlimited = [h for h in range(1, hits + 1) if h % every == 0]
    got = fired_hits(FaultRule("p", FaultAction.DELAY, every=every, times=times), hits)
    assert got == unlimited[:times]


def test_times_caps_raise_then_point_passes() -> None:
    arm(FaultPlan((FaultRule("p", FaultAction.RAISE, times=2),)))
    for _ in range(2):
        with pytest.raises(FaultInjected):
            point("p")
    point("p")
    point("p")
    assert [f.hit for f in firings()] == [1, 2]


@fixture_ok
@given(seed=st.integers(0, 2**32), probability=st.floats(0.05, 0.95))
def test_probability_same_seed_same_sequence(seed: int, probability: float) -> None:
    rule = FaultRule("p", FaultAction.DELAY, probability=probability, seed=seed)
    assert fired_hits(rule, 100) == fired_hits(rule, 100)


@pytest.mark.parametrize(("seed_a", "seed_b"), [(0, 1), (1, 2), (42, 43), (7, 7000)])
def test_probability_different_seeds_differ(seed_a: int, seed_b: int) -> None:
    a = fired_hits(FaultRule("p", FaultAction.DELAY, probability=0.5, seed=seed_a), 300)
    b = fired_hits(FaultRule("p", FaultAction.DELAY, probability=0.5, seed=seed_b), 300)
    assert a != b
    assert 0 < len(a) < 300 and 0 < len(b) < 300


def test_probability_zero_and_one() -> None:
    assert fired_hits(FaultRule("p", FaultAction.DELAY, probability=0.0, seed=1), 50) == []
    assert fired_hits(FaultRule("p", FaultAction.DELAY, probability=1.0, seed=1), 50) == list(range(1, 51))


def test_probability_sequence_is_not_shifted_by_times() -> None:
    free = fired_hits(FaultRule("p", FaultAction.DELAY, probability=0.3, seed=5), 200)
    capped = fired_hits(FaultRule("p", FaultAction.DELAY, probability=0.3, seed=5, times=3), 200)
    assert capped == free[:3]


def test_arm_replaces_plan_and_resets_counters() -> None:
    plan = FaultPlan((FaultRule("p", FaultAction.DELAY, nth=2),))
    arm(plan)
    point("p")
    arm(plan)
    point("p")
    assert firings() == []
    point("p")
    assert [f.hit for f in firings()] == [2]
    other = FaultPlan((FaultRule("q", FaultAction.DELAY),))
    arm(other)
    assert armed() is other
    assert firings() == []


def test_firings_are_kept_after_disarm_and_cleared_by_arm() -> None:
    arm(FaultPlan((FaultRule("a", FaultAction.DELAY), FaultRule("b", FaultAction.DELAY))))
    for name in ("a", "b", "a"):
        point(name)
    disarm()
    assert [(f.point, f.rule_index, f.hit) for f in firings()] == [("a", 0, 1), ("b", 1, 1), ("a", 0, 2)]
    arm(FaultPlan(()))
    assert firings() == []


def test_concurrent_hits_are_counted_exactly() -> None:
    threads_n, per_thread, every = 8, 250, 7
    arm(FaultPlan((FaultRule("p", FaultAction.DELAY, every=every),)))
    barrier = threading.Barrier(threads_n)

    def worker() -> None:
        barrier.wait()
        for _ in range(per_thread):
            point("p")

    threads = [threading.Thread(target=worker) for _ in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = threads_n * per_thread
    assert sorted(f.hit for f in firings()) == list(range(every, total + 1, every))


# --- actions ------------------------------------------------------------------------------------


def test_delay_really_delays() -> None:
    arm(FaultPlan((FaultRule("p", FaultAction.DELAY, delay_s=0.05),)))
    start = time.monotonic()
    point("p")
    assert time.monotonic() - start >= 0.05


def test_delay_then_later_raise_rule_still_applies() -> None:
    arm(FaultPlan((FaultRule("p", FaultAction.DELAY, delay_s=0.02), FaultRule("p", FaultAction.RAISE))))
    start = time.monotonic()
    with pytest.raises(FaultInjected) as info:
        point("p")
    assert time.monotonic() - start >= 0.02
    assert info.value.rule_index == 1
    assert [(f.rule_index, f.action) for f in firings()] == [(0, FaultAction.DELAY), (1, FaultAction.RAISE)]


def test_raise_carries_point_and_rule_index() -> None:
    arm(FaultPlan((FaultRule("other", FaultAction.DELAY), FaultRule("ledger.*", FaultAction.RAISE))))
    with pytest.raises(FaultInjected) as info:
        point("ledger.after_start")
    assert info.value.point == "ledger.after_start"
    assert info.value.rule_index == 1
    assert "ledger.after_start" in str(info.value)
    clone = pickle.loads(pickle.dumps(info.value))
    assert (type(clone), clone.point, clone.rule_index, str(clone)) == (
        FaultInjected, "ledger.after_start", 1, str(info.value))


@pytest.mark.parametrize(
    ("path", "exc_type"),
    [
        ("subprocess:SubprocessError", subprocess.SubprocessError),
        ("subprocess.SubprocessError", subprocess.SubprocessError),
        ("builtins:ConnectionResetError", ConnectionResetError),
        ("ConnectionResetError", ConnectionResetError),
        ("concurrent.futures:TimeoutError", TimeoutError),
    ],
)
def test_raise_custom_exception_path(path: str, exc_type: type[Exception]) -> None:
    arm(FaultPlan((FaultRule("ledger.after_start", FaultAction.RAISE, exception=path),)))
    with pytest.raises(exc_type) as info:
        point("ledger.after_start")
    assert type(info.value) is exc_type
    assert "ledger.after_start" in str(info.value)


def test_first_firing_terminal_rule_wins_and_later_rules_still_count() -> None:
    arm(FaultPlan((
        FaultRule("p", FaultAction.RAISE, times=1),
        FaultRule("p", FaultAction.RAISE, nth=2, exception="builtins:RuntimeError"),
        FaultRule("p", FaultAction.DELAY),
    )))
    with pytest.raises(FaultInjected):
        point("p")
    with pytest.raises(RuntimeError):
        point("p")  # rule 1's second hit although rule 0 won the first one
    point("p")
    assert [(f.rule_index, f.hit) for f in firings()] == [(0, 1), (1, 2), (2, 3)]


def _run_python(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=env, cwd=REPO_ROOT, timeout=60, check=False)


def test_exit_ends_process_with_code_and_skips_finally_and_atexit() -> None:
    proc = _run_python("""
        import atexit
        from ouroactors.core.faults import FaultPlan, arm, point
        atexit.register(lambda: print("atexit ran", flush=True))
        plan = FaultPlan.from_dict({"rules": [{"point": "ledger.after_start", "action": "exit",
                                                "exit_code": 42}]})
        arm(plan, on_fire=lambda f: print("on_fire", f.point, f.action.value, flush=True))
        try:
            point("ledger.after_start")
        finally:
            print("finally ran", flush=True)
        print("after point", flush=True)
    """)
    assert proc.returncode == 42, proc.stderr
    assert "on_fire ledger.after_start exit" in proc.stdout
    assert "finally ran" not in proc.stdout
    assert "atexit ran" not in proc.stdout
    assert "after point" not in proc.stdout


def test_exit_default_code_is_70() -> None:
    proc = _run_python("""
        from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule, arm, point
        arm(FaultPlan((FaultRule("x", FaultAction.EXIT),)))
        point("x")
    """)
    assert proc.returncode == 70, proc.stderr


# --- on_fire ------------------------------------------------------------------------------------


def test_on_fire_receives_the_firing() -> None:
    seen: list[FaultFiring] = []
    before = time.time_ns()
    arm(FaultPlan((FaultRule("ledger.*", FaultAction.DELAY, every=2),)), on_fire=seen.append)
    for _ in range(4):
        point("ledger.after_start")
    after = time.time_ns()
    assert seen == firings()
    assert [(f.point, f.rule_index, f.action, f.hit, f.pid) for f in seen] == [
        ("ledger.after_start", 0, FaultAction.DELAY, 2, os.getpid()),
        ("ledger.after_start", 0, FaultAction.DELAY, 4, os.getpid()),
    ]
    assert all(before <= f.at_ns <= after for f in seen)


def test_on_fire_exception_is_swallowed_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    def broken(_: FaultFiring) -> None:
        raise RuntimeError("callback broke")

    arm(FaultPlan((FaultRule("d", FaultAction.DELAY), FaultRule("r", FaultAction.RAISE))), on_fire=broken)
    with caplog.at_level(logging.ERROR, logger=faults.__name__):
        point("d")  # returns normally
        with pytest.raises(FaultInjected):  # the action still happens, not the callback's error
            point("r")
    assert len(firings()) == 2
    assert sum("callback broke" in (r.exc_text or "") for r in caplog.records) == 2


# --- validation, from_dict / to_dict, pickling --------------------------------------------------


def test_from_dict_unknown_key_suggests() -> None:
    data = {"rules": [{"point": "a", "action": "raise"}, {"point": "a", "action": "delay", "evry": 2}]}
    with pytest.raises(ValueError) as info:
        FaultPlan.from_dict(data)
    assert str(info.value) == "rules[1]: unknown key 'evry' (did you mean 'every'?)"


def test_from_dict_unknown_key_without_close_match_lists_allowed() -> None:
    with pytest.raises(ValueError, match=r"rules\[0\]: unknown key 'zzz' \(allowed: point, action"):
        FaultPlan.from_dict({"rules": [{"point": "a", "action": "raise", "zzz": 1}]})


def test_from_dict_bad_action_lists_allowed() -> None:
    with pytest.raises(ValueError) as info:
        FaultPlan.from_dict({"rules": [{"point": "a", "action": "explode"}]})
    msg = str(info.value)
    assert msg.startswith("rules[0]: action:") and "'explode'" in msg
    assert all(f"'{a.value}'" in msg for a in FaultAction)


@pytest.mark.parametrize(
    ("rule", "needle"),
    [
        ({"point": "a", "action": "raise", "probability": 1.5},
         "probability: must be a number in [0, 1], got 1.5"),
        ({"point": "a", "action": "raise", "probability": -0.1}, "probability"),
        ({"point": "a", "action": "raise", "nth": 1, "every": 2},
         "at most one may be given, got nth=1, every=2"),
        ({"point": "a", "action": "raise", "every": 2, "probability": 0.5}, "nth/every/probability"),
        ({"point": "a", "action": "raise", "nth": 0}, "nth: must be an int >= 1, got 0"),
        ({"point": "a", "action": "raise", "every": "3"}, "every: must be an int >= 1, got '3'"),
        ({"point": "a", "action": "raise", "times": 0}, "times: must be an int >= 1, got 0"),
        ({"point": "a", "action": "delay", "delay_s": -1}, "delay_s: must be a number >= 0, got -1"),
        ({"point": "a", "action": "exit", "exit_code": 256}, "exit_code"),
        ({"point": "a", "action": "raise", "seed": 3}, "seed"),
        ({"point": "a", "action": "raise", "delay_s": 1.0}, "delay_s"),
        ({"point": "a", "action": "exit", "exception": "builtins:KeyError"}, "exception"),
        ({"point": "a", "action": "raise", "exception": "no_such_module_xyz:Err"}, "cannot import"),
        ({"point": "a", "action": "raise", "exception": "os:path"}, "not an Exception subclass"),
        ({"point": "a", "action": "raise", "exception": "builtins:KeyboardInterrupt"}, "not an Exception"),
        ({"point": "a", "action": "raise", "exception": "json:JSONDecodeError"}, "cannot be constructed"),
        ({"point": "", "action": "raise"}, "point: must be a non-empty string"),
        ({"point": "a"}, "missing required key 'action'"),
    ],
)
def test_from_dict_invalid_rules(rule: dict[str, object], needle: str) -> None:
    with pytest.raises(ValueError) as info:
        FaultPlan.from_dict({"rules": [{"point": "ok", "action": "delay"}, rule]})
    assert str(info.value).startswith("rules[1]: ")
    assert needle in str(info.value)


def test_from_dict_bad_shapes() -> None:
    with pytest.raises(ValueError, match=r"unknown key 'rule' \(did you mean 'rules'\?\)"):
        FaultPlan.from_dict({"rule": []})
    with pytest.raises(ValueError, match="rules: expected a list"):
        FaultPlan.from_dict({"rules": {"point": "a"}})
    with pytest.raises(ValueError, match=r"rules\[0\]: expected a dict"):
        FaultPlan.from_dict({"rules": ["a"]})
    assert FaultPlan.from_dict({}) == FaultPlan(())


def test_rule_coerces_action_string_and_plan_coerces_list() -> None:
    rule = FaultRule("a", "exit")  # type: ignore[arg-type]
    assert rule.action is FaultAction.EXIT
    plan = FaultPlan([rule])  # type: ignore[arg-type]
    assert plan.rules == (rule,)
    with pytest.raises(TypeError):
        arm(plan.to_dict())  # type: ignore[arg-type]


rules_strategy = st.builds(
    FaultRule,
    point=st.sampled_from(["ledger.after_start", "ledger.*", "mailbox.?", "a[bc].d"]),
    action=st.just(FaultAction.DELAY),
    nth=st.none() | st.integers(1, 100),
    times=st.none() | st.integers(1, 100),
    delay_s=st.floats(0, 10),
) | st.builds(
    FaultRule,
    point=st.text(min_size=1, max_size=20),
    action=st.just(FaultAction.RAISE),
    probability=st.floats(0, 1),
    seed=st.integers(-(2**40), 2**40),
    exception=st.sampled_from([None, "builtins:KeyError", "subprocess.SubprocessError"]),
) | st.builds(
    FaultRule, point=st.just("x"), action=st.just(FaultAction.EXIT),
    every=st.none() | st.integers(1, 9), exit_code=st.integers(0, 255),
)


@given(st.lists(rules_strategy, max_size=6))
def test_plan_pickle_and_dict_round_trip(rules: list[FaultRule]) -> None:
    plan = FaultPlan(tuple(rules))
    assert pickle.loads(pickle.dumps(plan)) == plan
    assert FaultPlan.from_dict(plan.to_dict()) == plan
    as_dict = plan.to_dict()
    assert all(isinstance(r["action"], str) and type(r["action"]) is str for r in as_dict["rules"])


# --- registry -----------------------------------------------------------------------------------


def test_register_point_and_known_points() -> None:
    name = register_point("ledger.after_start", "after the start record is durable")
    assert name == "ledger.after_start"
    register_point("ledger.after_start")  # re-registering without doc keeps the doc
    register_point("mailbox.after_put", "after put")
    points = known_points()  # other modules (storage, ledger) register theirs at import time
    assert points["ledger.after_start"] == "after the start record is durable"
    assert points["mailbox.after_put"] == "after put"
    known_points()["x"] = "y"  # a copy
    assert "x" not in known_points()
    with pytest.raises(ValueError, match="glob"):
        register_point("ledger.*")


def test_validate_plan_warns_for_unknown_points() -> None:
    register_point("ledger.after_start", "doc")
    register_point("mailbox.after_put", "doc")
    plan = FaultPlan((
        FaultRule("ledger.after_start", FaultAction.RAISE),
        FaultRule("ledger.*", FaultAction.RAISE),
        FaultRule("ledger.after_strat", FaultAction.RAISE),
        FaultRule("nothing.*", FaultAction.RAISE),
    ))
    warnings = validate_plan(plan)
    assert len(warnings) == 2
    assert warnings[0].startswith("rules[2]: point 'ledger.after_strat'")
    assert "did you mean 'ledger.after_start'" in warnings[0]
    assert warnings[1].startswith("rules[3]: point 'nothing.*'")
    listings = [w.split("known points: ")[1].split(", ") for w in warnings]
    assert all({"ledger.after_start", "mailbox.after_put"} <= set(known) for known in listings)
    assert all(known == sorted(known) for known in listings)


def test_validate_plan_with_nothing_registered() -> None:
    faults._KNOWN_POINTS.clear()
    [warning] = validate_plan(FaultPlan((FaultRule("a", FaultAction.RAISE),)))
    assert "(none registered)" in warning


def test_a_kill_never_hits_a_process_that_is_no_longer_its_target() -> None:
    victim = subprocess.Popen(["sleep", "60"])
    try:
        aimed = faults.with_kill_target(FaultRule("p", FaultAction.KILL, target="root/victim"), victim.pid)
        assert aimed.target_pid == victim.pid and aimed.target_start is not None
        stale = dataclasses.replace(aimed, target_start=aimed.target_start - 1)  # an earlier incarnation
        faults.arm(FaultPlan((stale,)))
        faults.point("p")
        assert victim.poll() is None  # spared
        faults.arm(FaultPlan((aimed,)))
        faults.point("p")
        assert victim.wait(timeout=10) == -9
    finally:
        faults.disarm()
        if victim.poll() is None:
            victim.kill()
            victim.wait()


def _forked_children(count: int) -> list[str]:
    """Fork ``count`` children one after the other; each says whether it carries a plan (and, armed, whether its own
    first fork would: its forks count afresh)."""
    children = []
    for _ in range(count):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child reports whether it carries the plan, and leaves at once
            os.close(read)
            state = faults._ARMED
            said = "free" if state is None else f"armed:{state.skips_left}/{state.forks_left}"
            os.write(write, said.encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as pipe:
            children.append(pipe.read().decode())
        os.waitpid(pid, 0)
    return children


def test_a_plan_armed_for_one_fork_reaches_that_child_alone() -> None:
    """``forks=1``: the next child forked carries the plan; the parent disarms itself as it forks it, so the children
    after it (a supervisor's restart of the first, a replacement) carry nothing."""
    plan = FaultPlan((FaultRule("p.x", FaultAction.RAISE),), forks=1)
    assert FaultPlan.from_dict(plan.to_dict()) == plan and pickle.loads(pickle.dumps(plan)) == plan
    faults.arm(plan)
    try:
        assert _forked_children(2) == ["armed:0/1", "free"]
        assert faults.armed() is None  # the parent too: it was armed for that one child
    finally:
        faults.disarm()
    with pytest.raises(ValueError, match="forks"):
        FaultPlan((), forks=0)


def test_a_plan_skipping_forks_reaches_the_kth_child_alone() -> None:
    """``skip_forks=2, forks=1``: the third child forked from now carries the plan — the two before it run free and
    do not use up ``forks`` — and the parent disarms itself as it forks that one."""
    plan = FaultPlan((FaultRule("p.x", FaultAction.RAISE),), forks=1, skip_forks=2)
    assert FaultPlan.from_dict(plan.to_dict()) == plan and plan.to_dict()["skip_forks"] == 2
    assert "skip_forks" not in FaultPlan((), forks=1).to_dict()
    faults.arm(plan)
    try:
        assert _forked_children(4) == ["free", "free", "armed:2/1", "free"]
        assert faults.armed() is None
    finally:
        faults.disarm()
    faults.arm(FaultPlan((FaultRule("p.x", FaultAction.RAISE),), skip_forks=1))  # then every child after the first
    try:
        assert _forked_children(3) == ["free", "armed:1/None", "armed:1/None"]
        assert faults.armed() is not None
    finally:
        faults.disarm()
    for bad in (-1, True, 1.5, "1"):
        with pytest.raises(ValueError, match="skip_forks"):
            FaultPlan((), skip_forks=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="skip_forks"):
        FaultPlan.from_dict({"rules": [], "skip_forks": -2})
    with pytest.raises(ValueError, match=r"unknown key .skips."):
        FaultPlan.from_dict({"rules": [], "skips": 1})
