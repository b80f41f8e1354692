"""``status`` and ``tree`` reach a running system through the thin client: same answers, no heavy imports."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ouroactors import supervisor, worker
from ouroactors.system.client import SystemClient

ECHO = "ouroactors.examples.workers:Echo"
HEAVY = ("pydantic", "rich.console", "ouroactors.supervision.protocol", "ouroactors.supervision.specs",
         "ouroactors.supervision.supervisor", "ouroactors.system.host", "ouroactors.system.handle",
         "ouroactors.supervision.events")

RUN = """
import json, sys
from ouroactors.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "heavy": sorted(m for m in HEAVY if m in sys.modules)}), file=sys.stderr)
""".replace("HEAVY", repr(HEAVY))


def run(*args: str) -> tuple[str, dict]:
    done = subprocess.run([sys.executable, "-c", RUN, *args], capture_output=True, text=True, timeout=60)
    return done.stdout, json.loads(done.stderr.strip().splitlines()[-1])


@pytest.mark.multiproc
def test_status_and_tree_import_nothing_heavy_and_show_the_same_system(actor_system):
    actor_system.start_tree(supervisor("app", [worker("a", ECHO), supervisor("sub", [worker("b", ECHO)])]))
    data_dir = str(actor_system.data_dir)
    for command in (["status"], ["status", "--json"], ["tree"], ["tree", "--json"], ["tree", "app/sub"]):
        out, seen = run(*command, "--data-dir", data_dir)
        assert seen == {"code": 0, "heavy": []}, (command, out)
    out, _ = run("tree", "--json", "--data-dir", data_dir)
    shown = [(row["path"], row["status"], row["pid"], row["generation"]) for row in json.loads(out)]
    expected = [(path, info.status, info.pid, info.generation) for path, info in actor_system.walk()]
    assert shown == expected == [(p, "running", pid, g) for p, _, pid, g in shown] and len(shown) == 3
    out, _ = run("status", "--data-dir", data_dir)
    assert "tree app: running" in out and "3 running" in out
    out, _ = run("tree", "--data-dir", data_dir)
    assert all(path in out for path, *_ in shown)


@pytest.mark.multiproc
def test_the_client_answers_as_the_handle_does(actor_system):
    actor_system.start_tree(supervisor("app", [worker("a", ECHO)]))
    client = SystemClient.attach(actor_system.data_dir)
    try:
        assert [t.name for t in client.trees()] == ["app"]
        assert client.walk() == actor_system.walk()
        assert client.ask("app/a", "hi") == "hi"
        assert client.child_info("app/a").pid == actor_system.child_info("app/a").pid
        assert client.marker == actor_system.marker and client.admin_alive()
    finally:
        client.close()
    assert actor_system.ask("app/a", "still here") == "still here"  # closing a client leaves the system be


def test_no_system_is_exit_5_naming_the_data_dir(tmp_path):
    done = subprocess.run([sys.executable, "-c", RUN, "status", "--data-dir", str(tmp_path / "nothing")],
                          capture_output=True, text=True, timeout=60)
    assert json.loads(done.stderr.strip().splitlines()[-1])["code"] == 5
    assert f"no system marker in {tmp_path / 'nothing'}" in done.stderr


SESSION_HEAVY = ("ouroactors.supervision.supervisor", "ouroactors.system.host", "ouroactors.system.handle",
                 "ouroactors.supervision.events")


@pytest.mark.multiproc
def test_session_commands_reach_the_directory_through_the_thin_client(actor_system, tmp_path):
    """A session command asks the directory and reads the log: it needs the session messages, not what owns a
    system (the supervisor, the tree host, the event log) — those cost every command ~0.15 s of imports."""
    from tests.coordinator.actor_support import suspended_after_a_turn

    suspended_after_a_turn(actor_system, tmp_path)
    data_dir = str(actor_system.data_dir)
    heavy_probe = RUN.replace(repr(HEAVY), repr(SESSION_HEAVY))
    for command in (["session", "list"], ["session", "show", "s1"], ["session", "events", "s1", "--json"]):
        done = subprocess.run([sys.executable, "-c", heavy_probe, *command, "--data-dir", data_dir],
                              capture_output=True, text=True, timeout=60)
        seen = json.loads(done.stderr.strip().splitlines()[-1])
        assert seen == {"code": 0, "heavy": []}, (command, done.stdout, done.stderr)
        assert "s1" in done.stdout or "turn_settled" in done.stdout, (command, done.stdout)
