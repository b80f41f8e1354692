"""Structured supervision events: one JSON line each, appended to the system's event log.

Every supervisor writes the events about its own children (and itself) to ``events.jsonl`` in the
data directory with one ``O_APPEND`` write per event, so lines from many processes never
interleave. A reader outside the system (the handle, the CLI, a test) reads and waits on the file;
nothing depends on a live actor to answer, so the log also tells what happened to a system that
crashed.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..core import clock

log = logging.getLogger("ouroactors.events")


@dataclass(frozen=True)
class Event:
    """One supervision event. ``path`` is the child's tree path (or the supervisor's own)."""

    kind: str
    path: str
    supervisor: str
    child: str | None
    time_ns: int
    epoch: int
    node: str
    fields: dict[str, Any] = field(default_factory=dict)

    @property
    def reason(self) -> dict[str, Any] | None:
        return self.fields.get("reason")

    @property
    def generation(self) -> int | None:
        return self.fields.get("generation")

    @property
    def subject(self) -> str:
        """The actor the event is about: its ``path``, except for a fault that fired in an actor whose process holds
        a plan armed in another (a child forked from a supervisor the plan was armed in inherits it): the event is
        written by the plan's holder, and its ``actor`` field names where the point was reached."""
        actor = self.fields.get("actor")
        return actor if isinstance(actor, str) and actor else self.path

    def to_json(self) -> dict[str, Any]:
        # The base keys come last so a field can never overwrite them.
        return {
            **self.fields, "kind": self.kind, "path": self.path, "supervisor": self.supervisor,
            "child": self.child, "time_ns": self.time_ns, "epoch": self.epoch, "node": self.node,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Event:
        base = {"kind", "path", "supervisor", "child", "time_ns", "epoch", "node"}
        return cls(
            kind=data["kind"], path=data["path"], supervisor=data["supervisor"], child=data.get("child"),
            time_ns=data["time_ns"], epoch=data.get("epoch", 0), node=data.get("node", "local"),
            fields={k: v for k, v in data.items() if k not in base},
        )


class EventWriter:
    """Appends events for one supervisor; one ``write`` per line keeps lines whole.

    The file is opened for each event rather than held: a simulated system (many supervisors in one process,
    dropped without ``on_stop`` when they die) and a test process running hundreds of systems would otherwise
    keep a descriptor per writer — measured: 837 after the fault tests, past ``select``'s limit of 1024.
    Events are rare next to an open (a few µs).
    """

    def __init__(self, path: str, supervisor: str, epoch: int, node: str) -> None:
        self.path = path
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600))  # private, and there
        self.supervisor = supervisor
        self.epoch = epoch
        self.node = node

    def write(self, kind: str, child: str | None, fields: dict[str, Any]) -> None:
        if clock.simulated() and "pid" in fields:
            # A simulation runs in whatever process hosts it: its pid is no fact of the run, and
            # leaving it out keeps a replay's log identical byte for byte.
            fields = {k: v for k, v in fields.items() if k != "pid"}
        event = Event(
            kind=kind, path="/".join(p for p in (self.supervisor, child) if p),
            supervisor=self.supervisor, child=child, time_ns=clock.time_ns(), epoch=self.epoch,
            node=self.node, fields=fields,
        )
        line = json.dumps(event.to_json(), separators=(",", ":"), default=str) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def close(self) -> None:
        """Nothing is held open (kept for callers that close their writer)."""


def log_event(context: Any, path: str, kind: str, fields: dict[str, Any]) -> None:
    """One event of the actor at ``path`` in its system's event log (``context``: its ``SystemContext``; None, an
    actor not started by a supervisor: nothing is written)."""
    if context is not None:
        EventWriter(context.events_path, path, context.node_epoch, context.node).write(kind, None, fields)


class EventReader:
    """Reads an event log incrementally; ``wait_for`` polls with a deadline (no sleeps as sync)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""
        self.seen: list[Event] = []
        self.corrupt: list[bytes] = []  # lines that are not events: kept and logged, never fatal

    def poll(self) -> list[Event]:
        """Events appended since the last poll."""
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self._offset)
                chunk = handle.read()
        except FileNotFoundError:
            return []
        self._offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        fresh: list[Event] = []
        for line in lines:
            if not line.strip():
                continue
            try:
                fresh.append(Event.from_json(json.loads(line)))
            except (ValueError, KeyError, TypeError) as exc:
                # One bad line (a short write, a hand edit) must not lose the good ones around it.
                self.corrupt.append(line)
                log.warning("%s: skipping a line that is not an event (%s): %.200r", self.path, exc, line)
        self.seen.extend(fresh)
        return fresh

    def all(self) -> list[Event]:
        self.poll()
        return list(self.seen)

    def wait_for(
        self,
        predicate: Callable[[Event], bool],
        timeout: float = 10.0,
        *,
        after: int = 0,
        idle: Callable[[float], None] = time.sleep,
    ) -> Event:
        """The first event (from index ``after`` of everything seen) matching ``predicate``.

        ``idle`` is how to spend the time between polls: a plain sleep for a file watcher, or
        letting an in-process actor system run (the simple base only runs while called).
        """
        deadline = time.monotonic() + timeout
        delay = 0.001
        index = after
        while True:
            self.poll()
            while index < len(self.seen):
                event = self.seen[index]
                index += 1
                if predicate(event):
                    return event
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no matching event within {timeout}s in {self.path}")
            idle(delay)  # polling interval of a file watcher, not synchronisation
            delay = min(delay * 2, 0.02)

    def follow(self, stop: Callable[[], bool] | None = None, interval: float = 0.1) -> Iterator[Event]:
        while stop is None or not stop():
            fresh = self.poll()
            yield from fresh
            if not fresh:
                time.sleep(interval)
