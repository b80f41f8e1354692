"""An answer that cannot travel between processes, and a handler that leaves by ``sys.exit()``.

Before, each left the asker waiting: a lambda or generator answer was dropped by thespian as "poison" in the worker's
log, and an exception answer that does not unpickle was dropped by the asker's transport, so the ask ran out its
whole timeout with nothing in the event log. A handler's ``sys.exit(3)`` ended the process under the worker, and its
supervisor logged the exit as ``killed``; ``sys.exit(0)`` and ``self.stop()`` without an answer left the asker to
find the end in the log and be told the request "may or may not have been handled".
"""

from __future__ import annotations

import time

import pytest

from ouroactors import (
    ActorCrashed,
    ActorStopped,
    StartFailed,
    UnsendableAnswer,
    supervisor,
    worker,
)

from .helpers import wait_until
from .odd_answers import EXITS_IN_START, ODD_ANSWERS, POKER, SENDS_THE_UNSENDABLE, STOPS_WHEN_POKED

ASK_S = 20.0  # an ask that waited this long (or ran out) shows the old behaviour
PROMPT_S = 5.0  # an answer sent back at once arrives well within this, even on a loaded machine


def _ask_promptly(system, path, message):
    """``system.ask``, failing the test if it took anywhere near the ask's timeout (the answer was lost)."""
    began = time.monotonic()
    try:
        return system.ask(path, message, timeout=ASK_S)
    finally:
        assert time.monotonic() - began < PROMPT_S, f"{message!r}: no prompt answer"


@pytest.mark.multiproc
@pytest.mark.parametrize(("message", "kind", "detail"), [
    ("lambda", "function", "Can't pickle local object"),
    ("generator", "generator", "cannot pickle 'generator' object"),
    ("bad exception", "TwoArgumentError", "missing 1 required positional argument: 'code'"),
    ("refuse badly", "TwoArgumentError", "missing 1 required positional argument: 'code'"),
])
def test_an_answer_that_cannot_travel_is_an_unsendable_answer_at_once(actor_system, message, kind, detail):
    actor_system.start_tree(supervisor("app", [worker("odd", ODD_ANSWERS)]))
    mark = actor_system.mark()
    with pytest.raises(UnsendableAnswer) as lost:
        _ask_promptly(actor_system, "app/odd", message)
    assert (lost.value.path, lost.value.answer_type) == ("app/odd", kind)
    assert detail in str(lost.value) and "handled the request" in str(lost.value)
    # the worker carries on, same incarnation: the request was handled (its count went on), nothing crashed
    assert _ask_promptly(actor_system, "app/odd", "count") == 2
    assert [event for event in actor_system.events.all()[mark:] if event.kind == "exited"] == []
    # through a reference, and from another worker's point of view the same: the answer is an error, not silence
    with pytest.raises(UnsendableAnswer):
        actor_system.ref("app/odd").ask(message, timeout=ASK_S)


@pytest.mark.multiproc
def test_sys_exit_with_a_code_in_a_handler_is_a_crash_with_its_reason_not_a_kill(actor_system):
    actor_system.start_tree(supervisor("app", [worker("odd", ODD_ANSWERS)]))
    mark = actor_system.mark()
    with pytest.raises(ActorCrashed) as crashed:
        _ask_promptly(actor_system, "app/odd", "exit 3")
    assert "builtins.SystemExit: 3" in str(crashed.value)
    exited = actor_system.wait_for("exited", "app/odd", after=mark)
    assert exited.reason["kind"] == "crash" and exited.reason["exc_type"] == "builtins.SystemExit", exited.reason
    actor_system.wait_for("started", "app/odd", after=mark)
    assert _ask_promptly(actor_system, "app/odd", "count") == 1  # a new incarnation


@pytest.mark.multiproc
@pytest.mark.parametrize("message", ["exit", "exit 0", "stop"])
def test_a_handler_that_stops_its_worker_answers_its_asker_so(actor_system, message):
    """``sys.exit()``/``sys.exit(0)`` stop the worker normally (OTP's ``exit(normal)``): a transient child stays
    down. Its asker is told at once that the worker stopped while handling the request (it did handle it)."""
    actor_system.start_tree(supervisor("app", [worker("odd", ODD_ANSWERS, restart="transient")]))
    mark = actor_system.mark()
    with pytest.raises(ActorStopped) as stopped:
        _ask_promptly(actor_system, "app/odd", message)
    assert "stopped (normal) while handling this request" in str(stopped.value)
    assert actor_system.wait_for("exited", "app/odd", after=mark).reason == {"kind": "normal"}
    assert [child.status for child in actor_system.which_children("app")] == ["undefined"]


@pytest.mark.multiproc
def test_sys_exit_in_on_start_is_a_failed_start(actor_system):
    with pytest.raises(StartFailed) as failed:
        actor_system.start_tree(supervisor("app", [worker("bad", EXITS_IN_START)]))
    assert "builtins.SystemExit" in str(failed.value)


@pytest.mark.multiproc
def test_an_answer_over_the_frame_cap_is_an_unsendable_answer_at_once(actor_system_factory, monkeypatch):
    from ouroactors.system import _frames

    monkeypatch.setattr(_frames, "max_frame_bytes", 512 * 1024)  # inherited by the admin and every actor it forks
    system = actor_system_factory("multiproc")
    system.start_tree(supervisor("app", [worker("odd", ODD_ANSWERS)]))
    with pytest.raises(UnsendableAnswer, match="FrameTooLarge"):
        _ask_promptly(system, "app/odd", "too large")
    assert _ask_promptly(system, "app/odd", "count") == 2


@pytest.mark.multiproc
def test_a_worker_stopped_by_a_bare_message_sends_its_sender_nothing(actor_system):
    """Only a tagged request (a handle's ask) is surely awaited: a bare message may be an answer to one of the
    worker's own asks, or a notice. Answering it ``ActorStopped`` would hand its sender a message it never asked
    for (a coordinator stopping after grants' answer sent grants an error to handle)."""
    actor_system.start_tree(supervisor("app", [worker("target", STOPS_WHEN_POKED, restart="temporary"),
                                               worker("poker", POKER)], strategy="one_for_one"))
    mark = actor_system.mark()
    assert _ask_promptly(actor_system, "app/poker", "poke") == "poked"
    actor_system.wait_for("exited", "app/target", after=mark)
    assert _ask_promptly(actor_system, "app/poker", "seen") == []


@pytest.mark.multiproc
def test_a_message_a_worker_sent_that_could_not_be_delivered_is_logged_by_it(actor_system):
    """thespian hands the sender a PoisonMessage for a send it gave up on; the worker dropped it without a word, and
    whoever waited for the message's effect was left to guess."""
    actor_system.start_tree(supervisor("app", [worker("target", ODD_ANSWERS),
                                               worker("sender", SENDS_THE_UNSENDABLE)], strategy="one_for_one"))
    assert _ask_promptly(actor_system, "app/sender", "send") == "sent"
    log = actor_system.data_dir / "admin.out"
    wait_until(lambda: "app/sender: a generator it sent was not delivered" in log.read_text(), what="the warning")
