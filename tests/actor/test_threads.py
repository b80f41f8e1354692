"""One handle, many threads: every thread's ask gets its own answer, on either base.

Two threads asking through the handle's one endpoint took each other's answers, and each dropped the one that was
not its own (it carries another ref): the other thread waited out its whole timeout. Twenty ``Sessions.send``
calls from twenty threads had several wait 60 s for commands that had completed; ``run --metrics-port`` asked from
its server's thread beside the main one. Now each other thread asks through an endpoint of its own (multiproc) or
the calls take turns (in-process), see ``ouroactors.system._threads``.
"""

from __future__ import annotations

import gc
import threading

import pytest

from ouroactors import supervisor, worker

from .helpers import COUNTER, ECHO, wait_until

THREADS = 12
ASKS = 15
TIMEOUT_S = 15.0  # an answer taken by another thread shows as this thread's AskTimeout


def _from_threads(system) -> list[str]:
    problems: list[str] = []

    def asker(n: int) -> None:
        for i in range(ASKS):
            try:
                answer = system.ask("t/echo", ("thread", n, i), timeout=TIMEOUT_S)
            except Exception as exc:  # collected: the test names every thread that did not get its answer
                problems.append(f"thread {n} ask {i}: {type(exc).__name__}: {exc}")
                return
            if answer != ("thread", n, i):
                problems.append(f"thread {n} ask {i}: got {answer!r}")

    threads = [threading.Thread(target=asker, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return problems


@pytest.mark.multiproc
def test_asks_from_many_threads_of_one_handle_each_get_their_own_answer(actor_system):
    actor_system.start_tree(supervisor("t", [worker("echo", ECHO), worker("count", COUNTER)]))
    assert _from_threads(actor_system) == []
    # tells from many threads all arrive (through the one teller, taking turns)
    tellers = [threading.Thread(target=lambda: [actor_system.tell("t/count", "incr") for _ in range(10)])
               for _ in range(8)]
    for thread in tellers:
        thread.start()
    for thread in tellers:
        thread.join()
    wait_until(lambda: actor_system.ask("t/count", "get") == 80, what="every tell counted")
    # the endpoints of the threads that ended are closed with them: nothing stays open for a thread that is gone
    gc.collect()
    assert actor_system._threads is not None and actor_system._threads.endpoints() == []


def test_asks_from_many_threads_take_turns_in_process(simple_system):
    simple_system.start_tree(supervisor("t", [worker("echo", ECHO)]))
    assert _from_threads(simple_system) == []
