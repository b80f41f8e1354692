"""The plugin's leak check holds the in-process base to the same promise as multiproc: what a worker started (a
plain ``Popen``, a ``setsid``, a program with an environment of its own) does not outlive the test unnoticed.

The simple base has no system session nor admin: while it lives, its owner's environment carries a system mark of
its own, which the programs its actors start inherit; its shutdown ends what carries it, and the leak check names
what had to be ended, plus the owner's children that appeared while it ran."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ouroactors import Worker, supervisor, worker
from ouroactors.core import procs
from ouroactors.system.handle import ActorSystem
from tests.inner_pytest import UNRELATED_PLUGINS

pytest_plugins = ["pytester"]

PROJECT = Path(__file__).resolve().parents[2]

APP = '''
import os
import subprocess

from ouroactors import Worker


def _record(pid):
    with open(os.environ["LEAK_PIDS"], "a") as f:
        f.write(f"{pid}\\n")


class Popener(Worker):
    def on_start(self):
        _record(subprocess.Popen(["sleep", "311"]).pid)


class Setsider(Worker):
    def on_start(self):
        _record(subprocess.Popen(["setsid", "sleep", "312"]).pid)


class OwnEnvironment(Worker):
    def on_start(self):
        _record(subprocess.Popen(["sleep", "313"], env={"PATH": os.environ["PATH"]}).pid)
'''

TESTS = '''
import subprocess

import pytest

from ouroactors import supervisor, worker


def tree(actor):
    return supervisor("app", [worker("w", f"leakapp:{actor}")])


@pytest.fixture
def elder():
    """A program the test process started before the system: the leak check must leave it alone."""
    proc = subprocess.Popen(["sleep", "314"])
    yield proc
    assert proc.poll() is None, "a program that predates the system was ended"
    proc.kill()
    proc.wait()


def test_popen(elder, simple_system):
    simple_system.start_tree(tree("Popener"))


def test_setsid(elder, simple_system):
    simple_system.start_tree(tree("Setsider"))


def test_own_environment(elder, simple_system):
    simple_system.start_tree(tree("OwnEnvironment"))


def test_clean(elder, simple_system):
    simple_system.start_tree(supervisor("app", []))
'''


def _recorded(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


@pytest.fixture
def recorded(tmp_path: Path) -> Iterator[Path]:
    """Where the inner workers write the pids they started; whatever is left of them is killed after the test."""
    path = tmp_path / "pids"
    yield path
    for pid in _recorded(path):  # without the fix they outlive the inner session: end them (ours, by pid)
        if procs.pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_simple_system_leaks_are_reported_and_ended(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                     recorded: Path) -> None:
    monkeypatch.setenv("PYTHONPATH", str(PROJECT))
    monkeypatch.setenv("LEAK_PIDS", str(recorded))
    pytester.makepyfile(leakapp=APP, test_inner=TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *UNRELATED_PLUGINS, "test_inner.py")
    result.assert_outcomes(passed=4, errors=3)  # each leaking test fails in the fixture's teardown
    output = result.stdout.str()
    pids = _recorded(recorded)
    assert len(pids) == 3
    for pid, command in zip(pids, ("sleep 311", "sleep 312", "sleep 313"), strict=True):
        assert f"{pid} ({command})" in output, output
    assert [pid for pid in pids if procs.pid_alive(pid)] == []  # nothing survives


class Starter(Worker):
    """Starts ``sleep`` in a session of its own and answers its pid."""

    def on_message(self, message: object, sender: object) -> object:
        if message == "start":
            return subprocess.Popen(["setsid", "sleep", "315"]).pid
        return super().on_message(message, sender)


def test_the_simple_base_marks_its_owner_while_it_lives_and_its_shutdown_ends_what_carries_the_mark(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(procs.SYSTEM_MARK, "outer:1")
    first = ActorSystem.start("simple", tmp_path / "a")
    started: list[int] = []
    try:
        second = ActorSystem.start("simple", tmp_path / "b")
        try:
            assert first.lineage_mark and second.lineage_mark and first.lineage_mark != second.lineage_mark
            assert os.environ[procs.SYSTEM_MARK] == second.lineage_mark  # the newest live one is in force
            second.start_tree(supervisor("app", [worker("w", Starter)]))
            started.append(second.ask("app/w", "start", timeout=5))
            assert procs.marked(second.lineage_mark) == started
        finally:
            second.shutdown()
        assert not procs.pid_alive(started[0])
        assert second.in_process is not None and second.in_process.ended == [f"{started[0]} (sleep 315)"]
        assert os.environ[procs.SYSTEM_MARK] == first.lineage_mark
        first.start_tree(supervisor("app", [worker("w", Starter)]))
        started.append(first.ask("app/w", "start", timeout=5))
    finally:
        first.shutdown()
        for pid in started:
            if procs.pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert not procs.pid_alive(started[1])
    assert os.environ[procs.SYSTEM_MARK] == "outer:1"  # put back as it was
