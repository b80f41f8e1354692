"""Defects a review of the CLI found, each against a real system: a path through a worker, JSON nested too deep to
send, a private class name in an error, an empty path, newlines in line-oriented output, ``logs`` without a data dir
and ``status`` while a tree boots."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ouroactors import supervisor, worker
from ouroactors.cli import common, main

from ..actor.helpers import ECHO, wait_until
from .cli_helpers import cli

pytestmark = pytest.mark.multiproc

MULTILINE = "tests.e2e.defect_workers:Multiline"
HOLDS_START = "tests.e2e.defect_workers:HoldsStart"


def _cli(system: Any, *args: str) -> Any:
    return CliRunner().invoke(main, [*args, "--data-dir", str(system.data_dir)])


def test_a_path_through_a_worker_fails_at_once_naming_the_worker(actor_system: Any) -> None:
    actor_system.start_tree(supervisor("app", [worker("echo", ECHO)]))
    for command in (["ask", "app/echo/x", '"hi"', "--timeout", "20"], ["tell", "app/echo/x", '"hi"'],
                    ["ask", "app/echo/x/y", "1", "--timeout", "20"]):
        started = time.monotonic()
        done = _cli(actor_system, *command)
        took = time.monotonic() - started
        assert done.exit_code == 2, done.output
        assert "NoSuchActor: no actor at 'app/echo/x': app/echo is a worker, which has no children" in done.output
        assert "Traceback" not in done.output and took < 5, (took, done.output)  # was the whole timeout, AskTimeout
    assert actor_system.ask("app/echo", "still") == "still"


def test_json_nested_too_deep_is_refused_at_every_depth(actor_system: Any) -> None:
    actor_system.start_tree(supervisor("app", [worker("echo", ECHO)]))

    def refused(command: str, depth: int) -> None:
        done = _cli(actor_system, command, "app/echo", "[" * depth + "]" * depth)
        assert done.exit_code == 2, (command, depth, done.output[-500:])
        assert "Invalid value for 'MESSAGE'" in done.output and "nests too deep" in done.output
        assert "Traceback" not in done.output and len(done.output) < 2000

    for command in ("ask", "tell"):
        for depth in (500, 900, 5000):  # 500 and 900 crashed the CLI while pickling (RecursionError, exit 1)
            refused(command, depth)
    deep = common.MAX_JSON_DEPTH  # the limit: what it allows is sent and answered, one level more refused
    answered = _cli(actor_system, "ask", "app/echo", "[" * deep + "]" * deep)
    assert answered.exit_code == 0 and answered.output.strip() == "[" * deep + "]" * deep
    refused("ask", deep + 1)
    refused("tell", deep + 1)
    assert actor_system.ask("app/echo", "still") == "still"


def test_a_recursion_error_while_sending_is_reported_cleanly(actor_system: Any, monkeypatch: Any) -> None:
    actor_system.start_tree(supervisor("app", [worker("echo", ECHO)]))
    # past what the parse allows: only the send can fail now
    monkeypatch.setattr(common, "MAX_JSON_DEPTH", 10_000, raising=False)
    for command in ("ask", "tell"):
        done = _cli(actor_system, command, "app/echo", "[" * 900 + "]" * 900)
        assert done.exit_code == 2, done.output[-2000:]
        assert "Invalid value for 'MESSAGE'" in done.output and "nests too deep to pass between processes" \
            in done.output and "asking app/echo" in done.output
        assert "RecursionError" not in done.output and "Traceback" not in done.output
    assert actor_system.ask("app/echo", "still") == "still"


def test_a_child_that_is_not_running_is_named_with_a_public_error(actor_system: Any) -> None:
    actor_system.start_tree(supervisor("app", [worker("echo", ECHO)]))
    assert _cli(actor_system, "terminate", "app/echo").exit_code == 0
    done = _cli(actor_system, "ask", "app/echo", '"x"')
    assert done.exit_code == 2, done.output
    assert done.output.startswith("NotRunning: app/echo is not running (undefined: "), done.output
    assert "_NotRunning" not in done.output


@pytest.mark.parametrize("path", ["", "/", "//"])
def test_an_empty_path_is_refused_by_every_command_that_takes_one(actor_system: Any, path: str) -> None:
    actor_system.start_tree(supervisor("app", [worker("echo", ECHO)]))
    for command in (["kill", path], ["kill", path, "--force"], ["restart", path], ["terminate", path],
                    ["start-child", path, "1"], ["tell", path, "1"], ["ask", path, "1"],
                    ["faults", "disarm", "--at", path]):
        done = _cli(actor_system, *command)
        assert done.exit_code == 2, (command, done.output)
        assert done.output.startswith(f"NoSuchActor: empty path {path!r}: "), (command, done.output)
        assert "names no actor (give a tree path such as app/worker)" in done.output
        assert "tree's root" not in done.output and "tree root" not in done.output, (command, done.output)
    assert actor_system.ask("app/echo", "still") == "still"  # nothing was killed or terminated


def test_newlines_in_a_crash_never_forge_an_event_or_a_table_row(actor_system: Any) -> None:
    actor_system.start_tree(supervisor("app", [worker("m", MULTILINE)]))
    assert _cli(actor_system, "ask", "app/m", "crash").exit_code == 2
    wait_until(lambda: any(row["last_exit"] for row in _json_tree(actor_system)), what="the crash in the tree")
    listed = _cli(actor_system, "events", "--kind", "exited")
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    assert len(lines) == 1, listed.output  # the message's newline made a second line that read as an exited event
    assert "RuntimeError: x\\n12:00:00.000 exited               app/forged  reason=fake\\rend" in lines[0]
    table = _cli(actor_system, "tree")
    assert table.exit_code == 0 and "app/forged" in table.output, table.output
    row = [line for line in table.output.splitlines() if "app/m" in line]
    assert len(row) == 1 and "x\\n12:00:00.000 exited" in row[0] and "reason=fake\\rend" in row[0], table.output
    assert sum("app/forged" in line for line in table.output.splitlines()) == 1  # on the one row, not on a line below


def _json_tree(system: Any) -> list[dict[str, Any]]:
    import json

    done = _cli(system, "tree", "--json")
    assert done.exit_code == 0, done.output
    return json.loads(done.output)


def test_a_multi_line_log_record_reads_as_one_record(actor_system: Any) -> None:
    from .defect_workers import FORGED, FORGED_HEADER

    actor_system.start_tree(supervisor("app", [worker("m", MULTILINE)]))
    assert actor_system.ask("app/m", "log") == "logged"
    log = Path(actor_system.data_dir) / "admin.out"
    wait_until(lambda: log.exists() and "after a carriage return" in log.read_text(), what="the warning logged")
    shown = _cli(actor_system, "logs", "-n", "1000")
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    first = next(i for i, line in enumerate(lines) if line.endswith(" WARNING defects: first line"))
    assert lines[first + 1:first + 4] == ["    indented", f"  {FORGED}\\rafter a carriage return",
                                          f"  {FORGED_HEADER}"], lines[first:]  # indented by the writer
    assert not lines[first].startswith(" ")  # a record's first line starts at the margin; its others never do


def test_status_while_a_tree_boots_prints_no_none(actor_system: Any, tmp_path: Path) -> None:
    flag = tmp_path / "boot-may-finish"
    boot = threading.Thread(target=actor_system.start_tree,
                            args=(supervisor("hs", [worker("h", HOLDS_START, args=[str(flag), 60.0])]),))
    boot.start()
    try:
        seen: list[str] = []

        def starting() -> bool:
            done = cli("status", "--data-dir", str(actor_system.data_dir), cwd=tmp_path)
            seen.append(done.stdout + done.stderr)
            return done.returncode == 0 and "tree hs: starting" in done.stdout

        wait_until(starting, timeout=30, what="status to show the tree starting")
        line = next(line for line in seen[-1].splitlines() if line.startswith("tree hs:"))
        assert line == "tree hs: starting, no pid yet — no children", seen[-1]
        assert "None" not in seen[-1]
    finally:
        flag.touch()
        boot.join(timeout=60)
    assert not boot.is_alive()
    done = cli("status", "--data-dir", str(actor_system.data_dir), cwd=tmp_path)
    assert done.returncode == 0 and "tree hs: running, pid " in done.stdout and "1 running" in done.stdout, done.stdout
