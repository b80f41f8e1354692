"""What a user meets when something is wrong: errors that say where, and what to do.

A failed start or a crash names the file holding the actor's whole traceback (on the error itself, so pytest
shows it); an OTP admin call aimed at a worker says so instead of handing the worker a message it was never
meant to see; plain ``pytest`` in a project that is not installed finds the project's actors.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ouroactors import ActorCrashed, NoSuchActor, StartFailed, supervisor, worker
from tests.inner_pytest import UNRELATED_PLUGINS

from .helpers import COUNTER, ECHO, FAILING_START, wait_until


@pytest.mark.multiproc
def test_a_failed_start_and_a_crash_name_the_file_with_the_traceback(actor_system):
    log = actor_system.data_dir / "admin.out"
    with pytest.raises(StartFailed) as failed:
        actor_system.start_tree(supervisor("app", [worker("bad", FAILING_START)]))
    assert "workers.py:" in str(failed.value) and "in on_start" in str(failed.value)  # the user's file and line
    assert failed.value.__notes__ == [f"the actor's full traceback is in {log}"]
    wait_until(lambda: log.exists() and "raise RuntimeError(\"cannot start\")" in log.read_text(),
               what="the traceback in admin.out")
    actor_system.start_tree(supervisor("ok", [worker("c", COUNTER)]))
    mark = actor_system.mark()
    with pytest.raises(ActorCrashed) as crashed:
        actor_system.ask("ok/c", "crash")
    assert "workers.py:" in str(crashed.value) and "in handle_str" in str(crashed.value)
    assert crashed.value.__notes__ == [f"the actor's full traceback is in {log}"]
    actor_system.wait_for("started", "ok/c", after=mark)  # the restart
    with pytest.raises(ActorCrashed) as again:  # through a resolved reference too
        actor_system.ref("ok/c").ask("crash", timeout=10)
    assert len(again.value.__notes__) == 1


def test_admin_calls_aimed_at_a_worker_say_it_is_not_a_supervisor(simple_system):
    simple_system.start_tree(supervisor("app", [worker("echo", ECHO)]))  # Echo would answer the call itself
    for call in (lambda: simple_system.start_child("app/echo", (7,)),
                 lambda: simple_system.which_children("app/echo"),
                 lambda: simple_system.terminate_child("app/echo", "x")):
        with pytest.raises(NoSuchActor) as caught:
            call()
        assert "app/echo is a worker, not a supervisor" in str(caught.value)
        assert "(here app)" in str(caught.value)
    [(path, info)] = simple_system.walk("app/echo")  # `ouroactors tree app/echo`: the worker's own row
    assert (path, info.id, info.type, info.status) == ("app/echo", "echo", "worker", "running")
    assert [p for p, _ in simple_system.walk("app")] == ["app/echo"]


PROJECT_TEST = '''
from ouroactors import supervisor, worker


def test_the_projects_actor_answers(actor_system):
    actor_system.start_tree(supervisor("app", [worker("store", "myapp.store:Store")]))
    assert actor_system.ask("app/store", "hi") == ("stored", "hi")


def test_a_start_that_fails(actor_system):
    actor_system.start_tree(supervisor("app", [worker("broken", "myapp.store:Broken")]))
'''

PROJECT_STORE = '''
from ouroactors import Worker


class Store(Worker):
    def on_message(self, message, sender):
        return ("stored", message)


class Broken(Worker):
    def on_start(self):
        raise OSError("no disk here")
'''


@pytest.mark.multiproc
def test_plain_pytest_in_a_project_that_is_not_installed(tmp_path):
    project = tmp_path / "proj"
    (project / "myapp").mkdir(parents=True)
    (project / "myapp" / "__init__.py").write_text("")
    (project / "myapp" / "store.py").write_text(PROJECT_STORE)
    (project / "tests").mkdir()  # no __init__.py: pytest puts tests/, not the project, on the path
    (project / "tests" / "test_app.py").write_text(PROJECT_TEST)
    (project / "pyproject.toml").write_text("[project]\nname = 'myapp'\nversion = '0'\n")
    # -P: like the `pytest` script, nothing puts the current directory on sys.path (`python -m` would)
    done = subprocess.run([sys.executable, "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider", *UNRELATED_PLUGINS,
                           "--basetemp", str(tmp_path / "inner")], cwd=project, capture_output=True, text=True,
                          timeout=180)
    out = done.stdout + done.stderr
    assert "1 failed, 1 passed" in out, out
    assert "No module named" not in out, out
    assert f"{Path('myapp', 'store.py')}:" in out and "in on_start" in out, out  # where the user's code raised
    assert "the actor's full traceback is in " in out and "admin.out" in out, out


def test_wrong_arguments_to_the_python_api_say_what_was_given(simple_system, tmp_path):
    from ouroactors import ActorSystem
    from ouroactors.core.errors import ActorSystemError

    for port in (70000, -1, 0, True, "8080"):
        with pytest.raises(ActorSystemError, match=r"admin_port must be a port number 1-65535 .* not "):
            ActorSystem.start("multiproc", tmp_path / "never", admin_port=port)  # refused before anything starts
    assert not (tmp_path / "never").exists()
    with pytest.raises(ActorSystemError, match="cannot use /proc/nope/d as the data dir"):
        ActorSystem.start("simple", "/proc/nope/d")
    simple_system.start_tree(supervisor("app", [worker("e", ECHO)]))
    for path in (None, 5, b"app/e"):
        with pytest.raises(TypeError, match=f"an actor path is a str like 'app/worker', not {type(path).__name__}"):
            simple_system.ask(path, "x")
    with pytest.raises(TypeError, match=r"start_tree takes a supervisor spec .* not str"):
        simple_system.start_tree("app")
    assert simple_system.ask("app/e", "x") == "x"


def test_an_ask_timeout_that_is_no_number_of_seconds_is_refused_saying_so(simple_system):
    simple_system.start_tree(supervisor("app", [worker("e", ECHO)]))
    for timeout in (float("nan"), float("inf"), -1, "5", True, None):
        with pytest.raises(ValueError, match=r"timeout must be a finite number of seconds >= 0, not "):
            simple_system.ask("app/e", "x", timeout=timeout)
    assert simple_system.ref("app/e").ask("x", timeout=2.5) == "x" and simple_system.ask("app/e", "y", 1) == "y"


def test_start_child_takes_its_extra_arguments_as_a_sequence_only(simple_system):
    simple_system.start_tree(supervisor("app", [supervisor("pool", [worker("c", COUNTER)],
                                                           strategy="simple_one_for_one")]))
    for wrong in ("12", 12, {"start": 1}, b"12"):  # "12" started a child with ("1", "2"), a dict with its keys
        with pytest.raises(TypeError, match=f"start_child takes a child spec, or the extra arguments as a tuple or "
                                            f"list .* not {type(wrong).__name__}"):
            simple_system.start_child("app/pool", wrong)
    assert simple_system.which_children("app/pool") == []  # nothing was started
    assert simple_system.start_child("app/pool", [5]).id == "c#1"


@pytest.mark.multiproc
def test_the_traceback_reaches_admin_out_from_a_fresh_interpreter(tmp_path: Path) -> None:
    # Alone, the test above failed: the framework's loggers are made when their modules are imported, and a script
    # that only imports ActorSystem imports the worker's module after the fork, in the actor, where it logged to
    # thespian's forwarder (actors.log) only — while the error said to look in admin.out. Here no other test can
    # have imported anything first.
    script = (
        "import sys\n"
        "from ouroactors import ActorCrashed, ActorSystem, StartFailed, supervisor, worker\n"
        f"with ActorSystem.start('multiproc', {str(tmp_path / 'data')!r}) as system:\n"
        "    try:\n"
        f"        system.start_tree(supervisor('app', [worker('bad', {FAILING_START!r})]))\n"
        "    except StartFailed:\n"
        "        pass\n"
        f"    system.start_tree(supervisor('ok', [worker('c', {COUNTER!r})]))\n"
        "    try:\n"
        "        system.ask('ok/c', 'crash', timeout=10)\n"
        "    except ActorCrashed:\n"
        "        pass\n"
        "    system.wait_for('started', 'ok/c')\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120, cwd=tmp_path)
    log = (tmp_path / "data" / "admin.out").read_text()
    assert 'raise RuntimeError("cannot start")' in log
    assert 'raise ValueError("counter crashed on purpose")' in log
