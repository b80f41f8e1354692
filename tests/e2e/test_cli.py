"""The ``ouroactors`` command as a user runs it: a real subprocess, its output and exit code."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ouroactors.system.handle import _group_alive

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from ouroactors.cli import main; main()"]


def run_cli(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "COLUMNS": "120"})


@pytest.mark.multiproc
def test_demo_runs_and_leaves_nothing(tmp_path):
    result = run_cli("demo", "--data-dir", str(tmp_path / "d"), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no process left behind" in result.stdout
    assert "request stamped with the old generation refused" in result.stdout
    assert "-1: recorded started (seq 1) before running" in result.stdout
    assert "the ledger now says ambiguous" in result.stdout


def test_demo_on_simple_base(tmp_path):
    result = run_cli("demo", "--base", "simple", "--data-dir", str(tmp_path / "d"), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "-1: recorded started (seq 1) before running" in result.stdout


def test_check_accepts_the_shipped_example(tmp_path):
    result = run_cli("check", str(REPO / "supervision_trees" / "example.toml"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "ok" in result.stdout


@pytest.mark.parametrize(("text", "expected"), [
    ("[tree\nid = 'x'", "line 1, column"),
    ("[tree]\nid = 'r'\n[[tree.children]]\nid = 'a'\nactor = 'ouroactors.examples.workers:Echo'\nrestrat = 'x'",
     "tree.children[0].restrat: unknown key 'restrat' (did you mean 'restart'?)"),
    ("[tree]\nid = 'r'\n[[tree.children]]\nid = 'a'\nactor = 'ouroactors.examples.workers:Echo'\nrestart = 'x'",
     "'permanent', 'transient' or 'temporary'"),
    ("[tree]\nid = 'r'\n[[tree.children]]\nid = 'a'\nactor = 'no.such.module:Thing'",
     "tree.children[0].actor: actor path 'no.such.module:Thing' does not import"),
    ("[tree]\nid = 'r'\n[[tree.children]]\nid = 'a'\nactor = 'ouroactors.examples.workers:Echo'\n"
     "[[tree.children]]\nid = 'a'\nactor = 'ouroactors.examples.workers:Echo'", "duplicate child id 'a'"),
])
def test_check_refuses_bad_trees_naming_the_place(tmp_path, text, expected):
    tree = tmp_path / "bad.toml"
    tree.write_text(text)
    result = run_cli("check", str(tree), cwd=tmp_path)
    assert result.returncode == 2
    assert expected in " ".join(result.stdout.split())
    assert not (tmp_path / ".ouroactors").exists()  # nothing durable was created


@pytest.mark.multiproc
def test_run_serves_until_sigterm_and_cleans_up(tmp_path):
    tree = tmp_path / "t.toml"
    tree.write_text("[tree]\nid = 'r'\n[[tree.children]]\nid = 'e'\nactor = 'ouroactors.examples.workers:Echo'\n")
    proc = subprocess.Popen([*CLI, "run", str(tree), "--data-dir", str(tmp_path / "data")], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if "serving" in line:
                break
        events = (tmp_path / "data" / "events.jsonl").read_text()
        assert '"kind":"started"' in events
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, "".join(lines) + out
    assert "stopped" in out
    # every actor of that system is gone: find the admin's process group from the event pids
    import json
    pids = [json.loads(line).get("pid") for line in (tmp_path / "data" / "events.jsonl").read_text().splitlines()]
    for pid in filter(None, pids):
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
    assert not any(_group_alive(p) for p in filter(None, pids))


def test_check_accepts_agent_tree_in_authority_order(tmp_path):
    from ouroactors.system.config import load_tree

    result = run_cli("check", str(REPO / "supervision_trees" / "agent.toml"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    tree = load_tree(REPO / "supervision_trees" / "agent.toml").tree
    assert tree.flags.strategy.value == "rest_for_one"
    assert [c.id for c in tree.children] == ["storage", "ledger", "grants", "workspace", "execution", "coordinator",
                                            "sessions"]


def test_python_and_toml_trees_are_equal():
    from ouroactors import supervisor, worker
    from ouroactors.system.config import parse_tree

    loaded = parse_tree("""
[tree]
id = "app"
strategy = "rest_for_one"
[[tree.children]]
id = "a"
actor = "ouroactors.examples.workers:Echo"
kwargs = { x = 1 }
shutdown = "brutal_kill"
""").tree
    echo = worker("a", "ouroactors.examples.workers:Echo", kwargs={"x": 1}, shutdown="brutal_kill")
    built = supervisor("app", strategy="rest_for_one", children=[echo])
    assert loaded == built
