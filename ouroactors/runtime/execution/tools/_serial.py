"""Per-path serialisation of file writes inside one runtime process (one trio run): :func:`serialised`.

The calls of one model turn run concurrently (a trio nursery), and ``edit`` is a read-modify-write: two edits of
one file that both read before either wrote would each write their own change onto the old text, and the second
rename would silently drop the first change while both report ``ok``. An ``(inode, size, mtime)`` check between
the read and the write cannot close that window (both checks may pass before either rename), so every call that
writes a file holds a lock keyed by the file's canonical resolved path across its read → check → write.

* **Keyed by the resolved path** (what :mod:`._paths` resolves, links followed as the tools follow them), so two
  spellings of one file share a lock. Two hard links of one inode do not (a write replaces the name it resolves
  to with a new inode, so they are two files from then on anyway).
* **Re-entrant per task.** The live effect port holds the lock from the call's intent (its digests before and
  after, recorded in the ledger's start and bound into an approval) through the tool's run, so what the ledger
  says the call meant is what it did; the tool's own ``run`` takes it again and finds it held by its task.
* **Never waits while holding another.** A task that already holds a path and needs a *different* one (the path
  resolved elsewhere since it was judged) gets it only if it is free at once, else :class:`PathBusy`: no two
  calls can wait for each other.
* **Uncontended, it does not yield** (no scheduler round for the usual lone call). Locks live in a
  :class:`trio.lowlevel.RunVar` (one table per trio run) and are dropped when no task holds or waits for them.

It orders the runtime's own calls. A change from outside the process (another program, a sandboxed shell
command of the same turn) is not ordered by it: ``edit`` still compares the file before its write with what it
read and refuses (``changed_during_edit``) when they differ.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import trio


class PathBusy(Exception):
    """A task holding one path lock asked for another path that a different call holds (never waited for)."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


@dataclass
class _Entry:
    lock: trio.Lock = field(default_factory=trio.Lock)
    users: int = 0  # tasks holding or waiting for it: the entry is dropped at 0


@dataclass
class _Table:
    locks: dict[str, _Entry] = field(default_factory=dict)
    held: dict[trio.lowlevel.Task, set[str]] = field(default_factory=dict)


_TABLE: trio.lowlevel.RunVar[_Table] = trio.lowlevel.RunVar("ouroactors_path_locks")


def _table() -> _Table:
    try:
        return _TABLE.get()
    except LookupError:
        table = _Table()
        _TABLE.set(table)
        return table


@asynccontextmanager
async def serialised(paths: Iterable[str]) -> AsyncIterator[None]:
    """Hold the write lock of every path (canonical, resolved) in a fixed order; see the module docstring."""
    table = _table()
    task = trio.lowlevel.current_task()
    mine = table.held.setdefault(task, set())
    outer = bool(mine)  # held before this call: then it never waits
    taken: list[str] = []
    try:
        for path in sorted(set(paths)):
            if path in mine:
                continue  # re-entrant: this task holds it already (the effect port around the tool's run)
            entry = table.locks.setdefault(path, _Entry())
            entry.users += 1
            try:
                try:
                    entry.lock.acquire_nowait()
                except trio.WouldBlock:
                    if outer:
                        raise PathBusy(path) from None
                    await entry.lock.acquire()
            except BaseException:
                _drop(table, path, entry)
                raise
            mine.add(path)
            taken.append(path)
        yield
    finally:
        for path in reversed(taken):
            entry = table.locks[path]
            entry.lock.release()
            mine.discard(path)
            _drop(table, path, entry)
        if not mine:
            table.held.pop(task, None)


def _drop(table: _Table, path: str, entry: _Entry) -> None:
    entry.users -= 1
    if entry.users == 0:
        del table.locks[path]


__all__ = ["PathBusy", "serialised"]
