"""The fault bench replaces a worker whose death its supervisor never heard of, and counts that as a harness
intervention. It must wait longer than the supervisor's own fallback (a local child's pid checked every heartbeat,
taken as killed once gone for the grace period), or it would count the supervisor's slower, correct handling as a
supervision failure — as it did once, at 1.0 s, in a runtime campaign. And a supervisor that took the exit after all
(the child is gone when the bench terminates it) is no failure of either."""

from __future__ import annotations

from ouroactors.core.errors import ChildNotFound
from ouroactors.faults._bench_system import BenchSystem
from ouroactors.faults.runner import LOST_AFTER_S
from ouroactors.supervision.processes import HEARTBEAT_INTERVAL, LOCAL_EXIT_GRACE


def test_the_bench_waits_out_the_supervisors_own_lost_exit_fallback() -> None:
    # worst case for the supervisor: the pid dies just after a check; the next check sees it gone, and the first
    # check more than LOCAL_EXIT_GRACE after that one takes it as killed
    supervisor_worst_s = HEARTBEAT_INTERVAL + LOCAL_EXIT_GRACE + HEARTBEAT_INTERVAL
    assert supervisor_worst_s < LOST_AFTER_S


class _Supervisors:
    """A system whose supervisors answer terminate/restart as told (``not_found`` for the ids in the sets)."""

    base = "simple"  # isolated() hands it over as it is

    def __init__(self, gone_at_terminate: set[str], deleted_at_terminate: set[str]) -> None:
        self.gone, self.deleted = gone_at_terminate, deleted_at_terminate
        self.calls: list[tuple[str, str]] = []

    def terminate_child(self, parent: str, child: str, timeout: float = 60.0) -> None:
        self.calls.append(("terminate", child))
        if child in self.gone:
            raise ChildNotFound(f"not_found: {child}")

    def restart_child(self, parent: str, child: str) -> None:
        self.calls.append(("restart", child))
        if child in self.deleted:
            raise ChildNotFound(f"not_found: {child}")


class _Bench:
    def __init__(self, live: _Supervisors, lost: list[tuple[str, int]]) -> None:
        self.live, self._lost, self.anomalies = live, lost, []

    def lost_workers(self, rows: object = None) -> list[tuple[str, int]]:
        return self._lost


def test_a_child_its_supervisor_deleted_meanwhile_is_no_intervention_and_no_harness_error() -> None:
    """Between the walk that found a session runtime's pid gone and the bench's terminate, its supervisor took the
    exit and deleted the (temporary) child: ``not_found`` then means supervision worked, not a failure."""
    live = _Supervisors(gone_at_terminate={"runtime#1"}, deleted_at_terminate=set())
    bench = _Bench(live, [("agent/execution/runtime#1", 4242)])
    assert BenchSystem._replace_lost(bench) is False  # type: ignore[arg-type]
    assert bench.anomalies == [] and live.calls == [("terminate", "runtime#1")]


def test_a_temporary_child_the_bench_terminated_is_not_restarted_by_it() -> None:
    """A lost exit of a temporary child (a session runtime) is still an intervention; its terminate deletes it, so
    the restart's ``not_found`` is expected (the driver starts another runtime), never a harness error."""
    live = _Supervisors(gone_at_terminate=set(), deleted_at_terminate={"runtime#2"})
    bench = _Bench(live, [("agent/execution/runtime#2", 4243), ("agent/ledger", 4244)])
    assert BenchSystem._replace_lost(bench) is True  # type: ignore[arg-type]
    assert len(bench.anomalies) == 2 and "agent/execution/runtime#2" in bench.anomalies[0]
    assert live.calls == [("terminate", "runtime#2"), ("restart", "runtime#2"), ("terminate", "ledger"),
                          ("restart", "ledger")]
