"""A spare's rehearsal turn (:mod:`ouroactors.runtime.execution.rehearsal_turn`): the real loop and effect path, run
in-process on a scratch data dir that is removed after — touching nothing of the node's, hitting no fault point a
plan aims at the session, leaving no timing marks, and never raising."""

from __future__ import annotations

import tempfile

import pytest

from ouroactors.authorities.storage.env import StorageConfig, close_env, open_env
from ouroactors.core import faults
from ouroactors.core.faults import FaultAction, FaultPlan, FaultRule
from ouroactors.runtime.execution import timing
from ouroactors.runtime.execution.rehearsal_turn import rehearse_turn


def test_a_rehearsal_turn_runs_every_part_and_leaves_nothing_behind(tmp_path, monkeypatch):
    scratch = tmp_path / "tmp"  # this test's own temporary directory: another worker's spares rehearse in /tmp
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    node = StorageConfig.under(tmp_path / "node")
    env = open_env(node)  # the node's environment, open in the same process as a runtime's is
    try:
        before = env.info()["last_txnid"]
        assert rehearse_turn() == "completed"
        assert env.info()["last_txnid"] == before  # not one transaction on the node's environment
        assert list(scratch.iterdir()) == []  # the scratch data dir is gone
    finally:
        close_env(node)


def test_a_fault_plan_armed_in_the_runtime_is_neither_hit_nor_shifted_by_it():
    # the first commit of the process is rejected: the rehearsal makes a dozen, and none of them may count
    faults.arm(FaultPlan((FaultRule("storage.before_commit", FaultAction.COMMIT_REJECTED, nth=1),
                          FaultRule("*", FaultAction.DELAY, delay_s=0.0))))  # any point, in any thread: a firing
    try:
        assert rehearse_turn() == "completed"
        assert faults.firings() == []
        with pytest.raises(faults.InjectedCommitRejected):  # the session's first commit is still the plan's first
            faults.point("storage.before_commit")
    finally:
        faults.disarm()
    assert [f.point for f in faults.firings()] == ["storage.before_commit"]  # the session's hit, its first


def test_it_leaves_no_timing_marks(monkeypatch):
    monkeypatch.setattr(timing, "ENABLED", True)
    monkeypatch.setattr(timing, "_marks", [])
    assert rehearse_turn() == "completed"
    assert timing._marks == [] and timing.ENABLED is True  # suspended while it ran, switched back on after


def test_a_rehearsal_that_cannot_run_says_why_and_never_raises(monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", "/nonexistent/ouroactors-test")
    status = rehearse_turn()
    assert status.startswith("not rehearsed: FileNotFoundError"), status


@pytest.mark.parametrize("steps", [1, 3])
def test_it_runs_the_steps_it_is_asked_for(steps):
    assert rehearse_turn(steps) == "completed"
