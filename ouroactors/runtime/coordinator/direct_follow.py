"""Following a session's committed log from the subscriber's own process: read from LMDB, woken by a FIFO.

**Why.** Published through the coordinator, an event that is durable reaches a subscriber after two more
processes were scheduled and one thespian hop crossed: the coordinator wakes, reads the record back and sends
the events; the subscriber's endpoint receives them. On a box with two cores, where the runtime's turn and its
tool hold both, those waits are most of the publication latency. A subscriber on the node itself — the CLI's
``session events --follow``, a program given the data dir — can read the durable log instead: whoever commits to
it (the runtime carrying its events, the coordinator checkpointing, :mod:`.wake`) writes a byte to this
subscriber's FIFO after the commit returned, and the subscriber reads what is there.

**The same guarantees.** It reads only the committed log (:meth:`~.store.SessionStore.events`), by cursor, so it
resumes from any cursor with no gap and no duplicate, across coordinator and runtime restarts, and sees nothing
before its commit (a reader never sees an LMDB transaction that has not committed). A wake-up that is lost costs
latency only: the log is read again every :data:`POLL_S` regardless. It ends as the directory's follow does: at
an event of kind ``until``, when the session is terminal and everything is read, or after ``idle_timeout``.

**The price: LMDB in this process, while it follows.** The subscriber opens the node's environment (trust-checked
as every opener does) for the time it follows, and closes it when the last follow of this process ends — unless
another part of the process took the handle meanwhile (:func:`~ouroactors.authorities.storage.env.handed_out`):
then it is theirs to close. That matters because a multiproc actor system forks, and a forked child may neither use
nor reopen a handle its parent holds (``shared/notes/lmdb.md``): a program that follows a session and then starts a
system on the same data dir (a test restarting its system, a tool that follows and then boots) works, as long as
it does not start it *while* a follow is running in another thread — then the system's actors cannot open the
environment (the registry in :mod:`~ouroactors.authorities.storage.env` says why), and a warning names the
follow at the fork. This is the default of :class:`ouroactors.sessions.Sessions` on a multiproc system (the CLI's
``session events`` too); ``follow_direct=False`` follows through the directory instead.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ...authorities.storage.env import StorageConfig, close_env, handed_out, is_open, open_env
from ...core.errors import OuroactorsError
from .errors import CursorAhead, UnknownSession
from .record import PublishedEvent, SessionRecord
from .store import SessionStore
from .wake import SubscriberWake
from .workflow import is_terminal

__all__ = ["POLL_S", "follow", "state_of"]

POLL_S = 0.5  # the log is read at least this often while following, woken or not
BATCH = 1000

log = logging.getLogger("ouroactors.coordinator")


@dataclass
class _Borrowed:
    """The environment of one data dir while this process follows sessions in it."""

    store: SessionStore
    config: StorageConfig
    opened_here: bool  # opened for following: closed after the last follow, if nobody else took it meanwhile
    handed_out: int  # the registry's hand-out count right after that open
    following: int = 0


_lock = threading.Lock()
_borrowed: dict[str, _Borrowed] = {}


def _acquire(data_dir: Path) -> tuple[str, SessionStore]:
    config = StorageConfig.under(data_dir)
    key = os.path.realpath(config.path)
    with _lock:
        borrowed = _borrowed.get(key)
        if borrowed is None:
            opened_here = not is_open(config)
            store = SessionStore(open_env(config))
            borrowed = _borrowed[key] = _Borrowed(store, config, opened_here, handed_out(config))
        borrowed.following += 1
        return key, borrowed.store


def _release(key: str) -> None:
    with _lock:
        borrowed = _borrowed[key]
        borrowed.following -= 1
        if borrowed.following:
            return
        del _borrowed[key]
        if borrowed.opened_here and handed_out(borrowed.config) == borrowed.handed_out:
            close_env(borrowed.config)


def _before_fork() -> None:
    """A child forked now inherits the handles of the follows running (see the module docstring): say so."""
    for key, borrowed in list(_borrowed.items()):
        if borrowed.opened_here:
            log.warning("forking while %d follow(s) read %s: the child may not open that environment (start an "
                        "actor system before following, or after the follow ended)", borrowed.following, key)


def _in_child() -> None:
    """The parent's follows are not the child's (nor is a lock some other thread of the parent held at the fork)."""
    global _lock
    _lock = threading.Lock()
    _borrowed.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_in_child)


def follow(data_dir: str | Path, session_id: str, after: int = 0, *, follow: bool = True,
           idle_timeout: float | None = None, until: str | None = None,
           stop: threading.Event | None = None) -> Iterator[PublishedEvent]:
    """The committed events of ``session_id`` after cursor ``after``, in order, each once (see the module doc).
    ``stop``: set, the follow ends within :data:`POLL_S` (a server shutting down)."""
    key, store = _acquire(Path(data_dir))
    try:
        yield from _follow(store, data_dir, session_id, after, follow=follow, idle_timeout=idle_timeout, until=until,
                           stop=stop)
    finally:
        _release(key)


def state_of(data_dir: str | Path, session_id: str, after: int) -> tuple[str | None, bool]:
    """The state of ``session_id`` (None: no such session) and whether events after cursor ``after`` are committed;
    :class:`~.errors.CursorAhead` if ``after`` is beyond the session's committed cursor."""
    key, store = _acquire(Path(data_dir))
    try:
        record = store.get(session_id)
        _check_cursor(record, session_id, after)
        more = bool(store.events(session_id, after, 1))
        return (record.state.value if record is not None else None), more
    finally:
        _release(key)


def _check_cursor(record: SessionRecord | None, session_id: str, after: int) -> None:
    """Refuse a read after a cursor beyond the committed one (:class:`~.errors.CursorAhead`): from there, the events
    committed next (which take the cursors in between) would never be shown. The cursor never goes back, so one a
    reader was given is never beyond a record read after it."""
    if record is not None and after > record.committed_cursor:
        raise CursorAhead(session_id, after, record.committed_cursor)


def _follow(store: SessionStore, data_dir: str | Path, session_id: str, after: int, *, follow: bool,
            idle_timeout: float | None, until: str | None,
            stop: threading.Event | None = None) -> Iterator[PublishedEvent]:
    _check_cursor(store.get(session_id), session_id, after)
    wake = SubscriberWake.open(data_dir, session_id) if follow else None  # before the first read: no wake is lost
    try:
        cursor = after
        durable = after  # events up to this cursor are known to be on disk
        flush = True  # the first read; after it, only when no wake-up vouches for what was read (see below)
        quiet_since = time.monotonic()
        while True:
            events = store.events(session_id, cursor, BATCH)
            if wake is not None:
                durable = max(durable, wake.vouched)
            if events and events[-1].cursor > durable:
                # Another process's commit is visible a moment before its synced write returns (SessionStore.durable):
                # what no committer's wake-up vouched for is flushed here — or, woken, left for the wake-up of the
                # commit that wrote it, which comes once that commit returned.
                if flush:
                    store.durable()
                    durable = events[-1].cursor
                else:
                    events = [event for event in events if event.cursor <= durable]
            flush = wake is None
            for event in events:
                if event.cursor != cursor + 1:  # the log is contiguous; anything else is a bug worth stopping on
                    raise OuroactorsError(f"session {session_id!r}: event {event.cursor} after {cursor}: a gap")
                cursor = event.cursor
                yield event
                if until is not None and event.kind == until:
                    return
            if stop is not None and stop.is_set():
                return
            if events:
                quiet_since = time.monotonic()
                continue
            # the record only when the log had nothing new (decoding it costs more than reading the log)
            record = store.get(session_id)
            if record is None:
                raise UnknownSession(session_id)
            if not follow or is_terminal(record.state):
                if store.events(session_id, cursor, 1):
                    flush = True  # all there is (a terminal record's events are all in the log): flushed, not waited
                    continue
                if follow:
                    store.durable()  # the end is told only once the terminal record is on disk
                return
            wait = POLL_S
            if idle_timeout is not None:
                left = idle_timeout - (time.monotonic() - quiet_since)
                if left <= 0:
                    return
                wait = min(wait, left)
            if wake is not None:
                flush = not wake.wait(wait)  # a wait no wake-up ended: one may have been lost; flush, do not wait
            else:
                time.sleep(wait)  # no FIFO here: a poll, at the same period as the woken reader's floor
    finally:
        if wake is not None:
            wake.close()
