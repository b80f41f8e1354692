"""The ``ouroactors`` command as a user runs it: a real subprocess, its output and exit code."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ouroactors.system.handle import session_alive
from ouroactors.system.marker import read_marker

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from ouroactors.cli import main; main()"]


def run_cli(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "COLUMNS": "120"})


def _printed_pgid(stdout: str) -> int:
    match = re.search(r"session (\d+) is empty", stdout)
    assert match, stdout
    return int(match.group(1))


@pytest.mark.multiproc
@pytest.mark.slow
def test_demo_runs_the_agent_runtime_end_to_end_and_leaves_nothing(tmp_path):
    result = run_cli("demo", "--data-dir", str(tmp_path / "d"), cwd=tmp_path)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "supervision_trees/agent.toml booted on multiproc" in out
    assert re.search(r"sandbox: (bwrap|none) — ", out), out  # bwrap if it works here, else the explicit none
    assert re.search(r"approval_needed +edit \{.*\} \(call_demo_edit\): no rule", out), out
    assert "approved by operator:" in out
    assert re.search(r"ledger: demo-\d+/t1/call_demo_slow is ambiguous", out), out
    assert "coordinator: session parked — ambiguous_effect" in out
    assert "settled by operator:" in out and "recovery retried" in out
    assert "completed: the model answered" in out and "chain ok" in out
    # the re-run turns report the calls the ledger holds as they happened (the read, the edit and the grep ran
    # once, ok), never as failures; the interrupted command as the operator settled it
    for call in ("call_demo_read", "call_demo_edit", "call_demo_shell"):
        assert re.findall(rf"tool_result +(\w+) \({call}\)", out) and set(
            re.findall(rf"tool_result +(\w+) \({call}\)", out)) == {"ok"}, out
    assert re.search(r"session demo-\d+: completed after \d+ committed events", out), out  # sent with last=True
    assert re.search(r"\d+ of \d+ turns verified", out), out  # replay's verdict, shown whatever it is
    # the re-runs took the model's answers from the journal (seed 001: the model is not asked again what it decided),
    # so the turn that settled is the one its recording replays, digest for digest
    assert re.search(r"took [1-9]\d* model answer\(s\) from the journal", out), out
    # the steer sent just before the kill was acknowledged (journaled) and delivered by the replacement, once
    assert "answered 'steered' only once the runtime's journal holds it" in out, out
    assert len(re.findall(r"steered +'when you are done, say so in one line' \(before model call \d+\)", out)) == 1
    assert "acknowledged but not delivered was delivered by the replacement" in out, out
    assert "replay ok: every request and conversation digest matches" in out, out
    assert "- [x] try the demo" in (tmp_path / "d-workspace" / "NOTES.md").read_text()  # beside the data dir
    assert "no process left behind" in out and not session_alive(_printed_pgid(out))
    # The system is gone: what asks it is labelled as needing --keep, and every command still offered runs.
    assert "with the system kept up (demo --keep): ouroactors ledger list --session" in out
    commands = _printed_commands(out)
    assert ["ouroactors", "events", "--data-dir", str(tmp_path / "d")] in commands
    for words in commands:
        ran = run_cli(*words[1:], cwd=tmp_path)
        assert ran.returncode == 0, f"{' '.join(words)}: {ran.stdout}{ran.stderr}"


def _printed_commands(stdout: str) -> list[list[str]]:
    lines = [line.split("see it yourself: ", 1)[1] for line in stdout.splitlines() if "see it yourself: " in line]
    return [shlex.split(line) for line in dict.fromkeys(lines)]


@pytest.mark.multiproc
@pytest.mark.slow
def test_demo_no_kill_keep_leaves_a_system_the_printed_commands_reach(tmp_path):
    data = tmp_path / "d"
    result = run_cli("demo", "--no-kill", "--keep", "--data-dir", str(data), cwd=tmp_path)
    found = read_marker(data)
    try:
        out = result.stdout
        assert result.returncode == 0, out + result.stderr
        assert "SKIPPED step 5 (SIGKILL mid-effect and recovery): --no-kill" in out
        assert "approved by operator:" in out and "chain ok" in out
        assert re.search(r"session demo-\d+: completed after \d+ committed events", out), out
        assert "replay ok: every request and conversation digest matches" in out
        assert out.rstrip().endswith(f"stop it with: ouroactors stop --data-dir {data}")
        assert found is not None and session_alive(found.admin_pgid)  # --keep: still up after the demo exited
        commands = _printed_commands(out)
        assert len(commands) >= 5
        for words in commands:  # every command the demo printed runs as printed
            assert words[0] == "ouroactors"
            ran = run_cli(*words[1:], cwd=tmp_path)
            assert ran.returncode == 0, f"{' '.join(words)}: {ran.stdout}{ran.stderr}"
        stopped = run_cli("stop", "--data-dir", str(data), cwd=tmp_path)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert not session_alive(found.admin_pgid)
    finally:
        if found is not None and session_alive(found.admin_pgid) and found.admin_pgid != os.getpgid(0):
            os.killpg(found.admin_pgid, signal.SIGKILL)


def test_demo_refuses_the_simple_base_saying_why(tmp_path):
    result = run_cli("demo", "--base", "simple", "--data-dir", str(tmp_path / "d"), cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "the agent demo needs the multiproc base (given: 'simple')" in result.stdout
    assert not (tmp_path / "d").exists()  # refused before anything was created


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
    assert not any(session_alive(p) for p in filter(None, pids))


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
