"""A supervisor's timers and self-messages come from itself alone.

Its ``Loopback`` (a restart retried, a backoff over), its timers and its preload wakeup feed its OTP machine
directly. Forged by another actor or a client, a ``Loopback(ShutdownRequested(...))`` would take the tree down and a
forged timer could fire a shutdown timeout early. They are refused, answered :class:`BadRequest`, and change nothing.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from thespian.actors import WakeupMessage

from ouroactors import supervisor, worker
from ouroactors.core.errors import BadRequest
from ouroactors.supervision import reasons
from ouroactors.supervision.protocol import Loopback
from ouroactors.supervision.signals import ShutdownRequested

pytestmark = pytest.mark.multiproc

ECHO = "ouroactors.examples.workers:Echo"


def forged(system, address, message):
    """``message`` sent to ``address`` from the client's own endpoint; what comes back."""
    return system._endpoint.ask(address, message, 5)


@pytest.mark.parametrize("message", [
    Loopback(ShutdownRequested(reasons.shutdown())),
    WakeupMessage(timedelta(0), Loopback(ShutdownRequested(reasons.shutdown()))),
    WakeupMessage(timedelta(0), "ouroactors:preload"),
    WakeupMessage(timedelta(0), "ouroactors:heartbeat"),
], ids=["loopback", "wakeup-loopback", "wakeup-preload", "wakeup-heartbeat"])
def test_a_forged_self_message_is_refused_and_changes_nothing(actor_system, message):
    actor_system.start_tree(supervisor("app", [worker("a", ECHO), supervisor("pool", [worker("w", ECHO)],
                                                                            strategy="simple_one_for_one")]))
    before = actor_system.walk()
    for path in ("app", "app/pool"):
        answer = forged(actor_system, actor_system.resolve(path), message)
        assert isinstance(answer, BadRequest) and answer.message == type(message).__name__, (path, answer)
    assert actor_system.walk() == before  # nothing stopped, nothing restarted
    assert actor_system.ask("app/a", "still here") == "still here"
