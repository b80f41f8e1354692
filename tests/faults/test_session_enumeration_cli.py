"""``ouroactors faults enumerate-sessions`` as a user runs it: a real subprocess, one JSON row per site, a
summary, the exit code; bad input refused before any system starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "ouroactors.cli", "faults", "enumerate-sessions"]
ENV = {**os.environ, "COLUMNS": "200", "PYTHONPATH": str(ROOT)}


def test_a_bad_sample_size_is_refused_naming_the_option(tmp_path):
    done = subprocess.run([*CLI, "--sample", "0", "--data-dir", str(tmp_path)], capture_output=True, text=True,
                          env=ENV, timeout=120)
    assert done.returncode == 2 and "--sample: must be >= 1" in done.stderr
    assert list(tmp_path.iterdir()) == []  # nothing started, nothing written


@pytest.mark.parametrize("count", ["-1", "9", "one"])
def test_a_bad_spare_count_is_refused_naming_the_option(tmp_path, count):
    done = subprocess.run([*CLI, "--spare-runtimes", count, "--data-dir", str(tmp_path)], capture_output=True,
                          text=True, env=ENV, timeout=120)
    assert done.returncode == 2 and "--spare-runtimes" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_action_is_refused_naming_the_choices(tmp_path):
    done = subprocess.run([*CLI, "--action", "drop", "--data-dir", str(tmp_path)], capture_output=True, text=True,
                          env=ENV, timeout=120)
    assert done.returncode == 2 and "--action" in done.stderr and "commit_unknown" in done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.multiproc
@pytest.mark.slow
def test_one_site_as_json_rows_then_a_summary_and_exit_zero(tmp_path):
    done = subprocess.run([*CLI, "--only", "coordinator.claimed", "--max-sites", "1", "--json",
                           "--data-dir", str(tmp_path)], capture_output=True, text=True, env=ENV, timeout=300)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0, done.stdout + done.stderr
    rows, summary = lines[:-1], lines[-1]["summary"]
    assert [(r["point"], r["hit"], r["outcome"]) for r in rows] == [("coordinator.claimed", 1, "ok")]
    assert summary["sites"] == 1 and summary["violations"] == 0 and summary["reference"] == "completed"
    assert summary["spare_runtimes"] == 1  # the tree file's: the scenario runs what a user runs
