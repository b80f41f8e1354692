"""Fault plans from a user's review: what a plan may ask for, where an armed plan reaches, what check may return."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from ouroactors import supervisor, worker
from ouroactors.core import faults
from ouroactors.core.errors import ActorCrashed
from ouroactors.core.faults import FaultAction, FaultInjected, FaultPlan, FaultRule, load_plan
from ouroactors.core.procs import process_start_ticks
from ouroactors.faults.scenario import _checked

pytest_plugins = ["pytester"]
POINT = "scenario_app.half_written"  # TornStore reaches it in every put


@pytest.fixture
def unrelated():
    """A process that is none of any system's actors: no plan may have it killed."""
    victim = subprocess.Popen(["sleep", "60"])
    try:
        yield victim
    finally:
        if victim.poll() is None:
            victim.kill()
        victim.wait()


# -- 1. a plan cannot aim a kill at a pid ------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["target_pid", "target_start"])
def test_a_plan_file_naming_a_pid_is_refused_and_the_process_survives(tmp_path, unrelated, key):
    pid = unrelated.pid
    plan = tmp_path / "plan.toml"
    plan.write_text(f'[[rules]]\npoint = "message.app/store"\naction = "kill"\ntarget = "app/store"\n'
                    f'target_pid = {pid}\n' + (f"target_start = {process_start_ticks(pid)}\n" if key != "target_pid"
                                               else "") + "nth = 1\n")
    with pytest.raises(ValueError, match=r"plan\.toml: rules\[0\]: 'target_pid' may not be set by a plan"):
        load_plan(plan)
    for bad in (-1, 1, pid):
        with pytest.raises(ValueError, match=rf"rules\[0\]: '{key}' may not be set by a plan"):
            FaultPlan.from_dict({"rules": [{"point": "p", "action": "kill", "target": "app/x", key: bad}]})
    assert unrelated.poll() is None


def test_a_kill_rule_never_signals_a_pid_it_did_not_prove_is_its_target(unrelated):
    with pytest.raises(ValueError, match="target_pid"):
        FaultRule("p", FaultAction.KILL, target_pid=unrelated.pid)  # a pid and no target actor
    for bad in (-1, 0):
        with pytest.raises(ValueError, match="target_pid"):
            FaultRule("p", FaultAction.KILL, target="app/x", target_pid=bad)
    unproven = FaultRule("p", FaultAction.KILL, target="app/x", target_pid=unrelated.pid)  # no start time
    assert faults._kill_victim(unproven, "p") is None
    init = FaultRule("p", FaultAction.KILL, target="app/x", target_pid=1, target_start=process_start_ticks(1) or 0)
    assert faults._kill_victim(init, "p") is None  # never pid 1, whatever its start time
    faults.arm(FaultPlan((unproven,)))
    try:
        faults.point("p")
        faults.point("p")
    finally:
        faults.disarm()
    assert [f.action for f in faults.firings()] == [FaultAction.KILL] * 2
    assert unrelated.poll() is None  # fired, and spared: nothing proved it is app/x


# -- 5. numbers a plan may give ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("line", "key"), [
    ('action = "delay"\ndelay_s = 1e308', "delay_s"), ('action = "delay"\ndelay_s = inf', "delay_s"),
    ('action = "delay"\ndelay_s = nan', "delay_s"), ('action = "delay"\ndelay_s = 2073601', "delay_s"),
    ('action = "raise"\nafter_s = inf', "after_s"), ('action = "raise"\nafter_s = nan', "after_s"),
    ('action = "raise"\nafter_s = -1', "after_s"), ('action = "raise"\nprobability = nan', "probability"),
    ('action = "raise"\nprobability = inf', "probability"), ('action = "raise"\nnth = -3', "nth"),
    ('action = "raise"\nevery = 0', "every"), ('action = "raise"\ntimes = 1.5', "times"),
])
def test_a_plan_number_out_of_range_is_refused_naming_the_rule_and_key(tmp_path, line, key):
    plan = tmp_path / "plan.toml"
    plan.write_text(f'[[rules]]\npoint = "a"\naction = "raise"\n\n[[rules]]\npoint = "b"\n{line}\n')
    with pytest.raises(ValueError, match=rf"plan\.toml: rules\[1\]: {key}: "):
        load_plan(plan)


def test_the_longest_delay_a_plan_may_ask_for_is_24_days():
    assert FaultRule("p", FaultAction.DELAY, delay_s=24 * 24 * 3600).delay_s == 2_073_600
    with pytest.raises(ValueError, match=r"delay_s: must be at most 2073600 s \(24 days\), got 1e\+308"):
        FaultRule("p", FaultAction.DELAY, delay_s=1e308)


# -- 8. a plan file that is not UTF-8 ----------------------------------------------------------------------------


def test_a_plan_file_that_is_not_utf8_is_named(tmp_path):
    plan = tmp_path / "latin.toml"
    plan.write_bytes(b'[[rules]]\npoint = "caf\xe9"\naction = "raise"\n')
    with pytest.raises(ValueError, match=r"latin\.toml: not a UTF-8 text file \(byte b'\\xe9' at offset 22\)"):
        load_plan(plan)


# -- 3. what check may return --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("returned", "violations"), [
    (None, []), ("", []), ([], []), ("a violation", ["a violation"]), (["one", "two"], ["one", "two"]),
    (iter(["yielded"]), ["yielded"]),
    (True, ["check must return None, a str, or an iterable of str; got bool (True)"]),
    (False, ["check must return None, a str, or an iterable of str; got bool (False)"]),
    (3, ["check must return None, a str, or an iterable of str; got int (3)"]),
])
def test_what_check_returns_is_read_as_documented(returned, violations):
    assert _checked(lambda system: returned, None) == violations  # type: ignore[arg-type]


# -- 2. on the simple base a plan reaches the actor armed, and not past its system -------------------------------


def _stores():
    kwargs = {"path": "s.json"}
    return supervisor("app", [worker("s1", "tests.faults.scenario_app:TornStore", kwargs=kwargs),
                              worker("s2", "tests.faults.scenario_app:TornStore", kwargs={"path": "s2.json"})],
                      intensity=5)


def test_a_plan_armed_in_one_actor_of_the_simple_base_reaches_it_alone_and_dies_with_its_system(
        actor_system_factory):
    plan = FaultPlan((FaultRule(POINT, FaultAction.RAISE),))
    first = actor_system_factory("simple", pickle_messages=True)
    first.start_tree(_stores())
    assert first.arm_faults("app/s1", plan) == ["app/s1"]
    assert first.ask("app/s2", ("put", "k", 1), timeout=5) == "ok"  # not armed: it runs free
    with pytest.raises(ActorCrashed, match="fault injected"):
        first.ask("app/s1", ("put", "k", 1), timeout=5)
    fired = [e for e in first.events.all() if e.kind == "fault_fired"]
    assert [(e.path, e.fields["point"]) for e in fired] == [("app/s1", POINT)]
    first.shutdown()
    faults.point(POINT)  # plain code after the system has gone: nothing armed for it (it raised FaultInjected)
    assert faults.armed() is None
    second = actor_system_factory("simple", pickle_messages=True)  # the next test's fresh system
    second.start_tree(_stores())
    assert second.ask("app/s1", ("put", "k", 1), timeout=5) == "ok"
    faults.point(POINT)  # the worker shell named app/s1 the running actor: still nothing armed


def test_arming_a_subtree_on_the_simple_base_reaches_every_actor_below_with_shared_counts(simple_system):
    simple_system.start_tree(_stores())
    simple_system.arm_faults("app", FaultPlan((FaultRule(POINT, FaultAction.RAISE, nth=2),)))
    assert simple_system.ask("app/s1", ("put", "k", 1), timeout=5) == "ok"  # hit 1
    with pytest.raises(ActorCrashed):
        simple_system.ask("app/s2", ("put", "k", 1), timeout=5)  # hit 2, by another actor of the tree
    simple_system.arm_faults("app", None)
    with pytest.raises(FaultInjected):  # a process-wide plan a test arms itself still reaches everything
        faults.arm(FaultPlan((FaultRule("test.own", FaultAction.RAISE),)))
        faults.point("test.own")


def test_the_plugins_fixtures_leave_no_plan_armed_after_a_test(pytester):
    pytester.makepyfile(test_inner=textwrap.dedent(f"""
        from ouroactors import supervisor, worker
        from ouroactors.core import faults
        from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule

        PLAN = FaultPlan((FaultRule({POINT!r}, FaultAction.RAISE),))

        def test_arms_and_leaves_it(simple_system):
            simple_system.start_tree(supervisor("app", [worker("s1", "tests.faults.scenario_app:TornStore",
                                                               kwargs={{"path": "s.json"}})]))
            simple_system.arm_faults("app/s1", PLAN)
            faults.arm(PLAN)  # and one of its own, process-wide

        def test_the_next_test_runs_unarmed():
            faults.acting_as("app/s1")
            assert faults.armed() is None
            faults.point({POINT!r})
    """))
    pytester.syspathinsert(str(Path(__file__).resolve().parents[2]))
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:xdist")
    result.assert_outcomes(passed=2)
    assert faults.armed() is None


# -- 4. timeouts: finite, positive, at most a day ----------------------------------------------------------------


@pytest.mark.parametrize("bad", [1e12, 1e300, float("inf"), float("nan")])
def test_a_marker_or_workload_timeout_out_of_range_is_refused_naming_it(tmp_path, bad):
    from ouroactors.faults.workload import WorkloadConfig
    from ouroactors.testing.marker import BadArgument, parse_marker

    mark = pytest.mark.crash_enumeration(_stores(), scenario=lambda system: None, drive_timeout=bad).mark
    with pytest.raises(BadArgument, match=r"crash_enumeration: drive_timeout: must be"):
        parse_marker(mark, tmp_path)
    with pytest.raises(ValueError, match=r"^ask_timeout: must be"):
        WorkloadConfig(ask_timeout=bad)


def test_a_simulated_wait_of_any_length_does_not_overflow():
    from ouroactors.system._simulation import _as_ns

    assert _as_ns(1e300) == _as_ns(float("inf")) == 100 * 365 * 86400 * 10**9
    assert _as_ns(float("nan")) == _as_ns(-1) == 0 and _as_ns(0.5) == 500_000_000


# -- 6. enumerate-sessions crashing nowhere ------------------------------------------------------------------------


def test_enumerate_sessions_with_only_matching_no_site_exits_2(monkeypatch, capsys):
    from ouroactors.faults import session_cli, session_enumerate

    class Reference:
        violations: list[str] = []
        history = type("History", (), {"state": "done"})()

    recorded = [session_enumerate.SessionSite("agent/coordinator", "coordinator.published", 1, "coordinator")]

    def enumerated(work, **kwargs):
        return session_enumerate.SessionEnumeration([], [], Reference(), 0.1, recorded)  # type: ignore[arg-type]

    monkeypatch.setattr(session_enumerate, "enumerate_session_crashes", enumerated)
    assert session_cli.run(only=("nomatch.*",)) == 2
    assert ("no crash site selected: --only 'nomatch.*' matches none of the 1 site(s) the recording reached "
            "(their points: coordinator.published)") in capsys.readouterr().err


def test_enumerate_sessions_refuses_a_used_data_dir_before_anything_starts(monkeypatch, capsys, tmp_path):
    from ouroactors.faults import session_cli, session_enumerate

    def never(*args, **kwargs):
        raise AssertionError("nothing may start on a used --data-dir")

    monkeypatch.setattr(session_enumerate, "enumerate_session_crashes", never)
    (tmp_path / "record").mkdir()  # an earlier run's
    assert session_cli.run(data_dir=str(tmp_path)) == 2
    assert "not empty (it holds record)" in capsys.readouterr().err
