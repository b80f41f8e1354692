"""The actors' log lines — the framework's and the user's own loggers — go to ``<data dir>/admin.out`` from the level
the system is started with (``log_level``; ``[system] log_level``; ``run --log-level``).

Before, only WARNING and above ever reached ``admin.out``, whatever the user configured: every actor is forked from
the admin, whose root logger kept Python's default level, and ``actors.log`` held nothing but thespian's shutdown
lines. A user's ``log.info(...)`` went nowhere.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from ouroactors import ActorSystem, ActorSystemError, supervisor, worker
from ouroactors.core.errors import SpecError
from ouroactors.system._logs import level_of
from ouroactors.system.config import parse_tree

from .helpers import wait_until
from .logging_workers import LOGGER


def _admin_out(system: ActorSystem) -> str:
    return (system.data_dir / "admin.out").read_text()


@pytest.mark.multiproc
@pytest.mark.parametrize(("level", "shown", "left_out"), [
    ("INFO", ["info line x", "late info line x", "warning line x"], ["debug line x"]),
    ("WARNING", ["warning line x"], ["info line x", "late info line x"]),
    ("debug", ["debug line x", "info line x"], []),
])
def test_the_actors_lines_from_the_level_given_reach_admin_out(actor_system_factory, level, shown, left_out):
    system = actor_system_factory("multiproc", log_level=level)
    system.start_tree(supervisor("app", [worker("log", LOGGER)]))
    assert system.ask("app/log", "x") == "logged"
    wait_until(lambda: "warning line x" in _admin_out(system), what="the warning line in admin.out")
    out = _admin_out(system)
    assert all(line in out for line in shown), out
    assert not any(line in out for line in left_out), out


def test_a_level_is_a_name_or_its_number_and_nothing_else(tmp_path) -> None:
    assert (level_of("info"), level_of("WARNING"), level_of(logging.DEBUG)) == (20, 30, 10)
    for bad in ("verbose", 15, True, 20.0, ""):
        with pytest.raises(ActorSystemError, match="log_level must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL"):
            ActorSystem.start("multiproc", data_dir=tmp_path / "d", log_level=bad)  # type: ignore[arg-type]
    assert not (tmp_path / "d").exists()  # refused before anything was made


def test_a_tree_files_log_level_is_checked() -> None:
    tree = parse_tree('[system]\nlog_level = "INFO"\n[tree]\nid = "app"\n', "app.toml")
    assert tree.system.log_level == "INFO"
    with pytest.raises(SpecError) as bad:
        parse_tree('[system]\nlog_level = "verbose"\n[tree]\nid = "app"\n', "app.toml")
    [(where, problem)] = bad.value.problems
    assert where == "system.log_level" and "'INFO'" in problem and problem.endswith("got 'verbose'")


@pytest.mark.multiproc
def test_without_a_level_the_logging_the_creator_configured_stands(tmp_path) -> None:
    # a script that calls logging.basicConfig(level=INFO) and starts a system without log_level: its INFO lines,
    # in every actor, keep reaching the handler it made (on stderr: admin.out in the system's processes)
    script = (
        "import logging, sys\n"
        "logging.basicConfig(level=logging.INFO)\n"
        "from ouroactors import ActorSystem, supervisor, worker\n"
        f"with ActorSystem.start('multiproc', {str(tmp_path / 'data')!r}) as system:\n"
        f"    system.start_tree(supervisor('app', [worker('log', {LOGGER!r})]))\n"
        "    print(system.ask('app/log', 'y', timeout=30))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0 and "logged" in done.stdout, done.stdout + done.stderr
    out = (tmp_path / "data" / "admin.out").read_text()
    assert "info line y" in out and "late info line y" in out and "debug line y" not in out, out
