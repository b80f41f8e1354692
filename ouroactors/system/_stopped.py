"""Has the worker an ask waits on stopped? Read from the system's event log, not asked of anybody.

An ask to a worker that is stopping — its supervisor terminating it (a ``rest_for_one`` restart after an earlier
sibling crashed, a shutdown) — can be taken by the worker's process and never answered: thespian drops what an
actor had not handled when it exits, and tells nobody but the supervisor. The caller then waited its whole timeout
(60 s for a session command: seen when ``session show`` ran while the workspace's crash restarted the session
directory). The supervisor logs every child's end (``exited``, ``terminated``) with its generation once the child
is down, so an ask that has had no answer for a while looks there (:func:`stopped_since`), from where the log ended
when the path was resolved: the generation it addressed has ended, so no answer will come.

A file read, not an ask: the handle's one endpoint is listening for the answer, and a second ask on it could take
that answer for its own. Only asks that have waited :data:`SLICE_S` look, so an answered ask costs nothing; one
that waits reads the log's new lines once a slice (a few microseconds). The slice was 0.5 s and a dropped ask's
grace followed it: an ask dropped by a worker another handle had just crashed took ~0.71 s to reach the next
incarnation (4 of 24 rounds in a probe). An ask proven unhandled (:meth:`AskWatch.unhandled`) skips the grace, and
with 0.1 s slices the worst of 40 such rounds took 0.11 s.

**Ended before it was asked.** A supervisor logs a child's end only once the child no longer handles anything (a
worker that crashed or is stopping refuses what comes; a killed one is gone), so an end whose line began before the
ask was sent (:meth:`Watch.ended_before`, against :func:`log_end` taken just before the send) proves the ask was
never handled: the caller may ask the next incarnation instead of reporting an outcome it does not know. So does
an end whose line says the worker had stopped handling messages (``stopped_ns``: the instant its exit report gave, on
the host's monotonic clock) before the ask was sent: an ask that reaches the process between that and its end
(another handle's crash, say, overtook this handle's ask) is refused or dropped there unhandled.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..core.procs import boot_id
from .marker import EVENTS

SLICE_S = 0.1  # an unanswered ask looks whether its worker stopped this often
GRACE_S = 0.2  # then listened this long more: an answer the worker sent before it stopped may be on its way
ENDS = frozenset({"exited", "terminated"})  # the events a supervisor logs when a child is down


def log_end(data_dir: str | os.PathLike[str]) -> int:
    """Where the event log of the system at ``data_dir`` ends now (0 when there is none yet): taken before a path
    is resolved, it is where a :class:`Watch` of the resolved worker starts."""
    try:
        return os.stat(Path(data_dir) / EVENTS).st_size
    except OSError:
        return 0


def _ends(chunk: bytes, path: str, generation: int) -> tuple[int, int | None] | None:
    """Where in ``chunk`` (whole lines of the log) the line begins that says the worker at ``path`` of
    ``generation`` is down, and when that worker stopped handling messages (``stopped_ns``; None if the line does
    not say, says it as anything but a positive integer, or on another host's clock: its ``boot`` is not this
    kernel's boot id); None if no line does."""
    needle = path.encode()
    begins = 0
    for line in chunk.split(b"\n"):
        at, begins = begins, begins + len(line) + 1
        if needle not in line:  # most lines are other actors': not decoded
            continue
        try:
            event = json.loads(line)
        except ValueError:  # a damaged line: not a proof of anything
            continue
        if not isinstance(event, dict) or event.get("kind") not in ENDS or event.get("path") != path:
            continue
        if event.get("generation") == generation:  # (an event's fields sit beside its base keys)
            stopped = event.get("stopped_ns")
            if type(stopped) is not int or stopped <= 0 or event.get("boot") != boot_id() or boot_id() is None:
                stopped = None  # not a stamp, or one of another host's (or boot's) monotonic clock
            return at, stopped
    return None


def stopped_since(events_path: str | os.PathLike[str], offset: int, path: str, generation: int) -> bool:
    """Whether the log, from ``offset`` on, says the worker at ``path`` of ``generation`` is down."""
    return Watch(events_path, offset, path, generation)()


class Watch:
    """:func:`stopped_since` for one incarnation, asked again and again (each ask of a handle or a ref that waits):
    it reads on from the last whole line it read, so a long-lived handle does not read the log again from where it
    was when the path was resolved; once it has seen the end, it says so for good."""

    def __init__(self, events_path: str | os.PathLike[str], offset: int, path: str, generation: int) -> None:
        self.events_path, self.offset, self.path, self.generation = events_path, offset, path, generation
        self.seen = False
        self.ended_at: int | None = None  # where the line saying so begins in the log, once seen
        self.stopped_ns: int | None = None  # when the worker stopped handling messages, if the line says

    def __call__(self) -> bool:
        if self.seen:
            return True
        try:
            with open(self.events_path, "rb") as log_file:
                log_file.seek(self.offset)
                chunk = log_file.read()
        except OSError:
            return False
        whole = chunk.rfind(b"\n") + 1  # a line still being written is read again next time, whole
        found = _ends(chunk[:whole], self.path, self.generation)
        if found is not None:
            self.ended_at, self.stopped_ns = self.offset + found[0], found[1]
        self.offset += whole
        self.seen = found is not None
        return self.seen

    def ended_before(self, offset: int | None, sent_ns: int | None = None) -> bool:
        """Whether that generation had stopped handling anything before the ask left: its end was being logged
        before the log reached ``offset`` (a :func:`log_end` taken just before the ask was sent), or the line says
        the worker stopped handling messages before ``sent_ns`` (``time.monotonic_ns()`` taken just before the send;
        one clock for every process of the host): an ask that reached its process after that was refused or dropped
        unhandled, however late the process ended."""
        if offset is not None and self.ended_at is not None and self.ended_at < offset:
            return True
        return sent_ns is not None and self.stopped_ns is not None and self.stopped_ns < sent_ns


class AskWatch:
    """A :class:`Watch` seen from one ask: whether the worker is down (called, as the watch), and whether it was
    down before this ask was sent (:meth:`unhandled`). An ask proven unhandled has no answer on its way: its wait
    ends without the grace an answer sent just before the worker stopped would need (:data:`GRACE_S`)."""

    def __init__(self, watch: Watch, sent_at: int | None, sent_ns: int | None) -> None:
        self.watch, self.sent_at, self.sent_ns = watch, sent_at, sent_ns

    def __call__(self) -> bool:
        return self.watch()

    def unhandled(self) -> bool:
        return self.watch.ended_before(self.sent_at, self.sent_ns)


def watch(data_dir: str | os.PathLike[str], offset: int, path: str, generation: int) -> Watch:
    """A :class:`Watch` of the log of the system at ``data_dir``."""
    return Watch(Path(data_dir) / EVENTS, offset, path, generation)


__all__ = ["ENDS", "GRACE_S", "SLICE_S", "AskWatch", "Watch", "log_end", "stopped_since", "watch"]
