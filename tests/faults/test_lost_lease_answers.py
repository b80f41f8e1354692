"""A lease grant that is committed but whose answer is lost (the workspace SIGKILLed right after the
commit) no longer empties the run: the driver's retry carries the same ``request_id`` and gets the
lease its request made, so every effect still settles (before: every session gave up)."""

from __future__ import annotations

import pytest

from ouroactors.faults.enumerate import CrashSite, enumeration_tree
from ouroactors.faults.workload import WorkloadConfig

pytestmark = pytest.mark.multiproc

CONFIG = WorkloadConfig(sessions=2, effects=2, ask_timeout=0.5, lease_wait=3.0, op_deadline=10.0)


@pytest.mark.parametrize("point", ["storage.after_commit", "workspace.lease_recorded"])
def test_a_kill_of_the_workspace_after_its_first_lease_commit_still_settles_every_effect(fault_bench, point):
    bench = fault_bench(enumeration_tree(), CONFIG)
    site = CrashSite("agent/workspace", point, 1)
    result = bench.run("lost", site.plan(), at=[site.path])
    assert [f["point"] for f in result.firings] == [point] and result.killed == ["agent/workspace"]
    assert result.violations == []
    assert result.statuses == {"ok": 4} and result.record.outcomes() == {"settled-ok": 4}  # not an empty run
    first = result.record.leases["lost/s0"]
    assert first.replays == 1 and first.released  # the retry was answered from the committed request
    assert first.grants[0][1] > 1  # reclaimed after the restart: a larger token than the lost grant's
    assert all(lease.outcome == "released" for lease in result.record.leases.values())
