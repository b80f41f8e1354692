"""Black-box tests of ouroactors.supervision.decisions: OTP's decision tables as pure functions.

Each test pins one rule of ``shared/notes/otp.md`` (1.2 strategies, 1.6 restart decision,
1.7 intensity, 1.9 auto-shutdown) so that breaking the rule breaks a test.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ouroactors.supervision import reasons
from ouroactors.supervision.decisions import (
    AfterExit,
    RestartWindow,
    after_exit,
    auto_shutdown_due,
    is_abnormal,
    restart_group,
)
from ouroactors.supervision.reasons import ExitKind, ExitReason
from ouroactors.supervision.specs import AutoShutdown, RestartType, Strategy

text = st.text(max_size=20)
normal_reasons = st.just(reasons.normal())
shutdown_reasons = st.one_of(st.just(reasons.shutdown()), text.map(reasons.shutdown))
crash_reasons = st.builds(reasons.crash_of, text, text, text)
killed_reasons = st.one_of(st.just(reasons.killed()), text.map(reasons.killed))
normalish = st.one_of(normal_reasons, shutdown_reasons)
abnormal = st.one_of(crash_reasons, killed_reasons)
any_reason = st.one_of(normalish, abnormal)


# -- do_restart/3: restart type x exit reason ------------------------------------------------------


@given(normalish)
def test_permanent_restarts_after_a_normal_or_shutdown_exit(reason: ExitReason) -> None:
    assert after_exit(RestartType.PERMANENT, reason) is AfterExit.RESTART


@given(abnormal)
def test_permanent_restarts_after_a_crash_or_kill(reason: ExitReason) -> None:
    assert after_exit(RestartType.PERMANENT, reason) is AfterExit.RESTART


@given(normalish)
def test_transient_keeps_spec_without_restart_after_normal_shutdown_or_shutdown_info(
    reason: ExitReason,
) -> None:
    assert after_exit(RestartType.TRANSIENT, reason) is AfterExit.KEEP


@given(abnormal)
def test_transient_restarts_after_a_crash_or_kill(reason: ExitReason) -> None:
    assert after_exit(RestartType.TRANSIENT, reason) is AfterExit.RESTART


@given(any_reason)
def test_temporary_is_never_restarted_and_its_spec_is_deleted(reason: ExitReason) -> None:
    assert after_exit(RestartType.TEMPORARY, reason) is AfterExit.DELETE


@pytest.mark.parametrize(
    ("restart", "reason", "expected"),
    [
        (RestartType.PERMANENT, reasons.normal(), AfterExit.RESTART),
        (RestartType.PERMANENT, reasons.shutdown(), AfterExit.RESTART),
        (RestartType.PERMANENT, reasons.shutdown("info"), AfterExit.RESTART),
        (RestartType.PERMANENT, reasons.crash_of("E", "m"), AfterExit.RESTART),
        (RestartType.PERMANENT, reasons.killed(), AfterExit.RESTART),
        (RestartType.TRANSIENT, reasons.normal(), AfterExit.KEEP),
        (RestartType.TRANSIENT, reasons.shutdown(), AfterExit.KEEP),
        (RestartType.TRANSIENT, reasons.shutdown("info"), AfterExit.KEEP),
        (RestartType.TRANSIENT, reasons.crash_of("E", "m"), AfterExit.RESTART),
        (RestartType.TRANSIENT, reasons.killed(), AfterExit.RESTART),
        (RestartType.TEMPORARY, reasons.normal(), AfterExit.DELETE),
        (RestartType.TEMPORARY, reasons.shutdown(), AfterExit.DELETE),
        (RestartType.TEMPORARY, reasons.shutdown("info"), AfterExit.DELETE),
        (RestartType.TEMPORARY, reasons.crash_of("E", "m"), AfterExit.DELETE),
        (RestartType.TEMPORARY, reasons.killed(), AfterExit.DELETE),
    ],
)
def test_decision_table_every_cell(restart: RestartType, reason: ExitReason, expected: AfterExit) -> None:
    assert after_exit(restart, reason) is expected


@given(any_reason)
def test_is_abnormal_is_exactly_not_normal_shutdown_or_shutdown_info(reason: ExitReason) -> None:
    assert is_abnormal(reason) is (reason.kind not in (ExitKind.NORMAL, ExitKind.SHUTDOWN))
    assert is_abnormal(reason) is (after_exit(RestartType.TRANSIENT, reason) is AfterExit.RESTART)


# -- add_restart: the intensity window -------------------------------------------------------------


@pytest.mark.parametrize("intensity", [1, 2, 3, 5, 10])
def test_window_allows_intensity_restarts_then_refuses_the_next_one(intensity: int) -> None:
    window = RestartWindow(intensity, 5.0)
    assert all(window.add(0.0) for _ in range(intensity))
    assert window.add(0.0) is False


def test_window_intensity_zero_refuses_the_first_restart() -> None:
    assert RestartWindow(0, 5.0).add(0.0) is False
    assert RestartWindow(0, 1000.0).add(123.0) is False


def test_window_slides_old_stamps_expire() -> None:
    window = RestartWindow(2, 10.0)
    assert window.add(0.0)
    assert window.add(1.0)
    assert window.add(10.5)  # the stamp at 0 is older than the period now
    assert window.recent == 2
    assert window.add(11.5)  # the stamp at 1 expired too
    assert window.add(12.0) is False  # 10.5, 11.5, 12.0 are all inside the window


def test_window_boundary_a_stamp_exactly_period_old_still_counts() -> None:
    # OTP keeps stamps R with R >= Now - Period.
    window = RestartWindow(1, 5.0)
    assert window.add(0.0)
    assert window.add(5.0) is False
    window = RestartWindow(1, 5.0)
    assert window.add(0.0)
    assert window.add(5.001)


def test_window_restarts_spread_out_beyond_the_period_never_refuse() -> None:
    window = RestartWindow(1, 5.0)
    assert all(window.add(i * 5.5) for i in range(100))
    assert window.recent == 1


def test_window_counts_each_call_once_and_recent_reports_the_live_stamps() -> None:
    window = RestartWindow(3, 5.0)
    window.add(0.0)
    window.add(0.0)
    assert window.recent == 2


def _reference(intensity: int, period: float, times: list[float]) -> list[bool]:
    """Naive OTP add_restart: keep every stamp, count those inside [now - period, now]."""
    seen: list[float] = []
    out = []
    for now in times:
        seen.append(now)
        inside = [t for t in seen if now - t <= period]
        out.append(len(inside) <= intensity)
    return out


@given(
    st.integers(min_value=0, max_value=6),
    st.floats(min_value=0.5, max_value=20.0, allow_nan=False),
    st.lists(st.floats(min_value=0.0, max_value=10.0, allow_nan=False), max_size=40),
)
def test_window_matches_a_naive_reference(intensity: int, period: float, gaps: list[float]) -> None:
    times = list(itertools.accumulate(gaps))
    window = RestartWindow(intensity, period)
    assert [window.add(t) for t in times] == _reference(intensity, period, times)


@given(
    st.integers(min_value=0, max_value=6),
    st.lists(st.integers(min_value=0, max_value=4), max_size=40),
)
def test_window_matches_reference_with_integer_seconds(intensity: int, gaps: list[int]) -> None:
    # OTP's clock has integer-second resolution: exercise the boundary (gap == period) often.
    times = [float(t) for t in itertools.accumulate(gaps)]
    window = RestartWindow(intensity, 3.0)
    assert [window.add(t) for t in times] == _reference(intensity, 3.0, times)


# -- do_auto_shutdown/2 ---------------------------------------------------------------------------


@pytest.mark.parametrize("exited", [True, False])
@pytest.mark.parametrize("still", [True, False])
def test_auto_shutdown_never_never_shuts_down(exited: bool, still: bool) -> None:
    assert auto_shutdown_due(AutoShutdown.NEVER, exited, still) is False


@pytest.mark.parametrize("policy", [AutoShutdown.ANY_SIGNIFICANT, AutoShutdown.ALL_SIGNIFICANT])
@pytest.mark.parametrize("still", [True, False])
def test_auto_shutdown_ignores_non_significant_exits(policy: AutoShutdown, still: bool) -> None:
    assert auto_shutdown_due(policy, False, still) is False


@pytest.mark.parametrize("still", [True, False])
def test_auto_shutdown_any_significant_on_the_first_significant_exit(still: bool) -> None:
    assert auto_shutdown_due(AutoShutdown.ANY_SIGNIFICANT, True, still) is True


def test_auto_shutdown_all_significant_only_when_none_remain() -> None:
    assert auto_shutdown_due(AutoShutdown.ALL_SIGNIFICANT, True, True) is False
    assert auto_shutdown_due(AutoShutdown.ALL_SIGNIFICANT, True, False) is True


# -- restart/3: which children a strategy touches --------------------------------------------------

ids = st.lists(st.text(alphabet="abcdefgh", min_size=1, max_size=3), min_size=1, max_size=8, unique=True)


@given(ids, st.data())
def test_one_for_one_touches_only_the_failed_child(order: list[str], data: st.DataObject) -> None:
    failed = data.draw(st.sampled_from(order))
    for strategy in (Strategy.ONE_FOR_ONE, Strategy.SIMPLE_ONE_FOR_ONE):
        assert restart_group(strategy, order, failed) == ([], [failed])


@given(ids, st.data())
def test_one_for_all_terminates_all_others_and_restarts_all(order: list[str], data: st.DataObject) -> None:
    failed = data.draw(st.sampled_from(order))
    terminate, start = restart_group(Strategy.ONE_FOR_ALL, order, failed)
    assert terminate == [c for c in order if c != failed]  # in start order; the caller reverses it
    assert start == order


@given(ids, st.data())
def test_rest_for_one_touches_the_failed_child_and_everyone_after_it(
    order: list[str], data: st.DataObject
) -> None:
    index = data.draw(st.integers(min_value=0, max_value=len(order) - 1))
    failed = order[index]
    terminate, start = restart_group(Strategy.REST_FOR_ONE, order, failed)
    assert terminate == order[index + 1 :]
    assert start == order[index:]
    assert not set(order[:index]) & (set(terminate) | set(start))  # earlier siblings untouched


def test_restart_group_examples() -> None:
    order = ["a", "b", "c", "d"]
    assert restart_group(Strategy.REST_FOR_ONE, order, "b") == (["c", "d"], ["b", "c", "d"])
    assert restart_group(Strategy.REST_FOR_ONE, order, "d") == ([], ["d"])
    assert restart_group(Strategy.ONE_FOR_ALL, order, "c") == (["a", "b", "d"], order)
    assert restart_group(Strategy.ONE_FOR_ONE, order, "c") == ([], ["c"])


def test_restart_group_does_not_mutate_its_input() -> None:
    order = ("a", "b", "c")
    terminate, start = restart_group(Strategy.ONE_FOR_ALL, order, "b")
    start.append("x")
    terminate.append("y")
    assert order == ("a", "b", "c")
    assert restart_group(Strategy.ONE_FOR_ALL, order, "b") == (["a", "c"], ["a", "b", "c"])


def test_after_exit_is_total_over_kinds() -> None:
    for restart in RestartType:
        for kind in ExitKind:
            assert isinstance(after_exit(restart, ExitReason(kind)), AfterExit)
