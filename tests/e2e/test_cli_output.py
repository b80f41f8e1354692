"""Output a program can parse and a person can read: --json, no cutting when piped, clear exits."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from .cli_helpers import CLI, Served, cli, write_tree

LONG_ID = "a-child-with-a-name-long-enough-that-an-eighty-column-table-would-cut-it-short"

TREE = f"""
[tree]
id = "root"
strategy = "one_for_one"

[[tree.children]]
id = "{LONG_ID}"
actor = "ouroactors.examples.workers:Echo"
"""


def test_tree_and_status_as_json_and_never_cut_when_piped(tmp_path):
    tree_file = write_tree(tmp_path / "t.toml", TREE)
    data_dir = tmp_path / "data"
    served = Served(tmp_path, str(tree_file), "--data-dir", str(data_dir))
    try:
        rows = json.loads(cli("tree", "--json", "--data-dir", str(data_dir), cwd=tmp_path).stdout)
        assert [row["path"] for row in rows] == [f"root/{LONG_ID}"]
        assert rows[0]["status"] == "running" and rows[0]["generation"] > 0
        assert rows[0]["generation_text"].count(".") == 1
        status = json.loads(cli("status", "--json", "--data-dir", str(data_dir), cwd=tmp_path).stdout)
        assert status["trees"][0]["name"] == "root"
        assert status["trees"][0]["children"][0]["path"] == f"root/{LONG_ID}"
        # A pipe with no COLUMNS: rich would assume 80 columns and ellipsise the path.
        env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
        table = subprocess.run([*CLI, "tree", "--data-dir", str(data_dir)], cwd=tmp_path, capture_output=True,
                               text=True, timeout=60, env=env).stdout
        assert f"root/{LONG_ID}" in table and "…" not in table
    finally:
        served.stop(data_dir)


def test_events_of_a_data_dir_that_does_not_exist_is_an_error(tmp_path):
    result = cli("events", "--data-dir", str(tmp_path / "typo"), cwd=tmp_path)
    assert result.returncode == 5
    assert "typo" in result.stderr


POOL = """
[tree]
id = "example"
strategy = "one_for_one"

[[tree.children]]
id = "pool"
type = "supervisor"
strategy = "simple_one_for_one"

[[tree.children.children]]
id = "counter"
actor = "ouroactors.examples.workers:Counter"
restart = "transient"
"""


def test_start_child_arguments_are_typed_literals(tmp_path):
    import sys

    tree_file = write_tree(tmp_path / "pool.toml", POOL)
    data_dir = tmp_path / "data"
    served = Served(tmp_path, str(tree_file), "--data-dir", str(data_dir))
    try:
        started = cli("start-child", "example/pool", "7", "--data-dir", str(data_dir), cwd=tmp_path)
        assert started.returncode == 0, started.stdout + started.stderr
        child = started.stdout.split()[1]  # "started example/pool/counter#1 (pid N)"
        code = ("from ouroactors import ActorSystem; "
                f"print(ActorSystem.connect({str(data_dir)!r}).ask({child!r}, 'incr'))")
        answer = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert answer.stdout.strip() == "8", answer.stdout + answer.stderr  # 7 is the int 7, not the string "7"
    finally:
        served.stop(data_dir)


FAILING = """
[tree]
id = "app"
strategy = "one_for_one"

[[tree.children]]
id = "broken"
actor = "ouroactors.examples.workers:FailingStart"
"""


def test_a_start_failure_names_the_users_file_and_line_and_the_log(tmp_path):
    tree_file = write_tree(tmp_path / "failing.toml", FAILING)
    data_dir = tmp_path / "data"
    result = cli("run", str(tree_file), "--data-dir", str(data_dir), cwd=tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    text = " ".join((result.stdout + result.stderr).split())
    assert "workers.py:" in text and "in on_start" in text  # where the user's code raised
    assert str(data_dir / "admin.out") in text


@pytest.mark.slow
def test_kill_names_what_exists_and_will_not_kill_a_root_without_force(tmp_path):
    tree_file = write_tree(tmp_path / "pool.toml", POOL)
    data_dir = tmp_path / "data"
    served = Served(tmp_path, str(tree_file), "--data-dir", str(data_dir))
    try:
        missing = cli("kill", "example/no-such-child", "--data-dir", str(data_dir), cwd=tmp_path)
        assert missing.returncode == 2
        assert "example/no-such-child" in missing.stderr and "example/pool" in missing.stderr
        for command in ("terminate", "restart"):  # OTP's not_found, said the same way as kill's
            missing = cli(command, "example/no-such-child", "--data-dir", str(data_dir), cwd=tmp_path)
            assert missing.returncode == 2
            assert "example/no-such-child" in missing.stderr and "example/pool" in missing.stderr, missing.stderr
        root = cli("kill", "example", "--data-dir", str(data_dir), cwd=tmp_path)
        assert root.returncode == 2 and "--force" in root.stderr
        assert "tree example: running" in cli("status", "--data-dir", str(data_dir), cwd=tmp_path).stdout
        plain = cli("start-child", "example", "--data-dir", str(data_dir), cwd=tmp_path)
        assert plain.returncode == 2 and "simple_one_for_one" in plain.stderr and "child spec" in plain.stderr
    finally:
        served.stop(data_dir)


def test_detach_with_a_metrics_port_is_refused_saying_why(tmp_path):
    tree_file = write_tree(tmp_path / "pool.toml", POOL)
    result = cli("run", str(tree_file), "--detach", "--metrics-port", "9471", "--data-dir", str(tmp_path / "d"),
                 cwd=tmp_path)
    assert result.returncode == 2 and "--metrics-port" in result.stderr and "ouroactors metrics" in result.stderr
    assert not (tmp_path / "d" / "system.json").exists()  # nothing was started


def test_a_metrics_port_that_cannot_be_served_is_refused_before_anything_starts(tmp_path):
    import socket

    tree_file = write_tree(tmp_path / "pool.toml", POOL)
    with socket.socket() as held:  # someone else serves on it
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        result = cli("run", str(tree_file), "--metrics-port", str(port), "--data-dir", str(tmp_path / "d"),
                     cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert f"cannot serve /metrics on 127.0.0.1:{port}" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "d" / "system.json").exists()  # refused before the system started, not after its tree
    for bad in ("0", "65536", "-1"):
        for option in ("--metrics-port", "--admin-port"):
            refused = cli("run", str(tree_file), option, bad, "--data-dir", str(tmp_path / "d"), cwd=tmp_path)
            assert refused.returncode == 2 and f"Invalid value for '{option}'" in refused.stderr, refused.stderr


BROKEN_POOL = """
[[tree.children]]
id = "broken"
type = "supervisor"
strategy = "simple_one_for_one"

[[tree.children.children]]
id = "b"
actor = "ouroactors.examples.workers:FailingStart"
restart = "temporary"
"""


@pytest.mark.slow
def test_a_second_terminal_finds_a_system_whose_tree_sets_its_own_data_dir(tmp_path):
    tree_file = write_tree(tmp_path / "app.toml", '[system]\ndata_dir = ".ouroactors/app"\n' + POOL + BROKEN_POOL)
    served = Served(tmp_path, str(tree_file))  # the README's layout: the tree names a data dir below the default
    try:
        status = cli("status", cwd=tmp_path)  # no --data-dir
        assert status.returncode == 0 and "tree example: running" in status.stdout, status.stdout + status.stderr
        assert "started" in cli("events", cwd=tmp_path).stdout
        kinds = [json.loads(line)["kind"] for line in cli("events", "--json", cwd=tmp_path).stdout.splitlines()]
        assert "started" in kinds
        failed = cli("start-child", "example/broken", cwd=tmp_path)
        assert failed.returncode == 2, failed.stdout + failed.stderr
        text = " ".join(failed.stderr.split())
        assert "workers.py:" in text and "in on_start" in text
        # the log of the system the command reached, not of the directory it was given
        assert f"the actor's full traceback is in {os.path.join('.ouroactors', 'app', 'admin.out')}" in text, text
        assert 'raise RuntimeError("cannot start")' in (tmp_path / ".ouroactors" / "app" / "admin.out").read_text()
        started = cli("start-child", "example/pool", "1", cwd=tmp_path)
        child = started.stdout.split()[1]  # "started example/pool/counter#1 (pid N)"
        aimed = cli("start-child", child, cwd=tmp_path)  # a worker, not a supervisor: said, not a traceback
        assert aimed.returncode == 2 and f"{child} is a worker, not a supervisor" in aimed.stderr, aimed.stderr
        assert "Traceback" not in aimed.stderr
        [row] = json.loads(cli("tree", child, "--json", cwd=tmp_path).stdout)  # a worker's tree: its own row
        assert row["path"] == child and row["type"] == "worker"
    finally:
        served.stop(tmp_path / ".ouroactors" / "app", found_from_cwd=True)
