"""``ouroactors faults enumerate`` as a user runs it: a real subprocess on the simulated base, each
site with its outcome and its plan, the exit code, JSON, bad input, and a printed replay that replays."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "ouroactors.cli"]
ENV = {**os.environ, "COLUMNS": "200", "PYTHONPATH": str(ROOT)}

TREE = """
[system]
base = "simple"

[tree]
id = "agent"
strategy = "rest_for_one"
intensity = 50
period = 5

[[tree.children]]
id = "storage"
actor = "ouroactors.authorities.storage.actor:Storage"

[[tree.children]]
id = "ledger"
actor = "{ledger}"

[[tree.children]]
id = "workspace"
actor = "ouroactors.authorities.workspace.actor:Workspace"
kwargs = {{ heartbeat_s = 60.0, owner_lost_after_s = 120.0 }}
"""
REAL = "ouroactors.authorities.ledger.actor:Ledger"
PLANTED = "tests.faults.planted_restart:PresumesFailed"


def run(*args: str, cwd: Path = ROOT, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=ENV)


def tree_file(tmp_path: Path, ledger: str) -> str:
    path = tmp_path / "tree.toml"
    path.write_text(TREE.format(ledger=ledger))
    return str(path)


@pytest.mark.slow
def test_each_site_its_outcome_and_its_plan_and_a_violation_exits_1(tmp_path):
    tree = tree_file(tmp_path, PLANTED)
    done = run("faults", "enumerate", tree, "--workload", "sessions", "--points", "ledger.settle_received",
               "--sessions", "1")
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1].startswith("4 site(s) on simple in ") and "VIOLATION 2, ok 2" in lines[-1], done.stdout
    sites = [line for line in lines if line.lstrip()[:1].isdigit() and " @ " in line]
    assert [line.split()[0] for line in sites] == ["1", "2", "3", "4"]
    assert "  2  agent/ledger @ ledger.settle_received #2  VIOLATION  (killed: agent/ledger;" in done.stdout
    assert "settled 'failed' by recovery but the world saw the effect 1 time(s)" in done.stdout
    plans = [line for line in lines if line.strip().startswith("plan: ")]
    assert len(plans) == 4  # every site, ok or not, with the plan that reproduces it
    assert 'plan: point = "ledger.settle_received"; action = "kill"; nth = 2  reproduce: ouroactors chaos ' \
           f"{tree} --workload sessions --plan PLAN.toml --base simple --ask-timeout 0.5 --sessions 1" in done.stdout

    # The printed reproduction replays the violation: the plan saved as PLAN.toml, the command as printed.
    (tmp_path / "PLAN.toml").write_text('[[rules]]\npoint = "ledger.settle_received"\naction = "kill"\nnth = 2\n')
    command = plans[1].split("reproduce: ", 1)[1]
    replay = subprocess.run([*CLI, *shlex.split(command)[1:]], cwd=tmp_path, capture_output=True, text=True,
                            timeout=180, env=ENV)
    assert replay.returncode == 1, replay.stdout + replay.stderr
    assert "settled 'failed' by recovery but the world saw the effect 1 time(s)" in replay.stdout


def test_json_and_the_real_ledger_exits_0(tmp_path):
    done = run("faults", "enumerate", tree_file(tmp_path, REAL), "--workload", "ledger", "--points", "ledger.*",
               "--sessions", "1", "--effects", "1", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    objects = [json.loads(line) for line in done.stdout.splitlines()]
    rows, summary = objects[:-1], objects[-1]["summary"]
    assert rows and summary["sites"] == len(rows) and summary["outcomes"] == {"ok": len(rows)}
    assert summary["base"] == "simple"
    assert all(row["killed"] == [row["actor"]] and row["plan"].startswith("[[rules]]\n") for row in rows)
    assert {row["point"] for row in rows} <= {"ledger.start_committed", "ledger.settle_received",
                                              "ledger.settle_committed"}


@pytest.mark.slow
def test_plans_dir_writes_each_sites_plan_and_the_command_names_it(tmp_path):
    plans = tmp_path / "plans"
    done = run("faults", "enumerate", tree_file(tmp_path, PLANTED), "--workload", "sessions", "--points",
               "ledger.settle_received", "--sessions", "1", "--json", "--plans-dir", str(plans))
    assert done.returncode == 1, done.stdout + done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()][:-1]
    assert sorted(p.name for p in plans.iterdir()) == [f"site-{row['#']}.toml" for row in rows]
    for row in rows:
        assert Path(row["plan_file"]).read_text() == row["plan"]
        assert f"--plan {row['plan_file']} " in row["reproduce"] and "PLAN.toml" not in row["reproduce"]
    # the violating site's command, as printed, replays it from any directory: nothing to save by hand
    violating = next(row for row in rows if row["outcome"] == "VIOLATION")
    replay = subprocess.run([*CLI, *shlex.split(violating["reproduce"])[1:]], cwd=ROOT, capture_output=True,
                            text=True, timeout=180, env=ENV)
    assert replay.returncode == 1, replay.stdout + replay.stderr


def test_bad_input_exits_2_naming_it_and_starts_nothing(tmp_path):
    tree = tree_file(tmp_path, REAL)
    done = run("faults", "enumerate", tree, "--workload", "sesions")
    assert done.returncode == 2 and "--workload: unknown workload 'sesions'; known workloads: sessions, ledger" \
        in done.stderr
    done = run("faults", "enumerate", tree, "--workload", "ledger", "--max-sites", "0")
    assert done.returncode == 2 and "--max-sites: must be at least 1, got 0" in done.stderr
    done = run("faults", "enumerate", str(tmp_path / "missing.toml"), "--workload", "ledger")
    assert done.returncode == 2 and "missing.toml" in done.stderr
    done = run("faults", "enumerate", tree, "--workload", "ledger", "--base", "tcp")
    assert done.returncode == 2 and "'tcp' is not one of 'multiproc', 'simple'" in done.stderr
