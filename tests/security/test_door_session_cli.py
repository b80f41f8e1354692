"""``ouroactors session wait`` / ``complete-job`` (and the other session commands) with malformed arguments.

A bad argument is a usage error (exit 2) that names the option or argument and says what is wrong — before the
command reaches for a system, so nothing is sent and nothing durable can change. The arguments are held to the
same rules as the message they become (:func:`ouroactors.core.boundary.check_field`): what the CLI lets through,
the door takes. Arguments that are well-formed but name the wrong thing (an unknown job, another session, a
stale version) are the system's to refuse: the last test runs them against a real agent tree.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from ouroactors.cli import main

LONG = "x" * 201


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["session", *args, "--data-dir", "/nonexistent/ouroactors-door-test"])
    return result.exit_code, " ".join(result.output.split())


BAD_ARGUMENTS = [
    (("wait", "s1", "go", "--seconds", "inf"), "--seconds"),
    (("wait", "s1", "go", "--seconds", "nan"), "--seconds"),
    (("wait", "s1", "go", "--seconds", "1e400"), "--seconds"),
    (("wait", "s1", "go", "--seconds", "-1"), "--seconds"),
    (("wait", "s1", "go", "--seconds", "31622401"), "--seconds"),  # over 366 days
    (("wait", "s1", "go", "--seconds", "soon"), "--seconds"),
    (("wait", "s1", "go", "--job", ""), "--job"),
    (("wait", "s1", "go", "--job", LONG), "--job"),
    (("wait", "s1", "go", "--job", "j\udcff"), "--job"),  # not UTF-8 on the command line
    (("wait", "s1", "", "--seconds", "1"), "TEXT"),
    (("wait", "s1", "t" * 8001, "--seconds", "1"), "TEXT"),
    (("wait", LONG, "go", "--seconds", "1"), "SESSION_ID"),
    (("wait", "", "go", "--seconds", "1"), "SESSION_ID"),
    (("wait", "s1", "go"), "--seconds"),  # neither
    (("wait", "s1", "go", "--seconds", "1", "--job", "j1"), "--seconds"),  # both
    (("add-principal", "user/../x"), "NAME"),  # a principal name is an identifier, never a path
    (("add-principal", ""), "NAME"),
    (("add-principal", "u" * 300), "NAME"),
    (("wait", "s1", "go", "--job", "j1", "--expires", "0"), "--expires"),
    (("wait", "s1", "go", "--job", "j1", "--expires", "nan"), "--expires"),
    (("wait", "s1", "go", "--job", "j1", "--expires", "-3"), "--expires"),
    (("wait", "s1", "go", "--seconds", "1", "--expires", "5"), "--expires"),  # a timer has no expiry
    (("complete-job", "s1", ""), "JOB_ID"),
    (("complete-job", "s1", LONG), "JOB_ID"),
    (("complete-job", LONG, "j1"), "SESSION_ID"),
    (("complete-job", "s1", "j1", "--result", "{"), "--result"),
    (("complete-job", "s1", "j1", "--result", "[" * 100_000), "--result"),  # nested beyond the parser
    (("complete-job", "s1", "j1", "--result", "NaN"), "--result"),
    (("complete-job", "s1", "j1", "--result", '{"x": Infinity}'), "--result"),
    (("complete-job", "s1", "j1", "--result", '"' + "r" * 20_000 + '"'), "--result"),
    (("complete-job", "s1", "j1", "--event-id", LONG), "--event-id"),
    (("complete-job", "s1", "j1", "--expected-version", str(2**70)), "--expected-version"),
    (("complete-job", "s1", "j1", "--expected-version", "-1"), "--expected-version"),
    (("send", "s1", "hi", "--expected-version", str(2**63)), "--expected-version"),
    (("send", "s1", ""), "TEXT"),
    (("send", LONG, "hi"), "SESSION_ID"),
    (("steer", "s1", ""), "TEXT"),
    (("show", LONG), "SESSION_ID"),
    (("events", LONG), "SESSION_ID"),
    (("events", "s1", "--after", str(2**63)), "--after"),
    (("approve", "s1", LONG), "APPROVAL_ID"),
    (("deny", "s1", "a1", "--expected-version", str(2**63)), "--expected-version"),
    (("cancel", LONG), "SESSION_ID"),
    (("new", LONG), "SESSION_ID"),
    (("new", "s+1"), "SESSION_ID"),  # a key the store takes but no journal name: its first turn crashed
    (("send", "s 1", "hi"), "SESSION_ID"),
    (("complete-job", "s1", "job/1"), "JOB_ID"),
    (("wait", "s1", "go", "--job", "../job"), "--job"),
    (("complete-job", "s1", "j1", "--event-id", "e 1"), "--event-id"),
]


@pytest.mark.parametrize(("args", "where"), BAD_ARGUMENTS, ids=[f"{a[0]}-{i}" for i, (a, _) in
                                                                 enumerate(BAD_ARGUMENTS)])
def test_a_malformed_argument_is_a_usage_error_naming_it_before_any_system_is_reached(args, where):
    code, out = run(*args)
    assert code == 2, out
    assert "cannot reach a system" not in out and "Traceback" not in out, out
    assert where in out, out


def test_well_formed_arguments_pass_to_the_system():
    """The same commands, well-formed, get as far as reaching for the system (none runs here: exit 5)."""
    for args in (("wait", "s1", "go", "--seconds", "0.5"), ("wait", "s1", "go", "--job", "build-7"),
                 ("complete-job", "s1", "build-7", "--result", '{"ok": true, "n": [1, 2.5]}', "--event-id", "e1",
                  "--expected-version", "3"), ("send", "s1", "hi", "--expected-version", "0")):
        code, out = run(*args)
        assert code == 5 and "cannot reach a system" in out, (args, out)


@pytest.mark.multiproc
@pytest.mark.slow
def test_wait_and_complete_job_naming_the_wrong_thing_are_refused_by_the_running_system(actor_system_factory,
                                                                                        tmp_path):
    """Well-formed arguments that name an unknown job, another session or a stale version: the system refuses
    them (exit 2, a one-line reason) and the session stays where it was."""
    from ouroactors.sessions import Sessions

    from ..e2e.cli_helpers import cli
    from .session_door_support import agent_tree, script

    data = tmp_path / "node"
    system = actor_system_factory(data_dir=data)
    system.start_tree(agent_tree(str(tmp_path)))
    sessions = Sessions(system)
    sessions.new("s1", script(tmp_path / "s1.toml"))
    assert cli("session", "wait", "s1", "carry on", "--job", "build-7", "--data-dir", str(data),
               cwd=tmp_path).returncode == 0
    waiting = sessions.show("s1")
    for args, says in ((("complete-job", "s1", "build-8"), "build-8"),
                       (("complete-job", "s1", "build-7", "--expected-version", str(waiting.state_version - 1)),
                        "stale"),
                       (("complete-job", "nobody", "build-7"), "nobody"),
                       (("wait", "s1", "again", "--seconds", "1"), "only a suspended session waits"),
                       (("wait", "nobody", "x", "--seconds", "1"), "nobody")):
        done = cli("session", *args, "--data-dir", str(data), cwd=tmp_path)
        assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr, (args, done.stderr)
    shown = sessions.show("s1")
    assert (shown.state, shown.state_version, shown.rejections) == (waiting.state, waiting.state_version, 2)
