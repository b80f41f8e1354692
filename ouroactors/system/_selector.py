"""The selector thespian's TCP transport builds on every turn of its loop: poll, not epoll.

Thespian's ``TCPTransport._runWithExpiry`` makes a fresh ``selectors.DefaultSelector()`` on every turn of the
loop, registers every socket it holds and closes the selector again. On Linux that is epoll: one ``epoll_create``,
one ``epoll_ctl`` system call per socket and a ``close`` per turn. A supervisor keeps a socket open to each of its
children, so with a thousand children every message it handles paid about a thousand system calls; profiled while
starting children one by one at N=1000, registering and closing the epoll selector was ~35% of the
supervisor's time (the per-child slowdown ``termination.STOP_WINDOW`` mentions), and starting the children
took ~76 s.

``poll`` registers in memory (no system call) and hands the whole list to the kernel once, in the one ``poll``
call per turn. A descriptor that is not open is refused differently, though: epoll's ``register`` raises
``EBADF``, and thespian's loop relies on that to find a closed descriptor an actor asked it to watch (and its
``_check_fd`` probe uses the same selector). ``poll`` reports such a descriptor as ``POLLNVAL`` instead, so
:meth:`PollSelector.select` raises ``OSError(EBADF)`` for it: thespian takes the same path as before.

**A descriptor listed twice** (thespian 4.0.1 builds its read list from transmit intents awaiting an ack, incoming
sockets and open sockets, and its write list from intents ready to send: one socket may be in two of them). The
``select.select`` thespian used before took duplicates; a selector's ``register`` raises ``KeyError``, which the loop
does not catch, and the actor process died of it (seen once: a session runtime answering status asks from many
short-lived endpoints). :meth:`PollSelector.register` merges a second registration into the first (the events
or'ed), which is what ``select.select`` made of the duplicate.
"""

from __future__ import annotations

import errno
import math
import select
import selectors
import types
from typing import Any


class PollSelector(selectors.PollSelector):
    """``selectors.PollSelector`` whose ``select`` raises ``EBADF`` for a descriptor that is not open (as
    epoll's ``register`` does), instead of reporting it ready, and whose ``register`` takes a descriptor already
    registered as one registration with both events (see the module docstring)."""

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        try:
            return super().register(fileobj, events, data)
        except KeyError:  # listed twice: one registration, for what either listing asked
            known = self.get_key(fileobj)
            return self.modify(fileobj, known.events | events, known.data if data is None else data)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        # As selectors._PollLikeSelector.select (Python 3.11), plus the POLLNVAL check.
        ms = None if timeout is None else (0 if timeout <= 0 else math.ceil(timeout * 1e3))
        ready: list[tuple[selectors.SelectorKey, int]] = []
        try:
            fd_events = self._selector.poll(ms)  # type: ignore[attr-defined]
        except InterruptedError:
            return ready
        for fd, event in fd_events:
            if event & select.POLLNVAL:
                raise OSError(errno.EBADF, f"descriptor {fd} is not open")
            events = 0
            if event & ~select.POLLIN:
                events |= selectors.EVENT_WRITE
            if event & ~select.POLLOUT:
                events |= selectors.EVENT_READ
            key = self._fd_to_key.get(fd)  # type: ignore[attr-defined]
            if key:
                ready.append((key, events & key.events))
        return ready


def install(transport_module: Any) -> None:
    """Make ``transport_module`` (thespian's TCPTransport module) build :class:`PollSelector`\\ s; the
    ``selectors`` module itself, and everyone else using it, are left alone."""
    transport_module.selectors = types.SimpleNamespace(
        DefaultSelector=PollSelector, EVENT_READ=selectors.EVENT_READ, EVENT_WRITE=selectors.EVENT_WRITE,
    )
