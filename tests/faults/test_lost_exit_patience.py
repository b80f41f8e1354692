"""The fault bench replaces a worker whose death its supervisor never heard of, and counts that as a harness
intervention. It must wait longer than the supervisor's own fallback (a local child's pid checked every heartbeat,
taken as killed once gone for the grace period), or it would count the supervisor's slower, correct handling as a
supervision failure — as it did once, at 1.0 s, in a runtime campaign."""

from __future__ import annotations

from ouroactors.faults.runner import LOST_AFTER_S
from ouroactors.supervision.processes import HEARTBEAT_INTERVAL, LOCAL_EXIT_GRACE


def test_the_bench_waits_out_the_supervisors_own_lost_exit_fallback() -> None:
    # worst case for the supervisor: the pid dies just after a check; the next check sees it gone, and the first
    # check more than LOCAL_EXIT_GRACE after that one takes it as killed
    supervisor_worst_s = HEARTBEAT_INTERVAL + LOCAL_EXIT_GRACE + HEARTBEAT_INTERVAL
    assert supervisor_worst_s < LOST_AFTER_S
