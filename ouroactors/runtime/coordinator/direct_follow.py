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

**The price: LMDB in this process.** The subscriber opens the node's environment (once per process, trust-checked
as every opener does). A process that did must not start an actor system afterwards — a multiproc system forks,
and a forked child may not use the handle (``shared/notes/lmdb.md``): the registry in
:mod:`~ouroactors.authorities.storage.env` refuses it there. So this is opt-in (``Sessions(...,
follow_direct=True)``), taken by the CLI, whose process ends after following; a program that started its system
follows through the directory, the default.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

from ...core.errors import OuroactorsError
from .errors import UnknownSession
from .record import PublishedEvent
from .store import SessionStore
from .wake import SubscriberWake
from .workflow import is_terminal

__all__ = ["POLL_S", "follow"]

POLL_S = 0.5  # the log is read at least this often while following, woken or not
BATCH = 1000

_stores: dict[str, SessionStore] = {}


def _store(data_dir: Path) -> SessionStore:
    key = str(data_dir.resolve())
    store = _stores.get(key)
    if store is None:
        store = _stores[key] = SessionStore.open(data_dir)
    return store


def follow(data_dir: str | Path, session_id: str, after: int = 0, *, follow: bool = True,
           idle_timeout: float | None = None, until: str | None = None) -> Iterator[PublishedEvent]:
    """The committed events of ``session_id`` after cursor ``after``, in order, each once (see the module doc)."""
    store = _store(Path(data_dir))
    wake = SubscriberWake.open(data_dir, session_id) if follow else None  # before the first read: no wake is lost
    try:
        cursor = after
        quiet_since = time.monotonic()
        while True:
            events = store.events(session_id, cursor, BATCH)
            for event in events:
                if event.cursor != cursor + 1:  # the log is contiguous; anything else is a bug worth stopping on
                    raise OuroactorsError(f"session {session_id!r}: event {event.cursor} after {cursor}: a gap")
                cursor = event.cursor
                yield event
                if until is not None and event.kind == until:
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
                    continue  # committed between the two reads (a terminal record's events are all in the log)
                return
            wait = POLL_S
            if idle_timeout is not None:
                left = idle_timeout - (time.monotonic() - quiet_since)
                if left <= 0:
                    return
                wait = min(wait, left)
            if wake is not None:
                wake.wait(wait)
            else:
                time.sleep(wait)  # no FIFO here: a poll, at the same period as the woken reader's floor
    finally:
        if wake is not None:
            wake.close()
