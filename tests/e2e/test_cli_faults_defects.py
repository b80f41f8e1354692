"""``ouroactors faults …`` and ``ouroactors chaos`` on bad input, from a user's review: each refused with exit 2, a
message naming what and where, no traceback, nothing started or written."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ouroactors.system.handle import ActorSystem

from .cli_helpers import cli
from .test_cli_enumerate_scenario import _project

REPO = Path(__file__).resolve().parents[2]
AGENT = str(REPO / "supervision_trees" / "agent.toml")
SCENARIO = ("faults", "enumerate-scenario", "app.toml", "myapp:drive", "--check", "myapp:check", "--base", "simple")
CHAOS = ("chaos", "app.toml", "--scenario", "myapp:drive", "--check", "myapp:check", "--base", "simple")


def _refused(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    for needle in needles:
        assert needle in done.stderr, done.stderr


def test_faults_arm_refuses_a_plan_naming_a_pid_and_the_process_lives(tmp_path):
    victim = subprocess.Popen(["sleep", "60"])
    try:
        for pid in (victim.pid, -1, 1):
            (tmp_path / "plan.toml").write_text(f'[[rules]]\npoint = "message.app/store"\naction = "kill"\n'
                                                f'target_pid = {pid}\nnth = 1\n')
            done = cli("faults", "arm", "plan.toml", "--data-dir", str(tmp_path / "d"), cwd=tmp_path)
            _refused(done, "plan.toml: rules[0]: 'target_pid' may not be set by a plan")
        assert victim.poll() is None
        assert not (tmp_path / "d").exists()
    finally:
        victim.kill()
        victim.wait()


def test_a_plan_file_that_is_not_utf8_is_named(tmp_path):
    _project(tmp_path)
    (tmp_path / "latin.toml").write_bytes(b'[[rules]]\npoint = "caf\xe9"\naction = "raise"\n')
    _refused(cli("faults", "arm", "latin.toml", cwd=tmp_path), "latin.toml: not a UTF-8 text file")
    _refused(cli(*CHAOS, "--plan", "latin.toml", cwd=tmp_path), "latin.toml: not a UTF-8 text file")


@pytest.mark.parametrize("args", [
    (*SCENARIO, "--drive-timeout", "nan"), (*CHAOS, "--drive-timeout", "nan"), (*CHAOS, "--drive-timeout", "inf"),
    ("faults", "enumerate", AGENT, "--workload", "ledger", "--base", "simple", "--ask-timeout", "inf"),
    ("faults", "enumerate", AGENT, "--workload", "ledger", "--base", "simple", "--ask-timeout", "nan"),
    ("chaos", AGENT, "--workload", "ledger", "--base", "simple", "--seeds", "1", "--ask-timeout", "inf"),
    ("chaos", AGENT, "--workload", "ledger", "--base", "simple", "--seeds", "1", "--ask-timeout", "1e300"),
])
def test_a_timeout_that_is_not_a_finite_number_of_seconds_is_refused(tmp_path, args):
    _project(tmp_path)
    option = args[-2]
    _refused(cli(*args, cwd=tmp_path), option)


def test_a_run_that_crashes_nowhere_fails_naming_the_points(tmp_path):
    _project(tmp_path)
    done = cli(*SCENARIO, "--points", "nomatch.*", cwd=tmp_path, timeout=120)
    _refused(done, "no crash site selected: --points 'nomatch.*' matches none of the 4 site(s)",
             "myapp.half_written")
    listed = cli(*SCENARIO, "--points", "nomatch.*", "--list", cwd=tmp_path, timeout=120)
    _refused(listed, "no crash site selected: --points 'nomatch.*'")
    workload = cli("faults", "enumerate", AGENT, "--workload", "ledger", "--base", "simple", "--sessions", "1",
                   "--effects", "1", "--points", "nomatch.*", cwd=tmp_path, timeout=300)
    _refused(workload, "no crash site selected: --points 'nomatch.*' matches none of the")


def test_chaos_warns_about_a_misspelt_point_in_its_plan(tmp_path):
    _project(tmp_path)
    (tmp_path / "plan.toml").write_text('[[rules]]\npoint = "myapp.half_writen"\naction = "kill"\nnth = 1\n')
    done = cli(*CHAOS, "--plan", "plan.toml", cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning: rules[0]: point 'myapp.half_writen' matches no registered point (did you mean " \
           "'myapp.half_written'?)" in done.stderr, done.stderr


def test_a_data_dir_that_is_not_empty_is_refused_so_no_run_sees_anothers_data(tmp_path):
    _project(tmp_path)
    runs = tmp_path / "runs"
    first = cli(*SCENARIO, "--data-dir", str(runs), cwd=tmp_path, timeout=120)
    assert first.returncode == 1, first.stdout + first.stderr  # the torn write
    kept = sorted(p.name for p in runs.iterdir())
    for args in (SCENARIO, (*CHAOS, "--seeds", "2"),
                 ("faults", "enumerate", AGENT, "--workload", "ledger", "--base", "simple")):
        _refused(cli(*args, "--data-dir", str(runs), cwd=tmp_path, timeout=120), f"--data-dir {runs}: not empty")
    assert sorted(p.name for p in runs.iterdir()) == kept


def test_a_live_systems_data_dir_is_refused(tmp_path):
    _project(tmp_path)
    live = tmp_path / "live"
    system = ActorSystem.start("simple", live)
    try:
        before = sorted(p.name for p in live.iterdir())
        for where in (live, live / "below"):
            for args in (SCENARIO, (*CHAOS, "--seeds", "2")):
                _refused(cli(*args, "--data-dir", str(where), cwd=tmp_path, timeout=120),
                         f"--data-dir {where}: ", "the data dir of a live system")
        assert sorted(p.name for p in live.iterdir()) == before
    finally:
        system.shutdown()
