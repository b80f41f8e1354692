"""Crash enumeration of a user's own scenario on a user's own tree (:mod:`ouroactors.faults.scenario`).

A store that writes its file atomically keeps every acknowledged key through a SIGKILL at any message it handles;
one that writes in place is caught at the one site where its write is torn, with the invariant that broke.
"""

from __future__ import annotations

import contextlib

import pytest

from ouroactors import supervisor, worker
from ouroactors.faults.enumerate import CrashSite
from ouroactors.faults.scenario import aimed_plan, enumerate_scenario

pytestmark = pytest.mark.multiproc


def _tree(tmp_path, actor="Store"):  # the store's file in each run's data dir: every site starts empty
    return supervisor("app", [worker("store", f"tests.faults.scenario_app:{actor}",
                                     kwargs={"path": "store.json"})], intensity=5)


class Scenario:
    """Puts three keys; remembers which were acknowledged (a request to a killed actor may fail)."""

    def __init__(self):
        self.acked: list[str] = []

    def drive(self, system):
        self.acked = []
        for i in range(3):
            if system.ask("app/store", ("put", f"k{i}", i), timeout=5) == "ok":
                self.acked.append(f"k{i}")

    def check(self, system):
        keys = system.ask("app/store", "keys", timeout=5)
        for key in self.acked:
            if key not in keys:
                yield f"{key} was acknowledged and is gone after the restart (keys now: {keys})"


def test_an_atomic_store_keeps_every_acknowledged_key_at_every_site(tmp_path):
    scenario = Scenario()
    report = enumerate_scenario(_tree(tmp_path), scenario.drive, scenario.check, data_dir=tmp_path / "runs")
    assert report.baseline.outcome == "ok" and report.baseline.violations == []
    # the sites: the message point before each of the three puts the store handles (the recording's asks only)
    assert [(s.path, s.point, s.nth) for s in report.sites] == [
        ("app/store", "message.app/store", n) for n in (1, 2, 3)]
    assert [row.outcome for row in report.rows] == ["ok", "ok", "ok"], report.table()
    for row in report.rows:
        assert row.fired and ("app/store", "killed") in row.exits
        assert row.drive_error is not None  # the put the kill interrupted failed: kept, not a violation
    assert report.summary() == {"ok": 3}


def test_a_torn_write_is_caught_at_its_site_with_the_broken_invariant(tmp_path):
    scenario = Scenario()
    report = enumerate_scenario(_tree(tmp_path, "TornStore"), scenario.drive, scenario.check,
                                points=["scenario_app.*"])
    assert [(s.path, s.point, s.nth) for s in report.sites] == [
        ("app/store", "scenario_app.half_written", n) for n in (1, 2, 3)]
    by_hit = {row.site.nth: row for row in report.rows}
    # a crash mid-write of the 2nd put: the file holds half a document, the restarted store starts empty and the
    # acknowledged k0 is gone
    assert by_hit[2].outcome == "VIOLATION", report.table()
    assert any("k0 was acknowledged and is gone" in v for v in by_hit[2].violations), by_hit[2].violations
    assert by_hit[1].outcome == "ok"  # nothing was acknowledged before the first put's torn write
    assert not (tmp_path / "runs").exists()  # the temp data dirs are removed after


def test_a_check_that_asserts_and_a_tree_that_ends_are_violations(tmp_path):
    def drive(system):
        system.ask("app/store", ("put", "a", 1), timeout=5)

    def check(system):
        assert system.ask("app/store", ("get", "a"), timeout=5) == 2, "a is not 2"

    report = enumerate_scenario(_tree(tmp_path), drive, check)
    assert report.baseline.outcome == "VIOLATION" and report.rows == []  # the crash-free run already violates
    [violation] = report.baseline.violations
    assert violation.startswith("check failed: a is not 2"), violation  # (pytest adds what it compared)

    flaky = supervisor("app", [worker("store", "tests.faults.scenario_app:Store",
                                      kwargs={"path": str(tmp_path / "s.json")})], intensity=0)
    ended = enumerate_scenario(flaky, drive, None, points=["message.*"])  # no restart allowed: the tree ends
    [row] = ended.rows
    assert row.outcome == "VIOLATION" and "the tree ended after the crash" in row.violations[0], row


def test_the_simulated_base_enumerates_the_same_sites_without_processes(tmp_path):
    scenario = Scenario()
    report = enumerate_scenario(_tree(tmp_path, "TornStore"), scenario.drive, scenario.check, base="simple",
                                points=["scenario_app.*"])
    assert [row.site.shared for row in report.rows] == [True, True, True]
    assert [row.outcome for row in report.rows] == ["ok", "VIOLATION", "VIOLATION"], report.table()


def test_a_dynamic_child_is_aimed_at_through_its_supervisor_for_its_fork():
    at, plan = aimed_plan(CrashSite("app/pool/w#3", "message.app/pool/w#3", 2))
    assert at == "app/pool" and plan.forks == 1 and plan.skip_forks == 2
    assert aimed_plan(CrashSite("app/store", "x", 1)) == ("app/store", CrashSite("app/store", "x", 1).plan())
    at, _ = aimed_plan(CrashSite("app/store", "x", 1, shared=True))
    assert at is None


def test_bad_arguments_are_refused_before_anything_starts(tmp_path):
    with pytest.raises(ValueError, match="base: must be one of"):
        enumerate_scenario(_tree(tmp_path), print, base="thread")
    with pytest.raises(TypeError, match="drive and check must be callables"):
        enumerate_scenario(_tree(tmp_path), "drive")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="limit"):
        enumerate_scenario(_tree(tmp_path), print, limit=0)
    with pytest.raises(ValueError, match="must be a supervisor"):
        enumerate_scenario(worker("w", "tests.faults.scenario_app:Store"), print)


def test_dynamic_children_are_crashed_at_each_of_their_sites(tmp_path):
    tree = supervisor("app", [supervisor("pool", [worker("counter", "ouroactors.examples.workers:Counter",
                                                         restart="permanent")], strategy="simple_one_for_one")])

    def drive(system):
        first, second = system.start_child("app/pool", ()), system.start_child("app/pool", ())
        system.ask(f"app/pool/{first.id}", "incr", timeout=5)
        system.ask(f"app/pool/{second.id}", "incr", timeout=5)

    def check(system):
        assert len(system.which_children("app/pool")) == 2

    report = enumerate_scenario(tree, drive, check)
    assert [(str(row.site), row.outcome) for row in report.rows] == [
        ("app/pool/counter#1 @ message.app/pool/counter#1 #1", "ok"),
        ("app/pool/counter#2 @ message.app/pool/counter#2 #1", "ok")], report.table()
    for row in report.rows:  # the k-th fork of the pool, and no other, was killed (then restarted: permanent)
        assert row.fired and row.exits == [(row.site.path, "killed")], row.exits


def test_a_tree_files_own_base_is_the_default(tmp_path):
    (tmp_path / "app.toml").write_text('[system]\nbase = "simple"\n\n[tree]\nid = "app"\n\n[[tree.children]]\n'
                                       'id = "store"\nactor = "tests.faults.scenario_app:Store"\n'
                                       'kwargs = { path = "s.json" }\n')
    scenario = Scenario()
    report = enumerate_scenario(tmp_path / "app.toml", scenario.drive, scenario.check, points=["message.*"])
    assert report.base == "simple" and all(row.site.shared for row in report.rows) and report.rows
    assert enumerate_scenario(tmp_path / "app.toml", scenario.drive, scenario.check, points=["message.*"],
                              base="multiproc").base == "multiproc"


def test_a_report_prints_as_a_table_with_each_violation_under_its_site(tmp_path):
    scenario = Scenario()
    report = enumerate_scenario(_tree(tmp_path, "TornStore"), scenario.drive, scenario.check, base="simple",
                                points=["scenario_app.*"])
    lines = str(report).splitlines()
    assert lines[0].startswith("3 site(s) of tree 'app' on simple in ") and "'VIOLATION': 2" in lines[0]
    assert lines[1].split()[:5] == ["1", "app/store", "@", "scenario_app.half_written", "#1"]
    assert "ok" in lines[1] and "VIOLATION" in lines[2]
    assert lines[3].strip().startswith("k0 was acknowledged and is gone after the restart (keys now: ")


def _drive_threads():
    import threading

    return [t for t in threading.enumerate() if t.name == "scenario-drive"]


@pytest.mark.parametrize("base", ["multiproc", "simple"])
def test_a_drive_that_never_returns_is_a_violation_at_its_deadline_and_stopped(tmp_path, base):
    from tests.actor.helpers import wait_until

    def drive(system):
        system.ask("app/store", ("put", "k0", 0), timeout=5)
        while True:  # waits for a state that never comes
            system.run_for(0.05)

    report = enumerate_scenario(_tree(tmp_path), drive, base=base, drive_timeout=1.5)
    assert report.baseline.outcome == "VIOLATION" and report.rows == []
    assert "drive did not return within 1.5s (drive_timeout)" in report.baseline.violations[0]
    # shut down under it: its next run_for raised, and the thread ended
    wait_until(lambda: not _drive_threads(), what="the stuck drive's thread to end")


def test_a_drive_stuck_by_one_crash_is_that_sites_violation_only(tmp_path):
    def drive(system):  # puts k0 once, then waits until the store holds it: a put the kill lost never arrives
        with contextlib.suppress(Exception):  # the put the kill interrupts fails
            system.ask("app/store", ("put", "k0", 0), timeout=5)
        while "k0" not in system.ask("app/store", "keys", timeout=5):
            system.run_for(0.05)

    report = enumerate_scenario(_tree(tmp_path), drive, drive_timeout=3.0)
    assert report.baseline.outcome == "ok", report.baseline.violations
    outcomes = {(row.site.point, row.site.nth): row for row in report.rows}
    stuck = outcomes[("message.app/store", 1)]  # killed at the put: k0 never arrives
    assert stuck.outcome == "VIOLATION" and "drive did not return within 3s" in stuck.violations[0]
    assert all(row.outcome == "ok" for key, row in outcomes.items() if key != ("message.app/store", 1)), \
        report.table()


@pytest.mark.parametrize("bad", [0, -1, "5", True, float("inf"), None])
def test_a_bad_drive_timeout_is_refused_naming_it(tmp_path, bad):
    with pytest.raises(ValueError, match=r"drive_timeout: must be a number of seconds > 0, got"):
        enumerate_scenario(_tree(tmp_path), lambda system: None, drive_timeout=bad)
