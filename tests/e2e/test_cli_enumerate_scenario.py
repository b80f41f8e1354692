"""``ouroactors faults enumerate-scenario``: a user's project (its tree, its drive and check functions) crash-
enumerated from the command line, as the README shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .cli_helpers import cli

pytestmark = pytest.mark.multiproc

MYAPP = '''
import json, os
from ouroactors import Worker, faults

class Store(Worker):
    def on_start(self, path):
        self.file = os.path.join(self.context.data_dir, path)
        try:
            with open(self.file) as f:
                self.data = json.load(f)
        except (FileNotFoundError, json.JSONDecodeError):
            self.data = {}

    def on_message(self, message, sender):
        if message[0] == "put":
            self.data[message[1]] = message[2]
            text = json.dumps(self.data)
            with open(self.file, "w") as f:  # in place, in two writes: a crash between them tears the file
                f.write(text[: len(text) // 2])
                f.flush()
                faults.point("myapp.half_written")
                f.write(text[len(text) // 2:])
            return "ok"
        return sorted(self.data)

ACKED = []

def drive(system):  # a client that goes on after a failed put (a request to a killed store fails)
    ACKED.clear()
    for i in range(2):
        try:
            if system.ask("app/store", ("put", f"k{i}", i), timeout=5) == "ok":
                ACKED.append(f"k{i}")
        except Exception:
            pass

def check(system):
    keys = system.ask("app/store", ("keys",), timeout=5)
    return [f"{k} was acknowledged, then lost" for k in ACKED if k not in keys]
'''

TREE = '[tree]\nid = "app"\n\n[[tree.children]]\nid = "store"\nactor = "myapp:Store"\nkwargs = { path = "s.json" }\n'


def _project(tmp_path: Path) -> Path:
    (tmp_path / "myapp.py").write_text(MYAPP)
    (tmp_path / "app.toml").write_text(TREE)
    return tmp_path


def test_it_finds_the_torn_write_and_exits_1(tmp_path):
    done = cli("faults", "enumerate-scenario", "app.toml", "myapp:drive", "--check", "myapp:check",
               cwd=_project(tmp_path), timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[:4] == ["  1  app/store @ message.app/store #1  ok", "  2  app/store @ myapp.half_written #1  ok",
                         "  3  app/store @ message.app/store #2  ok",
                         "  4  app/store @ myapp.half_written #2  VIOLATION"], done.stdout
    assert lines[4].strip() == "k0 was acknowledged, then lost"
    assert "4 site(s) in" in done.stdout and "'VIOLATION': 1" in done.stdout


def test_json_points_and_the_simulated_base(tmp_path):
    done = cli("faults", "enumerate-scenario", "app.toml", "myapp:drive", "--check", "myapp:check", "--json",
               "--points", "myapp.*", "--base", "simple", cwd=_project(tmp_path), timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    *rows, summary = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["point"], r["hit"], r["outcome"]) for r in rows] == [
        ("myapp.half_written", 1, "ok"), ("myapp.half_written", 2, "VIOLATION")]
    assert summary["summary"]["sites"] == 2


def test_bad_input_is_named_before_anything_runs(tmp_path):
    _project(tmp_path)
    missing = cli("faults", "enumerate-scenario", "app.toml", "nomodule:drive", cwd=tmp_path)
    assert missing.returncode == 2 and "DRIVE" in missing.stderr and "does not import" in missing.stderr
    shape = cli("faults", "enumerate-scenario", "app.toml", "myapp.drive", cwd=tmp_path)
    assert shape.returncode == 2 and "must look like 'module:function'" in shape.stderr, shape.stderr
    absent = cli("faults", "enumerate-scenario", "app.toml", "myapp:drive", "--check", "myapp:chek", cwd=tmp_path)
    assert absent.returncode == 2 and "has no attribute 'chek'" in absent.stderr, absent.stderr
    tree = cli("faults", "enumerate-scenario", "nope.toml", "myapp:drive", cwd=tmp_path)
    assert tree.returncode == 2 and "nope.toml" in tree.stderr, tree.stderr


def test_chaos_on_the_scenario_prints_each_failing_seed_with_its_replay(tmp_path):
    _project(tmp_path)
    done = cli("chaos", "app.toml", "--scenario", "myapp:drive", "--check", "myapp:check", "--seeds", "60",
               "--base", "simple", cwd=tmp_path, timeout=120)  # (a kill mid-write of the 2nd put, first: ~1 in 10)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "60 seed(s) on simple in" in done.stdout and "'VIOLATION'" in done.stdout
    [replay, *_] = [line.split("replay: ", 1)[1] for line in done.stdout.splitlines() if "replay: " in line]
    seed = replay.split("--seed ")[1].split()[0]
    assert replay == f"ouroactors chaos app.toml --scenario myapp:drive --check myapp:check --seed {seed} --base simple"
    again = cli(*replay.split()[1:], cwd=tmp_path, timeout=120)  # the line as printed runs that seed again
    assert again.returncode == 1 and f"seed {seed}: VIOLATION" in again.stdout, again.stdout + again.stderr
    assert "1 seed(s) on simple" in again.stdout


def test_chaos_refuses_a_scenario_mixed_with_a_workload(tmp_path):
    _project(tmp_path)
    mixed = cli("chaos", "app.toml", "--scenario", "myapp:drive", "--workload", "ledger", cwd=tmp_path)
    assert mixed.returncode == 2 and "cannot be combined with --workload" in mixed.stderr, mixed.stderr
    alone = cli("chaos", "app.toml", "--check", "myapp:check", cwd=tmp_path)
    assert alone.returncode == 2 and "--check needs --scenario" in alone.stderr, alone.stderr
    neither = cli("chaos", "app.toml", cwd=tmp_path)
    assert neither.returncode == 2 and "--workload: required" in neither.stderr, neither.stderr


def test_list_records_the_sites_and_crashes_none(tmp_path):
    done = cli("faults", "enumerate-scenario", "app.toml", "myapp:drive", "--list", "--points", "myapp.*",
               cwd=_project(tmp_path), timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["  1  app/store @ myapp.half_written #1",
                                        "  2  app/store @ myapp.half_written #2",
                                        "2 site(s) of 4 point hit(s) recorded"], done.stdout


def test_chaos_runs_a_plan_file_of_ones_own_once(tmp_path):
    _project(tmp_path)
    (tmp_path / "torn.toml").write_text('[[rules]]\npoint = "myapp.half_written"\naction = "kill"\nnth = 2\n')
    done = cli("chaos", "app.toml", "--scenario", "myapp:drive", "--check", "myapp:check", "--plan", "torn.toml",
               "--base", "simple", cwd=tmp_path, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "plan torn.toml: VIOLATION" in done.stdout and "k0 was acknowledged, then lost" in done.stdout
    assert "fired: kill at myapp.half_written (app/store)" in done.stdout
    assert ("replay: ouroactors chaos app.toml --scenario myapp:drive --check myapp:check --plan torn.toml "
            "--base simple") in done.stdout
    mixed = cli("chaos", "app.toml", "--scenario", "myapp:drive", "--plan", "torn.toml", "--seeds", "3", cwd=tmp_path)
    assert mixed.returncode == 2 and "--plan runs one plan file" in mixed.stderr, mixed.stderr


STUCK = '''
def drive(system):  # waits for a key nobody puts
    while "never" not in system.ask("app/store", ("keys",), timeout=5):
        system.run_for(0.05)
'''


def test_a_drive_that_never_returns_is_stopped_at_drive_timeout(tmp_path):
    _project(tmp_path)
    (tmp_path / "stuck.py").write_text("from myapp import *\n" + STUCK)
    done = cli("faults", "enumerate-scenario", "app.toml", "stuck:drive", "--drive-timeout", "1", cwd=tmp_path,
               timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the crash-free run: drive did not return within 1s (drive_timeout)" in done.stderr, done.stderr
    chaos = cli("chaos", "app.toml", "--scenario", "stuck:drive", "--drive-timeout", "1", "--base", "simple",
                cwd=tmp_path, timeout=120)
    assert chaos.returncode == 1 and "drive did not return within 1s" in chaos.stderr, chaos.stdout + chaos.stderr
    for bad in ("0", "-2", "inf", "soon"):
        refused = cli("faults", "enumerate-scenario", "app.toml", "stuck:drive", "--drive-timeout", bad, cwd=tmp_path)
        assert refused.returncode == 2 and "--drive-timeout" in refused.stderr, (bad, refused.stderr)
    workload = cli("chaos", "app.toml", "--workload", "ledger", "--drive-timeout", "5", cwd=tmp_path)
    assert workload.returncode == 2 and "--drive-timeout bounds your own scenario" in workload.stderr, workload.stderr
