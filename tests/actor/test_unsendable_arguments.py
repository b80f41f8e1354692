"""Arguments that cannot reach an actor's process are refused naming the child and the argument.

Before, a spec with a lambda or a lock in its ``kwargs`` (or in ``start_child``'s extra arguments) failed inside the
transport with a bare ``PicklingError: Can't pickle <function <lambda> ...>`` or ``TypeError: cannot pickle
'_thread.lock' object``, naming no child. Where messages travel pickled — multiproc, and the in-process base with
``pickle_messages`` (the plugin's ``simple_system``) — the handle now refuses them first with a ``SpecError``.
"""

from __future__ import annotations

import threading

import pytest

from ouroactors import ActorSystem, supervisor, worker
from ouroactors.core.errors import SpecError

from .helpers import ECHO


def _refused(start) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as refused:
        start()
    return list(refused.value.problems)


@pytest.mark.multiproc
def test_a_lambda_or_a_lock_in_a_specs_arguments_is_named(actor_system) -> None:
    tree = supervisor("app", [worker("ok", ECHO), supervisor("inner", [worker("w", ECHO, args=(1, threading.Lock()),
                                                                              kwargs={"f": lambda: 1})])])
    [(lock_at, lock), (f_at, f)] = _refused(lambda: actor_system.start_tree(tree))
    assert lock_at == "app/inner/w.args[1]" and lock.startswith("cannot be sent to the actor's process (lock)")
    assert f_at == "app/inner/w.kwargs['f']" and "(function)" in f
    assert actor_system.trees() == []  # nothing was started
    actor_system.start_tree(supervisor("pool", [worker("w", ECHO)], strategy="simple_one_for_one"))
    [(where, _)] = _refused(lambda: actor_system.start_child("pool", [threading.Lock()]))
    assert where == "pool: extra args[0]"


def test_on_the_in_process_base_it_depends_on_pickle_messages(simple_system, tmp_path) -> None:
    tree = supervisor("app", [worker("w", ECHO, kwargs={"f": lambda: 1})])
    [(where, _)] = _refused(lambda: simple_system.start_tree(tree))
    assert where == "app/w.kwargs['f']"
    shared = ActorSystem.start("simple", data_dir=tmp_path / "d")  # objects handed over: a lambda is fine there
    try:
        shared.start_tree(tree)
        assert shared.ask("app/w", "ping") == "ping"
    finally:
        shared.shutdown()
