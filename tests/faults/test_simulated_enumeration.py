"""Crash enumeration on the simulated base: every site is a simulated death of the actor that reached
it (the supervisor sees ``killed``), replayed to the delivery; the marker takes ``base="simple"``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ouroactors.faults.enumerate import CrashSite, enumerate_crashes, sites_from
from ouroactors.faults.runner import workload_tree
from ouroactors.faults.workload import WorkloadConfig
from tests.inner_pytest import UNRELATED_PLUGINS

from .planted_restart import PRESUMES_FAILED_LEDGER

pytest_plugins = ["pytester"]

PROJECT = Path(__file__).resolve().parents[2]


def planted_tree():
    return workload_tree(ledger=PRESUMES_FAILED_LEDGER, heartbeat_s=60.0, owner_lost_after_s=120.0)


def test_sites_on_one_process_are_numbered_per_point_across_actors():
    firings = [{"path": "a/l", "point": "p"}, {"path": "a/w", "point": "p"}, {"path": "a/l", "point": "p"}]
    assert sites_from(firings, shared=True) == [CrashSite("a/l", "p", 1, True), CrashSite("a/w", "p", 2, True),
                                                CrashSite("a/l", "p", 3, True)]


def test_an_unknown_base_is_refused_before_anything_starts():
    with pytest.raises(ValueError, match="base: must be one of multiproc, simple, got 'tcp'"):
        enumerate_crashes(base="tcp")


def test_each_site_kills_exactly_its_actor_and_the_real_ledger_keeps_every_invariant(tmp_path):
    config = WorkloadConfig(sessions=1, effects=2, ask_timeout=0.5, lease_wait=3.0, op_deadline=10.0)
    report = enumerate_crashes(config=config, points=["ledger.*", "storage.after_commit"], data_dir=tmp_path,
                               base="simple")
    print(f"\n{len(report.rows)} sites in {report.duration_s:.1f}s: {report.summary()}")
    assert report.baseline.violations == [] and report.baseline.statuses == {"ok": 2}
    assert len(report.rows) >= 10 and all(site.shared for site in report.sites)
    assert report.violations == [], "\n".join(f"{site}: {v}" for site, v in report.violations)
    assert all(row.outcome == "ok" and row.fired for row in report.rows), report.summary()  # deterministic
    assert all(row.killed == [row.site.path] for row in report.rows)  # that actor died, nobody else
    assert any(row.statuses.get("ambiguous") for row in report.rows)  # a death left an effect unknown


def test_the_planted_restart_bug_is_caught_at_the_ledgers_sites(tmp_path):
    report = enumerate_crashes(planted_tree(), points=["ledger.settle_received"], data_dir=tmp_path, base="simple")
    assert report.baseline.violations == []  # crash-free, the bug does not show
    caught = [row for row in report.rows if row.outcome == "VIOLATION"]
    assert caught and all(row.killed == ["agent/ledger"] for row in caught)
    assert any(v.invariant == "ambiguous-not-failed" and "settled 'failed' by recovery but the world saw" in v.message
               for row in caught for v in row.violations)


@pytest.mark.slow
def test_the_whole_enumeration_on_the_simulated_base_finds_every_site_ok(tmp_path):
    report = enumerate_crashes(data_dir=tmp_path, base="simple")
    print(f"\n{len(report.rows)} sites in {report.duration_s:.1f}s: {report.summary()}")
    assert len(report.rows) >= 80 and report.summary() == {"ok": len(report.rows)}
    assert all(row.killed == [row.site.path] for row in report.rows)


MARKED = """
import pytest

from ouroactors.faults.runner import workload_tree
from tests.faults.planted_restart import PRESUMES_FAILED_LEDGER

BUGGY = workload_tree(ledger=PRESUMES_FAILED_LEDGER, heartbeat_s=60.0, owner_lost_after_s=120.0)
SMALL = {"sessions": 1, "effects": 2}

@pytest.mark.crash_enumeration(config=SMALL, points=["ledger.settle_received"], base="simple")
def test_the_real_ledger(crash_report):
    assert crash_report.rows and all(row.site.shared for row in crash_report.rows)

@pytest.mark.crash_enumeration(BUGGY, config=SMALL, points=["ledger.settle_received"], max_sites=2, base="simple")
def test_the_planted_restart_bug():
    raise AssertionError("the body ran")
"""


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.Pytester]:
    monkeypatch.setenv("PYTHONPATH", str(PROJECT))
    yield pytester


@pytest.mark.slow
def test_the_marker_enumerates_on_the_simulated_base(inner: pytest.Pytester) -> None:
    inner.makepyfile(test_marked=MARKED)
    result = inner.runpytest_subprocess("-p", "no:cacheprovider", *UNRELATED_PLUGINS, timeout=120)
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "the body ran" not in out
    assert "crash enumeration of tree 'agent' (sessions=1, effects=2): 1 of 2 site(s) failed" in out, out
    assert "site 2: agent/ledger @ ledger.settle_received #2  (outcome VIOLATION, killed: agent/ledger)" in out
    assert "settled 'failed' by recovery but the world saw the effect" in out
    assert "reproduce: this plan armed in every worker of a simulated system, then the same workload:" in out
    assert "with Bench(tree, config, base='simple') as bench: bench.run('replay', CrashSite('agent/ledger', " \
           "'ledger.settle_received', 2, shared=True).plan())" in out
    assert os.path.isdir(inner.path)
