"""Asks from several threads of one handle: each thread asks through an endpoint of its own.

A thespian endpoint hands the next message that reaches it to whoever listens on it. Two threads asking through
one endpoint at once took each other's answers; every ask accepts only the answer with its own ref (see
:mod:`._answers`) and dropped the other's, so the other thread waited out its whole timeout (found running twenty
``Sessions.send`` calls from twenty threads of one handle: several waited 60 s for a command that had completed).
``ouroactors run --metrics-port`` did the same: the scrape's ``walk`` in the server's thread beside the live table's
reads in the main one.

So the thread that made the handle keeps the handle's endpoint, and any other thread gets one of its own at its
first ask (one connection to the admin, ~2 ms), kept for its later asks — a stream's next answers come to the
endpoint that asked — and closed when the thread ends or the handle is closed. The in-process base runs its actors
inside the caller's thespian call, so there the handle's asks and tells take turns instead (``Answers._turns``).
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable
from typing import Any

from ..core.errors import ActorSystemError


def close_endpoint(endpoint: Any) -> None:
    """Close a thespian endpoint (its transport's sockets); None: there is none."""
    if endpoint is not None:
        with contextlib.suppress(Exception):
            endpoint._systemBase.transport.close()


class _Held:
    """One thread's endpoint, closed once the thread is gone (its thread-local storage is cleared) or renewed."""

    def __init__(self, endpoint: Any) -> None:
        self.endpoint = endpoint

    def close(self) -> None:
        endpoint, self.endpoint = self.endpoint, None
        close_endpoint(endpoint)

    def __del__(self) -> None:
        self.close()


class ThreadEndpoints:
    """The endpoints of a handle's other threads (see the module docstring); ``make`` opens a fresh one."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self.owner = threading.get_ident()
        self._make = make
        self._local = threading.local()
        self._held: weakref.WeakSet[_Held] = weakref.WeakSet()
        self._lock = threading.Lock()
        self.closed = False

    def is_owner(self) -> bool:
        return threading.get_ident() == self.owner

    def mine(self) -> Any:
        """This thread's endpoint, opened at its first use."""
        held = getattr(self._local, "held", None)
        if held is None or held.endpoint is None:
            try:
                made = self._make()
            except Exception as exc:  # the admin is gone, or refuses: said as the handle's other errors are
                raise ActorSystemError(f"this thread could not open an endpoint to the system's admin: {exc}") from exc
            held = _Held(made)
            with self._lock:
                if self.closed:  # the handle closed meanwhile: nothing may stay open behind it
                    held.close()
                    raise ActorSystemError("this handle is closed (shut down, or closed): it asks nothing more")
                self._held.add(held)
            self._local.held = held
        return held.endpoint

    def renew(self) -> None:
        """Give this thread a fresh endpoint at its next ask (after a timeout: a late answer then goes nowhere)."""
        held = getattr(self._local, "held", None)
        if held is not None:
            self._local.held = None
            held.close()

    def endpoints(self) -> list[Any]:
        with self._lock:
            return [held.endpoint for held in list(self._held) if held.endpoint is not None]

    def close(self) -> None:
        with self._lock:
            self.closed = True
            held, self._held = list(self._held), weakref.WeakSet()
        for each in held:
            each.close()


__all__ = ["ThreadEndpoints", "close_endpoint"]
