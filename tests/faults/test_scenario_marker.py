"""``@pytest.mark.crash_enumeration(tree, scenario=drive, check=check)``: a user's own scenario under crash
enumeration, run the way a user runs it — an inner pytest session (a subprocess: the actor systems fork)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.inner_pytest import UNRELATED_PLUGINS

from .test_enumeration_marker import processes_under

pytest_plugins = ["pytester"]
pytestmark = [pytest.mark.multiproc, pytest.mark.slow]

PROJECT = Path(__file__).resolve().parents[2]  # so the inner session imports tests.faults.scenario_app

TESTS = """
import pytest

from ouroactors import supervisor, worker

def tree(actor):
    return supervisor("app", [worker("store", f"tests.faults.scenario_app:{actor}", kwargs={"path": "s.json"})])

ACKED = []

def drive(system):
    ACKED.clear()
    for i in range(2):
        if system.ask("app/store", ("put", f"k{i}", i), timeout=5) == "ok":
            ACKED.append(f"k{i}")

def check(system):
    keys = system.ask("app/store", "keys", timeout=5)
    assert set(ACKED) <= set(keys), f"acknowledged {ACKED}, kept {keys}"

@pytest.mark.crash_enumeration(tree("Store"), scenario=drive, check=check)
def test_the_atomic_store(crash_report):
    assert [row.outcome for row in crash_report.rows] == ["ok", "ok"]

@pytest.mark.crash_enumeration(tree("TornStore"), scenario=drive, check=check, points=["scenario_app.*"])
def test_the_torn_store():
    raise AssertionError("the body ran")  # the verdict comes first: it must not
"""

BAD = """
import pytest

def drive(system): pass

@pytest.mark.crash_enumeration(scenario=drive)
def test_no_tree(): pass

@pytest.mark.crash_enumeration("app.toml", scenario="drive")
def test_not_callable(): pass

@pytest.mark.crash_enumeration("app.toml", scenario=drive, config={"sessions": 1})
def test_config_with_a_scenario(): pass

@pytest.mark.crash_enumeration("app.toml", check=drive)
def test_check_alone(): pass

@pytest.mark.crash_enumeration("app.toml", scenario=drive, drive_timeout=0)
def test_zero_drive_timeout(): pass

@pytest.mark.crash_enumeration("app.toml", drive_timeout=5)
def test_drive_timeout_for_the_workload(): pass
"""


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.Pytester]:
    monkeypatch.setenv("PYTHONPATH", str(PROJECT))
    pytester.makefile(".toml", app='[tree]\nid = "app"\n\n[[tree.children]]\nid = "store"\n'
                                   'actor = "tests.faults.scenario_app:Store"\nkwargs = { path = "s.json" }\n')
    yield pytester
    assert processes_under(pytester.path) == []


def test_a_scenario_of_ones_own_passes_or_fails_naming_the_site(inner: pytest.Pytester) -> None:
    inner.makepyfile(test_store=TESTS)
    result = inner.runpytest_subprocess("-rA", "-p", "no:cacheprovider", *UNRELATED_PLUGINS, timeout=120)
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "the body ran" not in out
    assert "check failed: acknowledged ['k0'], kept []" in out  # the crash mid-write of k1 lost the acknowledged k0
    result.stdout.fnmatch_lines([
        "*crash enumeration of your scenario on tree 'app' (multiproc): 1 of 2 site(s) failed*",
        "*site 2: app/store @ scenario_app.half_written #2*",
        "*reproduce: this plan armed in app/store, then the scenario:*",
        "*point = \"scenario_app.half_written\"*",
    ])


def test_bad_scenario_arguments_are_usage_errors(inner: pytest.Pytester) -> None:
    inner.makepyfile(test_bad=BAD)
    result = inner.runpytest_subprocess("-p", "no:cacheprovider", *UNRELATED_PLUGINS, timeout=60)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "test_no_tree: @pytest.mark.crash_enumeration: tree: a scenario of your own needs its tree" in err, err
    assert "test_not_callable: @pytest.mark.crash_enumeration: scenario: must be a callable" in err
    assert "test_config_with_a_scenario: @pytest.mark.crash_enumeration: config: does not apply" in err
    assert "test_check_alone: @pytest.mark.crash_enumeration: check: needs scenario=" in err
    assert ("test_zero_drive_timeout: @pytest.mark.crash_enumeration: drive_timeout: must be a number of seconds > 0, "
            "got 0") in err, err
    assert ("test_drive_timeout_for_the_workload: @pytest.mark.crash_enumeration: drive_timeout: bounds a "
            "scenario") in err
