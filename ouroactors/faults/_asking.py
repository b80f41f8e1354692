"""Asks that cannot receive another ask's late answer.

Thespian's external ``ask`` returns the next message that reaches the caller's endpoint: after an
ask times out, its late answer is what the *next* ask on that endpoint returns (measured: a
``RecordSettled`` can get a late ``LedgerAnswer`` for an earlier ``RecordStarted``; ``trees()`` can
get a list of ``ChildInfo``). Fault injection makes timeouts common, so the harness never asks on a
shared endpoint: :func:`isolated` gives a view of the system whose every ask goes through a private
endpoint that is closed after the block, and a late answer to it is dropped.
"""

from __future__ import annotations

import contextlib
import copy
import threading
from collections.abc import Iterator
from typing import Any, TypeVar

from ..core.errors import OuroactorsError
from ..system.handle import ActorSystem

T = TypeVar("T")


class WrongAnswer(OuroactorsError):
    """An ask was answered with something that is no answer to it: its address reached another actor (a dead
    actor's port, bound again by whoever came next). As far as the harness can tell, the actor asked is gone."""


def expect_answer(answer: Any, kind: type[T], path: str) -> T:
    """``answer`` if it is a ``kind``, else :class:`WrongAnswer` naming what came from ``path``."""
    if not isinstance(answer, kind):
        raise WrongAnswer(f"{path} answered {type(answer).__name__}, not {kind.__name__}")
    return answer


@contextlib.contextmanager
def isolated(system: ActorSystem) -> Iterator[ActorSystem]:
    """A view of ``system`` asking through its own private endpoint for the length of the block."""
    if system.base != "multiproc":
        yield system  # in-process: each ask takes only the answer carrying its own ref (see ..system._answers)
        return
    with system._thespian.private() as endpoint:
        view = copy.copy(system)
        view._thespian = endpoint
        view._asker = None  # its own endpoint after a timeout, never the system's
        view._teller = None  # its own at its first tell: the system's is not the view's to close
        view._teller_lock = threading.Lock()
        view._threads = None  # every thread of the view asks through its private endpoint (the system's others are
        # the system's to close)
        view._closed = True  # a view never shuts the system down
        try:
            yield view
        finally:
            view._close_endpoints()
