"""The session directory's commands in flight: forwarded with a ticket, forgotten once taken, looked at when not.

A mixin of :class:`~.directory.Sessions`; the decisions are :mod:`.in_flight`'s (why, and why forwarding again is
safe). Two ways a forward goes wrong end here:

* **a dead letter** — the coordinator's address was gone when the forward reached it (its supervisor may call a
  SIGKILLed child running for the few milliseconds before it handles the exit). The directory is thespian's
  dead-letter handler, so the forward comes back. Only a well-formed ``ForSession`` (checked as at the coordinator's
  door) carrying a command, for a session whose coordinator this directory started, is taken back: what any sender
  holding the system's secret could send itself. Any other dead letter is dropped, as thespian's default does.
  (Thespian hands dead letters to the last actor that asked for them only: a tree of the same system that asks
  for them too takes them from the directory.)
* **a forward nobody took** — delivered, but its coordinator's process died before the command's job began, or
  while it waited behind another: no ``Taken`` came. Seen at a look (:data:`~.in_flight.LOOK_AFTER_S` after the
  forward, backing off while the coordinator lives).

Either way the command goes to the coordinator's next incarnation once its supervisor names one, or its caller is
told to try again when none comes back. A command taken by a coordinator that ended before it answered is not
forwarded again (it may have done anything): its caller is told at once that its outcome is unknown
(``ActorCrashed``, as a coordinator that crashes in a command says itself), instead of waiting out its ask.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from thespian.actors import DeadEnvelope

from ...core.boundary import check_message
from ...core.errors import ActorCrashed, BadRequest
from ...supervision.calls import Asker
from ...supervision.protocol import AdminCall
from .calls import Ask, Job
from .in_flight import Coordinator, Forwarded, InFlight, Next, decide
from .messages import COMMANDS, ForSession, SpareRuntime, Taken, tagged_answer
from .reads import DirectoryError

log = logging.getLogger("ouroactors.coordinator")

LOOK = "sessions:look-in-flight"  # a wakeup's payload: look at the forwards not taken


def _age_s(entry: Forwarded) -> float:
    """How long ago ``entry`` was first forwarded."""
    return time.monotonic() - entry.sent


class Redelivery:
    """Commands in flight between the directory and the coordinators (see the module docstring)."""

    if TYPE_CHECKING:  # what the directory provides
        path: str
        authorities: Mapping[str, Any]
        keys: dict[str, str]
        serving: dict[str, Any]
        jobs: Any

        def send(self, address: Any, message: Any) -> None: ...
        def wakeupAfter(self, delay: timedelta, payload: Any = None) -> None: ...
        def _coordinators(self, call: AdminCall) -> Ask: ...
        def _served_by(self, session_id: str, address: Any) -> None: ...
        def _log_event(self, kind: str, fields: dict[str, Any]) -> None: ...

    in_flight: InFlight
    look_armed: float | None  # when the earliest pending look wakeup fires (None: none pending)

    def _send_command(self, caller: Asker, request: Any, address: Any, generation: Any,
                      spare: SpareRuntime | None = None) -> None:
        """Forward ``request`` of ``caller`` to the coordinator at ``address`` (child ``generation``), tracked until
        taken; the coordinator answers the caller as it asked (tagged or bare: ``ForSession.tag``)."""
        generation = int(generation) if isinstance(generation, int) else None
        ticket = self.in_flight.add(request.session_id, caller, request, address, generation, time.monotonic())
        self.send(address, ForSession(caller.address, request, spare, ticket, caller.tag))
        self._arm_look()

    def _answer_forwarded(self, caller: Asker, answer: Any) -> None:
        """Answer the caller of a forwarded command here (it was given up, or its outcome is unknown)."""
        self.send(caller.address, tagged_answer(caller.tag, answer))

    def _taken(self, message: Taken, sender: Any) -> BadRequest | None:
        """Believed from the coordinator the ticket went to; one not tracked (any more) is taken silently only from
        a coordinator this directory forwards to (a late word), and refused from anyone else."""
        known = message.ticket in self.in_flight.entries
        if message.returned:
            why = self.in_flight.returned(message.ticket, message.session_id, sender, time.monotonic())
            self._arm_look()
        else:
            why = self.in_flight.taken(message.ticket, message.session_id, sender, message.answered)
        if why is None and not known and sender not in self.serving.values():
            why = "is no command this directory forwarded to the sender"
        return None if why is None else BadRequest("Taken", "ticket", why, repr(message.ticket))

    def _arm_look(self) -> None:
        """One wakeup for the earliest look due (another only if a new look is due sooner)."""
        due = self.in_flight.next_look()
        if due is None or (self.look_armed is not None and self.look_armed <= due):
            return
        self.look_armed = due
        self.wakeupAfter(timedelta(seconds=max(0.0, due - time.monotonic())), payload=LOOK)

    def _look_woken(self) -> None:
        self.look_armed = None
        if self.in_flight.due(time.monotonic()):
            self.jobs.submit(self._look)
        else:
            self._arm_look()

    def _look(self) -> Job:
        """Look at each forward due: its session's coordinator as the supervisor names it decides (.in_flight)."""
        by_session: dict[str, list[int]] = {}
        for ticket, entry in self.in_flight.due(time.monotonic()):
            by_session.setdefault(entry.session_id, []).append(ticket)
        for session, tickets in by_session.items():
            key = self.keys.get(session)
            info = (yield self._coordinators(AdminCall("which_child", key))) if key is not None else None
            address = getattr(info, "address", None)
            generation = getattr(info, "generation", None)
            now_running = Coordinator(getattr(info, "status", None) == "running" and address is not None, address,
                                      int(generation) if isinstance(generation, int) else None)
            for ticket in tickets:
                pending = self.in_flight.entries.get(ticket)
                if pending is None:  # taken while the supervisor was asked
                    continue
                now = time.monotonic()
                decision = decide(pending, now_running, now)
                self.in_flight.looked(ticket, decision, now)
                self._carry_out(decision, pending, now_running, info)
        self._arm_look()

    def _carry_out(self, decision: Next, entry: Forwarded, now_running: Coordinator, info: Any) -> None:
        session = entry.session_id
        if decision is Next.FORWARD:
            log.info("%s: a command for %r was not taken by its coordinator, which is gone: forwarding it to the "
                     "next", self.path, session)
            self._log_event("command_forwarded_again", {
                "session": session, "command": type(entry.request).__name__,
                "why": "returned" if entry.returned else "dead_letter" if entry.dead else "not_taken",
                "after_s": round(_age_s(entry), 3)})
            self._served_by(session, now_running.address)
            self._send_command(entry.reply_to, entry.request, now_running.address, now_running.generation)
        elif decision is Next.GIVE_UP:
            self._log_event("command_given_up", {"session": session, "command": type(entry.request).__name__})
            self._answer_forwarded(entry.reply_to, DirectoryError(
                f"the coordinator of {session!r} died before it took the command and is not back "
                f"({getattr(info, 'status', info)!r}); try again"))
        elif decision is Next.UNKNOWN:
            self._log_event("command_outcome_unknown", {"session": session, "command": type(entry.request).__name__})
            key = self.keys.get(session, "?")
            self._answer_forwarded(entry.reply_to, ActorCrashed(
                f"{self.authorities['coordinator'].path}/{key}",
                "the session's coordinator ended while it ran the command, before it answered: whether the command "
                "took effect is unknown; send it again (a message's event id is recognised)"))
        elif decision is Next.FORGET:
            log.warning("%s: a command for %r was not taken by its coordinator in %.0f s: no longer tracked",
                        self.path, session, time.monotonic() - entry.sent)

    def on_stop(self, reason: Any) -> None:
        """Answer every tracked command that nobody will run now: one whose coordinator crashed before it began
        (returned) or that came back as a dead letter. This directory's replacement knows nothing of them (the
        coordinator supervisor's escalation restarts the directory too), and their callers would wait out their
        asks. A command a live coordinator may still run is left to it (answered twice, a command could run twice)."""
        for entry in [e for e in self.in_flight.entries.values() if e.dead and not e.taken]:
            self._answer_forwarded(entry.reply_to, DirectoryError(
                f"the session directory stopped ({getattr(getattr(reason, 'kind', None), 'value', reason)}) before "
                f"the command reached a coordinator of {entry.session_id!r} that could run it; send it again"))
        self.in_flight.entries.clear()
        super().on_stop(reason)  # type: ignore[misc]

    def _dead_letter(self, envelope: DeadEnvelope) -> None:
        """A command this directory forwarded to a coordinator that was gone: looked at again (module docstring)."""
        forwarded = envelope.deadMessage
        if not isinstance(forwarded, ForSession) or type(getattr(forwarded, "request", None)) not in COMMANDS:
            return  # not a command of ours (a lent follower is answered here after LEND_GRACE_S anyway)
        try:  # any process holding the secret may send a dead letter: checked as the coordinator's door would
            forwarded = check_message(forwarded)
        except BadRequest as bad:
            log.warning("%s: a dead letter that is no command of ours, dropped: %s", self.path, bad)
            return
        request, session = forwarded.request, forwarded.request.session_id
        if session not in self.keys:
            return  # not a session whose coordinator this directory started: nothing of ours to forward again
        log.info("%s: a command for %r reached no coordinator (gone): forwarding it again", self.path, session)
        if self.serving.get(session) == envelope.deadAddress:
            self.serving.pop(session)
        self.in_flight.came_back(forwarded.ticket, session, Asker(forwarded.reply_to, forwarded.tag), request,
                                 envelope.deadAddress, time.monotonic())
        self._arm_look()


__all__ = ["LOOK", "Redelivery"]
