"""The plugin's ``crash_enumeration`` marker, run the way a user runs it: an inner pytest session
(a subprocess: the actor systems fork) on a small scenario, a few sites each."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.inner_pytest import UNRELATED_PLUGINS

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.multiproc

PROJECT = Path(__file__).resolve().parents[2]  # so the inner session imports tests.faults.planted

TREE_TOML = """
[tree]
id = "app"
strategy = "rest_for_one"
intensity = 100
period = 5

[[tree.children]]
id = "storage"
actor = "ouroactors.authorities.storage.actor:Storage"

[[tree.children]]
id = "ledger"
actor = "ouroactors.authorities.ledger.actor:Ledger"
"""

REAL = """
import pytest

SMALL = {"sessions": 1, "effects": 1}

@pytest.mark.crash_enumeration(config=SMALL, points=["storage.after_commit"], max_sites=2)
def test_every_site_keeps_the_invariants(crash_report):
    assert [row.outcome for row in crash_report.rows] == ["ok", "ok"]
    assert all(row.killed == [row.site.path] for row in crash_report.rows)  # a real SIGKILL, there

@pytest.mark.crash_enumeration("app.toml", config=SMALL, points="message.*/ledger", max_sites=1)
def test_a_tree_file_and_no_report_asked_for():
    pass

def test_the_report_needs_the_marker(crash_report):
    pass
"""

PLANTED = """
import pytest

from ouroactors.faults.runner import workload_tree
from tests.faults.planted import PLANTED_LEDGER

BUGGY = workload_tree(ledger=PLANTED_LEDGER, heartbeat_s=60.0, owner_lost_after_s=120.0)

@pytest.mark.crash_enumeration(BUGGY, config={"sessions": 1, "effects": 1},
                               points=["planted.ledger.answered"], max_sites=1)
def test_the_planted_ledger(crash_report):
    raise AssertionError("the body ran")  # the verdict comes first: it must not

@pytest.mark.crash_enumeration(config={"sessions": 1, "effects": 1}, points=["no.such.point"])
def test_a_point_the_scenario_never_reaches():
    pass
"""

BAD = """
import pytest

from ouroactors import supervisor, worker

@pytest.mark.crash_enumeration(pionts=["storage.*"])
def test_misspelt(): pass

@pytest.mark.crash_enumeration(max_sites="2")
def test_wrong_type(): pass

@pytest.mark.crash_enumeration(config={"session": 1})
def test_unknown_config_field(): pass

@pytest.mark.crash_enumeration(tree="missing.toml")
def test_missing_tree_file(): pass

@pytest.mark.crash_enumeration(tree=supervisor("x", [worker("w", "ouroactors.faults.workload:SessionOwner")]))
def test_no_ledger(): pass

@pytest.mark.crash_enumeration(base="multiprocess")
def test_unknown_base(): pass
"""


def processes_under(directory: Path) -> list[int]:
    """Live processes (not this one) whose working directory is ``directory`` or below: the inner
    session's actor systems and world services inherit its cwd, the pytester directory."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
        except OSError:  # gone, a zombie, or not ours to read
            continue
        if cwd == directory or directory in cwd.parents:
            found.append(int(entry.name))
    return found


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.Pytester]:
    """A pytester directory with the tree file; after the test, nothing the inner session started
    may still run (its own fixtures already waited for every system and world to go)."""
    monkeypatch.setenv("PYTHONPATH", str(PROJECT))
    pytester.makefile(".toml", app=TREE_TOML)
    yield pytester
    assert processes_under(pytester.path) == []


@pytest.mark.slow
def test_passes_on_the_real_ledger(inner: pytest.Pytester) -> None:
    inner.makepyfile(test_real=REAL)
    result = inner.runpytest_subprocess("-rA", "-p", "no:cacheprovider", *UNRELATED_PLUGINS, timeout=120)
    result.assert_outcomes(passed=2, errors=1)  # the error: the fixture asked for without the marker
    result.stdout.fnmatch_lines([
        "*crash_report fixture needs @pytest.mark.crash_enumeration(...) on the test*",
        "*Captured crash enumeration setup*",
        "2 site(s) in *: {'ok': 2}",
    ])
    result.stdout.re_match_lines([r"\s+1\s+app/ledger\s+message\.app/ledger\s+1\s+ok\s"])


@pytest.mark.slow
def test_fails_naming_the_site_on_the_planted_bug_ledger(inner: pytest.Pytester) -> None:
    inner.makepyfile(test_planted=PLANTED)
    result = inner.runpytest_subprocess("-p", "no:cacheprovider", *UNRELATED_PLUGINS, timeout=120)
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    result.stdout.fnmatch_lines([
        "*no crash site selected (point 'no.such.point' is not reached by this scenario; points it reaches: *"
        "storage.after_commit*",
    ])
    assert "the body ran" not in out
    # The planted ledger answers before it commits. On a slow machine the world can see the effect
    # before the commit even without a crash: the recording run then already violates, and the
    # marker says so instead of crashing anywhere. Either way the bug is caught and named.
    if "the crash-free recording run already violates" in out:
        assert "[effect-without-start] record/s0/e0: the start was recorded" in out, out
        return
    assert "\n".join([
        "crash enumeration of tree 'agent' (sessions=1, effects=1): 1 of 1 site(s) failed",
        "site 1: agent/ledger @ planted.ledger.answered #1  (outcome VIOLATION, killed: agent/ledger)",
        "    [effect-without-start] crash1/s0/k0: the world saw 1 delivery(ies) but the ledger has no committed "
        "start for this idempotency key",
    ]) in out
    assert "\n".join([
        "    reproduce: this plan armed in agent/ledger only, then the same workload:",
        "      [[rules]]",
        '      point = "planted.ledger.answered"',
        '      action = "kill"',
        "      nth = 1",
        "      with Bench(tree, config) as bench: bench.run('replay', CrashSite('agent/ledger', "
        "'planted.ledger.answered', 1).plan(), at=['agent/ledger'])",
        "    data (events.jsonl, LMDB): ",
    ]) in out


@pytest.mark.slow
def test_a_bad_marker_argument_is_a_usage_error_naming_it(inner: pytest.Pytester) -> None:
    inner.makepyfile(test_bad=BAD)
    result = inner.runpytest_subprocess("-p", "no:cacheprovider", *UNRELATED_PLUGINS, timeout=60)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: test_bad.py::test_misspelt: @pytest.mark.crash_enumeration: pionts: unknown argument 'pionts' "
        "(did you mean 'points'?); the arguments are tree, config, points, max_sites, fresh, base, scenario, check, "
        "drive_timeout",
        "test_bad.py::test_wrong_type: @pytest.mark.crash_enumeration: max_sites: must be an int >= 1 or None, "
        "got '2'",
        "test_bad.py::test_unknown_config_field: @pytest.mark.crash_enumeration: config: unknown field 'session' "
        "(did you mean 'sessions'?)*",
        "test_bad.py::test_missing_tree_file: @pytest.mark.crash_enumeration: tree: */missing.toml (relative paths "
        "are from the rootdir): cannot read tree file: No such file or directory*",
        "test_bad.py::test_no_ledger: @pytest.mark.crash_enumeration: tree: tree 'x' has no ledger*"
        "(or scenario=*: a scenario of your own)*",
        "test_bad.py::test_unknown_base: @pytest.mark.crash_enumeration: base: must be one of multiproc, simple, "
        "got 'multiprocess'",
    ])
