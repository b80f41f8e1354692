"""``ouroactors chaos`` as a user runs it: a real subprocess, its output, exit code and leftovers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ouroactors.core.faults import load_plan

ROOT = Path(__file__).resolve().parents[2]
# The lead wires the command into ``ouroactors.cli``; importing the module registers it either way.
CLI = [sys.executable, "-c", "from ouroactors.cli import main; import ouroactors.cli.chaos; main()"]
ENV = {**os.environ, "COLUMNS": "200"}

TREE = """
[system]
base = "multiproc"

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
"""


def chaos(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "chaos", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env=ENV)


def tree_file(tmp_path: Path, ledger: str = "ouroactors.authorities.ledger.actor:Ledger") -> str:
    path = tmp_path / "tree.toml"
    path.write_text(TREE.format(ledger=ledger))
    return str(path)


def plan_block(out: str, seed: int) -> str:
    """The plan a violation printed: from its ``# chaos seed`` line to the ``replay:`` line."""
    lines = out.splitlines()
    first = lines.index(f"# chaos seed {seed}")
    last = next(i for i in range(first, len(lines)) if lines[i].startswith("replay:"))
    return "\n".join(lines[first:last]).strip() + "\n"


def leftovers(marker: str) -> list[int]:
    """Processes whose command line names ``marker`` (the CLI forks its actors: they carry it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.multiproc
def test_a_small_campaign_prints_a_summary_and_leaves_nothing(tmp_path):
    tree = tree_file(tmp_path)
    done = chaos(tree, "--workload", "sessions", "--seeds", "4")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "schedules (seeds) run" in done.stdout and "schedules per minute" in done.stdout
    assert "no violation in 4 schedule(s)" in done.stdout
    assert leftovers(tree) == []


@pytest.mark.slow
def test_a_simulated_campaign_replays_its_event_log_byte_for_byte_from_another_process(tmp_path):
    """Two separate CLI runs (two processes, two pids) of the same seeds on the simple base."""
    tree = tree_file(tmp_path)
    logs = []
    for run in ("one", "two"):
        data = tmp_path / run
        done = chaos(tree, "--workload", "sessions", "--seeds", "12", "--base", "simple", "--data-dir", str(data))
        assert done.returncode == 0, done.stdout + done.stderr
        assert "no violation in 12 schedule(s)" in done.stdout
        assert "Traceback" not in done.stderr  # crash reports go to the data dir's actors.log
        logs.append((data / "system" / "events.jsonl").read_bytes())
    assert logs[0] == logs[1] and b'"kind":"fault_fired"' in logs[0]


@pytest.mark.slow
@pytest.mark.multiproc
def test_the_planted_bug_is_reported_with_seed_plan_and_replay(tmp_path):
    tree = tree_file(tmp_path, "tests.faults.planted:AnswersBeforeCommit")
    done = chaos(tree, "--workload", "sessions", "--seeds", "12")
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    lines = [line for line in out.splitlines() if "[effect-without-start]" in line and "no committed start" in line]
    assert lines, out
    seed = int(lines[0].split(":")[0].removeprefix("seed "))
    replay = f"ouroactors chaos {tree} --workload sessions --seed {seed}"
    plan_text = plan_block(out, seed)
    assert plan_text.startswith(f"# chaos seed {seed}\n# replay: {replay}\n[[rules]]\n")
    assert f"replay: {replay}" in out and "broke an invariant" in out
    plan = tmp_path / "plan.toml"
    plan.write_text(plan_text)
    assert load_plan(plan).rules  # the printed plan is a plan file (``ouroactors faults arm`` takes it)

    again = chaos(tree, "--workload", "sessions", "--seed", str(seed))  # the seed replays it
    assert again.returncode == 1, again.stdout + again.stderr
    assert f"seed {seed}: [effect-without-start]" in again.stdout and "no committed start" in again.stdout
    assert plan_block(again.stdout, seed) == plan_text  # the same plan
    assert leftovers(tree) == []


@pytest.mark.parametrize(("args", "message"), [
    (["--workload", "sessions", "--seed", "abc"], "--seed: seed: must be an integer, got 'abc'"),
    (["--workload", "sessions", "--first-seed", "1.5"], "seed: must be an integer, got '1.5'"),
    (["--workload", "nope"], "--workload: unknown workload 'nope'; known workloads: sessions, ledger"),
    (["--workload", "sessions", "--seed", "1", "--seeds", "3"], "cannot be combined with --seeds"),
    (["--workload", "sessions", "--seeds", "0"], "--seeds: must be from 1 to 10,000,000, got 0"),
    # attack: a count no campaign can list was an OverflowError traceback
    (["--workload", "sessions", "--seeds", "99999999999999999999999"], "--seeds: must be from 1 to 10,000,000"),
    (["--scenario", "os:getcwd", "--seeds", "99999999999999999999999"], "--seeds: must be from 1 to 10,000,000"),
    (["--workload", "sessions", "--sessions", "0"], "sessions: must be an int in [1, 1000], got 0"),
])
def test_bad_arguments_are_refused_before_anything_starts(tmp_path, args, message):
    done = chaos(tree_file(tmp_path), *args, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr


def test_a_tree_that_is_missing_or_has_no_ledger_is_refused(tmp_path):
    done = chaos(str(tmp_path / "missing.toml"), "--workload", "sessions", timeout=60)
    assert done.returncode == 2 and "cannot read tree file" in done.stderr
    path = tmp_path / "noledger.toml"
    path.write_text('[tree]\nid = "t"\n[[tree.children]]\nid = "e"\nactor = "ouroactors.examples.workers:Echo"\n')
    done = chaos(str(path), "--workload", "sessions", timeout=60)
    assert done.returncode == 2 and "tree 't' has no ledger" in done.stderr


@pytest.mark.parametrize(("rule", "message"), [
    ('action = "explode"', "action: invalid value 'explode'; allowed: 'raise'"),
    ('action = "delay"\nprobability = 2', "probability: must be a number in [0, 1], got 2"),
])
def test_a_bad_plan_file_is_refused_before_anything_is_armed(tmp_path, rule, message):
    plan = tmp_path / "plan.toml"
    plan.write_text(f'[[rules]]\npoint = "storage.before_commit"\n{rule}\n')
    done = chaos(tree_file(tmp_path), "--workload", "sessions", "--plan", str(plan), timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr and str(plan) in done.stderr


@pytest.mark.multiproc
def test_a_plan_naming_an_unknown_point_warns_with_the_known_ones(tmp_path):
    plan = tmp_path / "plan.toml"
    plan.write_text('[[rules]]\npoint = "storage.befor_commit"\naction = "commit_rejected"\n')
    done = chaos(tree_file(tmp_path), "--workload", "sessions", "--plan", str(plan))
    assert done.returncode == 0, done.stdout + done.stderr
    warning = next(line for line in done.stderr.splitlines() if line.startswith("warning:"))
    assert "point 'storage.befor_commit' is not a known point; known points:" in warning
    assert "storage.before_commit" in warning and "message.agent/ledger" in warning
    assert done.stderr.index("warning:") < len(done.stderr)  # printed before the run's output
