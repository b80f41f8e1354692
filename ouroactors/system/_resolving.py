"""Resolving a tree path to an address: the supervisors on the way asked in turn, within the caller's deadline.

A mixin of :class:`~.client.SystemClient`. Each supervisor is asked which child holds the next part of the path
(``which_child``); what it says decides: a child running (its address, and its generation for a worker), restarting
later (``ChildRestarting``), not running (``NoSuchActor``), or no such child (``NoSuchActor`` naming the supervisor
that has none; a worker on the way, which has no children, ``NoSuchActor`` at once, never asked). A supervisor that
ends with the question in hand is seen in the event log (:mod:`._stopped`).

After a crash a handle knows a worker generation is down before its supervisor has handled the exit:
:meth:`Resolving._locate_past_down` resolves again until the supervisor names another incarnation (see
:meth:`~.client.SystemClient.ask`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ..core.errors import ChildNotFound, ChildRestarting, NoSuchActor
from ..core.generation_text import format_generation
from ..supervision.calls import AdminCall
from ..supervision.child_info import ChildInfo
from . import _stopped
from ._answers import STOPPED

if TYPE_CHECKING:
    from pathlib import Path

    from .host_protocol import TreeInfo


class NotRunning(NoSuchActor):
    """A child its supervisor names but does not run (``status``: starting, terminating, undefined): a
    :class:`~ouroactors.core.errors.NoSuchActor`, raised when a path resolves to it (and what ``ouroactors ask``
    names)."""

    def __init__(self, path: str, status: str) -> None:
        self.path, self.status = path, status
        super().__init__(f"{path} is not running ({_STATUS_MEANS.get(status, status)})")

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.__class__, (self.path, self.status))


_STATUS_MEANS = {  # what a status its supervisor gives means to someone who wanted to reach the child
    "undefined": "undefined: it ended and its supervisor did not restart it, or it is between a group's stop and "
                 "start",
    "starting": "starting: its on_start has not returned yet",
    "terminating": "terminating: its supervisor is stopping it",
}


PASSING = frozenset({"starting", "terminating", "undefined"})  # statuses a child crashed a moment ago goes through
UNDEFINED_GRACE_S = 1.0  # how long a child stays 'undefined' before that is taken as stopped for good, not a restart
DOWN_POLL_S = (0.002, 0.05)  # first and longest pause while a supervisor has not yet replaced a crashed worker


class Resolving:
    """See the module docstring."""

    if TYPE_CHECKING:  # what the client provides
        base: str
        data_dir: Path
        _down: dict[str, int]

        def trees(self) -> list[TreeInfo]: ...
        def _ask_raw(self, address: Any, message: Any, timeout: float, *, worker: bool = False,
                     gone: Any = None) -> Any: ...
        def _answer(self, answer: Any, what: str, timeout: float) -> Any: ...
        def _undelivered(self, answer: Any, asked: float, timeout: float) -> bool: ...

    def _locate(self, path: str, timeout: float = 10.0, deadline: float | None = None
                ) -> tuple[Any, ChildInfo | None]:
        """The address of the actor at ``path`` and what its supervisor says of it (``None`` for a root).

        Each supervisor on the way is asked which child holds the next part, ``timeout`` at most and never past
        ``deadline`` (an ask's own timeout). A supervisor that stops before it answers (it reached its intensity: its
        own supervisor restarts it, or the tree ends) took the question with it; its end in the event log
        (:mod:`._stopped`) ends the wait with :class:`~ouroactors.core.errors.NoSuchActor`, not a timeout.
        """
        if not isinstance(path, str):
            raise TypeError(f"an actor path is a str like 'app/worker', not {type(path).__name__} {path!r:.80}")
        parts = [p for p in path.strip("/").split("/") if p]
        if not parts:
            raise NoSuchActor("empty path")
        logged = _stopped.log_end(self.data_dir) if self.base == "multiproc" else None  # before anyone is asked
        tree = next((t for t in self.trees() if t.name == parts[0]), None)
        if tree is None or tree.status != "running":
            raise NoSuchActor(f"no running tree named {parts[0]!r}")
        address = tree.address
        info: ChildInfo | None = None
        for depth, part in enumerate(parts[1:], start=1):
            where = "/".join(parts[:depth])
            if info is not None and info.type != "supervisor":  # a worker has no children: nothing to ask it
                raise NoSuchActor(f"no actor at {'/'.join(parts[:depth + 1])!r}: {where} is a {info.type}, which has "
                                  "no children")
            gone = (_stopped.watch(self.data_dir, logged, where, info.generation)
                    if logged is not None and info is not None and type(info.generation) is int else None)
            left = timeout if deadline is None else max(min(timeout, deadline - time.monotonic()), 0.001)
            asked = time.monotonic()
            answer = self._ask_raw(address, AdminCall("which_child", part), left, gone=gone)
            if answer is STOPPED or self._undelivered(answer, asked, left):
                raise NoSuchActor(f"supervisor {where} stopped before it answered (its own supervisor restarts it, "
                                  f"or its tree is ending); nothing was asked of {path.strip('/')}")
            try:
                info = self._answer(answer, where, round(left, 3))
            except ChildNotFound:  # OTP's not_found, for an admin call; an address asked for: no such actor
                raise NoSuchActor(f"no actor at {'/'.join(parts[:depth + 1])!r}: {where} has no child {part!r}"
                                  ) from None
            here = "/".join(parts[: depth + 1])
            if info.status == "restarting":
                due = f"next attempt in {info.retry_in:.3f}s" if info.retry_in is not None else "retrying"
                raise ChildRestarting(here, due)
            if info.status == "undefined" and getattr(info, "waits_for", None) is not None:
                # a consumer stopped with its group, waiting for a sibling's backed-off restart to start it again
                raise ChildRestarting(here, f"down until {where}/{info.waits_for}'s restart starts it again")
            if info.status != "running":
                raise NotRunning(here, info.status)
            address = info.address
        return address, info

    def _locate_past_down(self, path: str, deadline: float | None) -> tuple[Any, ChildInfo | None]:
        """:meth:`_locate`, but never to a worker generation this handle knows is down (it answered its crash, or
        stopped without answering). Its supervisor names it for a moment more, until it has handled the exit, and
        then restarts it: until ``deadline`` (an ask's timeout), the path is resolved again while the supervisor
        names that generation or the child passes through a restart (:data:`PASSING`); then what it last said is
        raised. A restart the supervisor has scheduled for later (backoff) is ``ChildRestarting`` at once."""
        down = self._down.get(path)
        if down is None or deadline is None:
            return self._locate(path, deadline=deadline)
        pause, longest = DOWN_POLL_S
        undefined_since: float | None = None
        while True:
            problem: NoSuchActor
            try:
                address, info = self._locate(path, deadline=deadline)
            except NotRunning as exc:
                if exc.status not in PASSING:
                    raise
                if exc.status == "undefined":  # between a group's stop and its start, or stopped for good
                    undefined_since = undefined_since or time.monotonic()
                    if time.monotonic() - undefined_since > UNDEFINED_GRACE_S:
                        raise
                problem = exc
            else:
                if info is None or info.generation != down:
                    self._down.pop(path, None)
                    return address, info
                problem = NoSuchActor(f"{path}: generation {format_generation(down)} is down and its supervisor "
                                      "has not replaced it yet")
            if time.monotonic() + pause > deadline:
                raise problem
            time.sleep(pause)  # the supervisor's restart, polled until the caller's deadline
            pause = min(pause * 2, longest)


__all__ = ["DOWN_POLL_S", "PASSING", "UNDEFINED_GRACE_S", "NotRunning", "Resolving"]
