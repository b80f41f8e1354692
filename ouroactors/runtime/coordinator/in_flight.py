"""Commands the session directory forwarded and no coordinator has answered yet: the table, and what to do with each.

Pure (no thespian): :mod:`.redelivery` is the directory's shell around it.

**Why.** A command goes from the directory to its session's coordinator in a :class:`~.messages.ForSession`, and the
coordinator answers the caller itself. Two things can lose it on the way: the coordinator's address is dead (the
message comes back as a dead letter), or the message is delivered and the coordinator's process dies before the
command's job begins — a SIGKILL, ``os._exit``, an OOM kill; with commands queued behind a long one the window is
as long as that one — or while its job runs. No dead letter comes back then, and the caller waited out its whole
ask. So each forward carries a ticket; the coordinator says :class:`~.messages.Taken` when the command's job
begins, and again (``answered``) once it has answered the caller (also when it answers refusing or stopping — except
that a coordinator that crashed leaves the commands that never began with it unanswered, queued behind the one that
crashed or come after: the table forwards them to its replacement); and the directory looks at every ticket not
answered :data:`LOOK_AFTER_S` after the forward. The table (:func:`decide`):

============================  ==========================  ======================================================
the coordinator it went to    the command                 what the directory does
============================  ==========================  ======================================================
still runs                    not taken, or taken         waits: it will take it, or answer (looks back off to
                                                          :data:`LOOK_MAX_S`; forgotten after
                                                          :data:`FORGET_AFTER_S`)
another incarnation runs      not taken (dead letter,     forwards it there
                              or returned)
none runs                     not taken (or dead letter)  looks every :data:`WAIT_EVERY_S`, :data:`WAIT_LOOKS`
                                                          times, then tells the caller to try again
gone (another, or none)       taken, not answered         tells the caller its outcome is unknown (it may have
                                                          taken effect: send it again, a message's event id is
                                                          recognised)
============================  ==========================  ======================================================

**Why forwarding again is safe.** A command not taken never began: the coordinator sends ``Taken`` before its job
does anything. The one residue is a ``Taken`` sent and lost with its process (thespian transmits after the handler
returns): the command may have begun, and runs once more — a message's ``event_id`` is recognised (the caller hears
"duplicate"), a cancel or a suspend twice is what it was once; a steer could reach the model twice. Likewise an
answer that left a process whose ``answered`` notice did not: its caller hears twice (the second, "unknown", after
the real answer).

**Incarnations, not addresses.** A coordinator is known by its child generation, never by its address alone: an
address is a TCP port, and a dead coordinator's port may come back as its successor's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

LOOK_AFTER_S = 0.25  # a forward not answered this long after is looked at (most are answered within ms)
LOOK_MAX_S = 4.0  # while its coordinator lives, the looks back off to this apart
FORGET_AFTER_S = 120.0  # ... and a forward its living coordinator has not answered by then is forgotten (no ask
# waits that long: a session command's is a minute)
WAIT_EVERY_S = 0.1  # while no coordinator of its session runs, a forward is looked at this often ...
WAIT_LOOKS = 50  # ... this many times (its restart), then its caller is told to try again
LIMIT = 10_000  # forwards tracked at once; beyond, the oldest is forgotten (its command is tracked no longer)


class Next(str, Enum):
    """What a look decides for one forward not answered."""

    KEEP = "keep"  # the coordinator it went to still runs: it will take it, or answer
    FORWARD = "forward"  # another incarnation runs: forward it there
    WAIT = "wait"  # none runs now (restarting): look again soon
    GIVE_UP = "give_up"  # none came back: tell the caller to try again
    UNKNOWN = "unknown"  # taken by a coordinator that is gone before answering: tell the caller it is unknown
    FORGET = "forget"  # kept too long by a living coordinator: stop tracking it


@dataclass(frozen=True)
class Forwarded:
    """One command forwarded: where to, and when to look at it again."""

    session_id: str
    reply_to: Any  # the caller to answer (the directory keeps its Asker: address and tag)
    request: Any
    address: Any  # the coordinator it went to
    generation: int | None  # that coordinator's child generation (None: not known)
    sent: float
    look_at: float
    dead: bool = False  # it came back as a dead letter: its address is gone, whatever the supervisor still says
    waits: int = 0  # looks that found no coordinator running
    taken: bool = False  # the coordinator said its job began (it may have done anything since)
    returned: bool = False  # the coordinator crashed and said the command never began there (dead too)


@dataclass(frozen=True)
class Coordinator:
    """What the coordinators' supervisor says of the session's child (``which_child``), as a look needs it."""

    running: bool
    address: Any = None
    generation: int | None = None


def decide(entry: Forwarded, now_running: Coordinator, now: float) -> Next:
    """The table: what to do with ``entry`` given its session's coordinator as its supervisor names it now."""
    same = now_running.generation == entry.generation if entry.generation is not None and \
        now_running.generation is not None else now_running.address == entry.address
    if entry.taken and not (now_running.running and same):
        return Next.UNKNOWN  # the incarnation that took it is gone: it may have done anything
    if now_running.running and now_running.address is not None and not same:
        return Next.FORWARD
    if now_running.running and not entry.dead:
        return Next.FORGET if now - entry.sent >= FORGET_AFTER_S else Next.KEEP
    # not running, or the dead address still named: its supervisor has not handled the exit yet
    return Next.GIVE_UP if entry.waits + 1 >= WAIT_LOOKS else Next.WAIT


class InFlight:
    """The forwards not answered, by ticket (see the module docstring)."""

    def __init__(self, limit: int = LIMIT) -> None:
        self.entries: dict[int, Forwarded] = {}
        self.limit = limit
        self._last = 0

    def add(self, session_id: str, reply_to: Any, request: Any, address: Any, generation: int | None,
            now: float) -> int:
        """Track a forward about to be sent; its ticket (never 0: 0 is a forward nobody tracks)."""
        return self._put(Forwarded(session_id, reply_to, request, address, generation, now, now + LOOK_AFTER_S))

    def _put(self, entry: Forwarded) -> int:
        while len(self.entries) >= self.limit:
            del self.entries[next(iter(self.entries))]  # the oldest: dicts keep insertion order
        self._last += 1
        self.entries[self._last] = entry
        return self._last

    def taken(self, ticket: int, session_id: str, sender: Any, answered: bool) -> str | None:
        """The coordinator took ``ticket``'s command (``answered``: and answered its caller, so it is forgotten);
        why that is not believed (None: believed, or a ticket not tracked)."""
        entry = self.entries.get(ticket)
        if entry is None:
            return None  # forgotten, forwarded again, or never ours: nothing to forget
        if entry.session_id != session_id:
            return f"ticket {ticket} is a command of another session"
        if entry.address != sender:
            return f"ticket {ticket} went to another coordinator than the sender"
        if answered:
            del self.entries[ticket]
        else:
            self.entries[ticket] = replace(entry, taken=True)
        return None

    def returned(self, ticket: int, session_id: str, sender: Any, now: float) -> str | None:
        """The coordinator ``ticket`` went to crashed, and the command never began there: as a dead letter, looked at
        again at once (forwarded to the replacement); why that is not believed (None: believed, or not tracked)."""
        entry = self.entries.get(ticket)
        if entry is None:
            return None
        if entry.session_id != session_id:
            return f"ticket {ticket} is a command of another session"
        if entry.address != sender:
            return f"ticket {ticket} went to another coordinator than the sender"
        if entry.taken:
            return f"ticket {ticket} was taken: it began, and is not returned"
        self.entries[ticket] = replace(entry, dead=True, returned=True, look_at=now)
        return None

    def came_back(self, ticket: int, session_id: str, reply_to: Any, request: Any, address: Any,
                  now: float) -> None:
        """A forward came back as a dead letter: its address is gone; look at it again in :data:`WAIT_EVERY_S`."""
        entry = self.entries.pop(ticket, None)
        if entry is None or entry.session_id != session_id:  # untracked: the letter says all we know
            entry = Forwarded(session_id, reply_to, request, address, None, now, now)
        self._put(replace(entry, dead=True, look_at=now + WAIT_EVERY_S))

    def due(self, now: float) -> list[tuple[int, Forwarded]]:
        """The forwards to look at now."""
        return [(ticket, entry) for ticket, entry in self.entries.items() if entry.look_at <= now]

    def next_look(self) -> float | None:
        """When the earliest look is due (None: nothing tracked)."""
        return min((entry.look_at for entry in self.entries.values()), default=None)

    def looked(self, ticket: int, decision: Next, now: float) -> Forwarded | None:
        """Apply ``decision`` to ``ticket``: rescheduled (keep, wait) or dropped (the rest; the entry returned)."""
        entry = self.entries.get(ticket)
        if entry is None:
            return None
        if decision is Next.KEEP:
            pause = min(max(entry.look_at - entry.sent, LOOK_AFTER_S) * 2, LOOK_MAX_S)
            self.entries[ticket] = replace(entry, look_at=now + pause)
        elif decision is Next.WAIT:
            self.entries[ticket] = replace(entry, waits=entry.waits + 1, look_at=now + WAIT_EVERY_S)
        else:
            del self.entries[ticket]
        return entry


__all__ = ["FORGET_AFTER_S", "LOOK_AFTER_S", "LOOK_MAX_S", "WAIT_EVERY_S", "WAIT_LOOKS", "Coordinator",
           "Forwarded", "InFlight", "Next", "decide"]
