"""``ouroactors ask`` and ``tell``: a message from the shell to an actor of a running system, and its answer."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from ouroactors import supervisor, worker
from ouroactors.cli import main

from ..actor.helpers import COUNTER, ECHO, wait_until

pytestmark = pytest.mark.multiproc


def _cli(system: Any, *args: str) -> Any:
    return CliRunner().invoke(main, [*args, "--data-dir", str(system.data_dir)])


def test_ask_prints_the_answer_as_python_writes_it_or_as_json(actor_system: Any) -> None:
    actor_system.start_tree(supervisor("root", [worker("e", ECHO)]))
    for message, shown, as_json in (('"hello"', "'hello'", '"hello"'), ("7", "7", "7"),
                                    ('"7"', "'7'", '"7"'), ("hello", "'hello'", '"hello"'),
                                    ('{"k": [1, 2.5, null]}', "{'k': [1, 2.5, None]}", '{"k": [1, 2.5, null]}')):
        done = _cli(actor_system, "ask", "root/e", message)
        assert (done.exit_code, done.output.strip()) == (0, shown), done.output
        done = _cli(actor_system, "ask", "root/e", message, "--json")
        assert (done.exit_code, done.output.strip()) == (0, as_json), done.output


def test_tell_then_ask_and_a_crash_from_the_shell(actor_system: Any) -> None:
    actor_system.start_tree(supervisor("root", [worker("c", COUNTER)]))
    done = _cli(actor_system, "tell", "root/c", "incr")
    assert (done.exit_code, done.output.strip()) == (0, "sent to root/c")
    wait_until(lambda: actor_system.ask("root/c", "get") == 1, what="the told incr counted")
    crashed = _cli(actor_system, "ask", "root/c", "crash")
    assert crashed.exit_code == 2
    assert "ActorCrashed: root/c crashed" in crashed.output and "admin.out" in crashed.output
    again = _cli(actor_system, "ask", "root/c", "get")  # the restarted counter (a new process: its count is 0)
    assert (again.exit_code, again.output.strip()) == (0, "0"), again.output


def test_ask_refuses_what_it_cannot_send_and_names_what_is_missing(actor_system: Any) -> None:
    actor_system.start_tree(supervisor("root", [worker("e", ECHO)]))
    missing = _cli(actor_system, "ask", "root/nope", "1")
    assert missing.exit_code == 2 and "NoSuchActor: no actor at 'root/nope': root has no child 'nope'" in missing.output
    broken = _cli(actor_system, "ask", "root/e", '{"k": 1')  # a brace lost to the shell: refused, nothing sent
    assert broken.exit_code == 2 and "begins as JSON but is not JSON" in broken.output
    assert "'MESSAGE'" in broken.output
    for value in ("0", "-1", "nan", "inf", "1e400"):
        assert _cli(actor_system, "ask", "root/e", "1", "--timeout", value).exit_code == 2
    # paths an attacker or a typo could give: each a typed refusal naming it, and the actor goes on answering
    for path, said in ((f"root/{'x' * 100_000}", "BadRequest: bad request AdminCall.child_id: must be 1 to 1024"),
                       ("root/../e", "no actor at 'root/..': root has no child '..'"),
                       ("root/e\x00", "root has no child 'e\\x00'"), ("ROOT/e", "no running tree named 'ROOT'"),
                       ("", "NoSuchActor: empty path")):
        refused = _cli(actor_system, "ask", path, "1")
        assert refused.exit_code == 2 and said in refused.output, refused.output[:300]
        assert len(refused.output) < 2000
    assert actor_system.ask("root/e", "still") == "still"
