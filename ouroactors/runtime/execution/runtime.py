"""The session runtime: one actor per live session, the thin shell around the turn loop.

A child of the ``execution`` supervisor (``simple_one_for_one``, so one per session), with its own runtime id and
generation. It owns the live conversation (:class:`~.loop.SessionLoop`), runs turns as activities in a trio loop
beside the actor (:mod:`.bridge` explains why a thread, and how the two sides talk) and keeps the output in a
bounded buffer behind a cursor (:mod:`.output`) that a reader drains and acknowledges.

What the actor does is decode, call, answer: ``OpenSession`` builds the live ports (provider, tools, journal, effect
path, steering, output) and journals ``session_opened`` (:mod:`.opening`, a mixin); ``SendText`` starts a turn as a
trio task and answers at once (``Busy`` if one runs); ``SteerTurn`` / ``InterruptTurn`` reach the running turn
between model calls (an interrupt also cancels the running model call or tools within the activity's cancellation);
``DrainOutput`` / ``AckOutput`` serve the reader while a turn runs. Everything the loop shares with these handlers
lives in the trio thread and is touched only through :meth:`~.bridge.TrioThread.call`.

Effects go grants → ledger → tool → settlement (:mod:`.effects`): decisions by message to the grants authority,
ledger records written from this process (:class:`~ouroactors.authorities.ledger.LedgerWriter`, fenced on the
storage and ledger generations this runtime was started against). A failure of the effect path's authorities
(stale stamp, commit outcome unknown) or any bug in a turn **crashes the runtime**: the supervisor restarts it and
recovery (the coordinator's job) decides what happens to the session. This process opens the node's LMDB
environment, so it creates no actor children (tool subprocesses are exec'd at once, never forked Python).

**A stalled loop ends the runtime.** Deadlines cancel a slow activity only while the trio loop runs; a loop
whose thread is blocked (see "The loop's pulse" in :mod:`.bridge`) would hold the session ``running`` forever —
the execution supervisor still sees a live child, and this actor's own handlers wait on the loop they call into.
So a watch thread checks the loop's pulse; a loop that has not run for ``stall_after_s`` (a tree may set it; 60 s
by default, far above any inline step) is reported (``runtime_stalled`` in the event log, with where its thread is
stuck) and the process exits at once with :data:`EXIT_STALLED` — the one way out that does not need the blocked
thread. Recovery treats it as any lost runtime: its unsettled effects are reconciled or surfaced before a
replacement resumes from the checkpoint.

**A runtime nobody opens ends itself** after ``unopened_limit_s`` (5 minutes by default): one started ahead as a
spare (:mod:`..coordinator.spares`) whose directory died, or one whose opener died before the open, ran nothing and
holds nothing worth keeping a process for.
"""

from __future__ import annotations

import logging
import os
import signal
import time
import traceback
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from thespian.actors import WakeupMessage, WatchMessage

from ...authorities.ledger.direct import LedgerWriter
from ...core import faults
from ...core.errors import BadRequest, OuroactorsError, SpecError
from ...supervision.events import EventWriter
from ...supervision.worker import Worker
from ..coordinator.trace import mark
from . import timing
from .bridge import Outbox, TrioThread
from .continuing import JournalRefused as JournalRefused  # re-exported: see .continuing
from .continuing import LeaseRefused as LeaseRefused
from .continuing import SessionContinuing
from .errors import Busy, NoActiveTurn, NotOpen, RuntimeRefusal, SteerNotRecorded
from .loop import LoopRefusal
from .messages import (
    REQUESTS,
    Accepted,
    Acked,
    AckOutput,
    Closed,
    CloseSession,
    DrainOutput,
    InterruptTurn,
    OutputReady,
    RuntimeStatus,
    RuntimeStatusRequest,
    SendText,
    SteerTurn,
    SubscribeOutput,
)
from .metrics import FIELD as METRICS_FIELD
from .opening import OPENED as OPENED  # re-exported: registered beside the open that reaches it
from .opening import SessionOpening, _Live
from .output import DEFAULT_CAPACITY
from .providers import ProviderConfigError, ScriptFileError
from .rehearsal_turn import REHEARSE_TURN_AFTER_S, rehearse_turn
from .warming import REHEARSE_AFTER_S, preload, rehearse


def _quiet_child_exits() -> None:
    """Give SIGCHLD back its default (ignored, not reaped) in this process.

    thespian's actor processes catch SIGCHLD to notice dead *child actors*: each one opens a TCP connection to the
    actor's own socket to wake its loop. This process has no child actors (see the module docstring), only tool
    subprocesses, which their runners wait for on pidfds and reap themselves; the handler's only effect here was a
    connect, an accept and a liveness sweep on the actor's thread per tool call, competing with the turn for the GIL.
    """
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    except ValueError:  # not the main thread (an actor always runs on it; a test may not)
        pass


def _folded(earlier: Any, later: Any) -> Any:
    return earlier.then(later) if isinstance(earlier, OutputReady) else None


_BEGIN_LOOP = "runtime:begin-loop"  # a zero-delay wakeup's payload: start the trio loop once the start is reported
_UNOPENED = "runtime:unopened"  # a wakeup's payload: end the runtime if no session was opened on it by then
_REHEARSE = "runtime:rehearse"  # a wakeup's payload: warm the open's process-wide work if still unopened (.warming)
_REHEARSE_TURN = "runtime:rehearse-turn"  # ... and, still unopened later, a whole turn on scratch (.rehearsal_turn)


def _where(exc: BaseException) -> str:
    """The innermost frame that raised ``exc`` (``file:line in function``), as a crash reason names it."""
    frames = traceback.extract_tb(exc.__traceback__)
    return f"{frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else "?"


@dataclass(frozen=True)
class _TurnFailed:
    """The trio side tells the actor that a turn raised: the runtime must crash (sent to itself)."""

    detail: str


# Named boundaries for crash enumeration (ouroactors.faults.session_enumerate); free unless a plan is armed.
TEXT_RECEIVED = faults.register_point("runtime.text_received", "a turn's text reached the runtime, nothing started")
TURN_STARTED = faults.register_point("runtime.turn_started", "a turn was accepted, its loop not yet run")
TURN_SETTLED = faults.register_point("runtime.turn_settled", "a turn settled (journaled, output appended)")
OUTPUT_ACKED = faults.register_point("runtime.output_acked", "output up to a cursor was acked and dropped")


log = logging.getLogger("ouroactors.runtime")
STALL_AFTER_S = 60.0  # a loop that has not run for this long is stalled (see "A stalled loop ends the runtime")
EXIT_STALLED = 75  # the process's exit status when it ends a stalled loop
# A runtime nobody opened in this long ends itself (a normal exit: its transient child is not restarted). Far above
# any open's way (a lease may wait RECLAIM_WAIT_S for a reservation); it bounds how long a spare runtime (see
# ..coordinator.spares) outlives a directory that died holding it.
UNOPENED_LIMIT_S = 300.0


class Runtime(SessionOpening, SessionContinuing, Worker):
    """One live session; see the module docstring."""

    protocol = REQUESTS
    refusals = (RuntimeRefusal, SpecError, ProviderConfigError, ScriptFileError, LoopRefusal)

    @classmethod
    def on_preload(cls) -> None:
        """In the execution supervisor, before any runtime is forked: probe bubblewrap (it runs bwrap: ~15 ms), plan
        one command in each mode and rehearse a turn (:func:`.warming.preload`), so that every runtime inherits the
        probe, the sandbox's caches (the account database, the read-only view) and a process that has run a turn.
        A runtime is a fresh process for each message a session gets; each used to pay the probe and the plans when
        it opened, on the message's clock. The probe is then as old as the supervisor: a bwrap installed or broken
        later is seen by ``ouroactors sandbox check`` and by the next start of ``execution``."""
        preload()

    def on_start(self, capacity: int = DEFAULT_CAPACITY, network_private: tuple[str, ...] = (),
                 stall_after_s: float = STALL_AFTER_S, unopened_limit_s: float = UNOPENED_LIMIT_S) -> None:
        assert self.context is not None
        for name, value in (("stall_after_s", stall_after_s), ("unopened_limit_s", unopened_limit_s)):
            if not isinstance(value, int | float) or isinstance(value, bool) or not 0 < value < float("inf"):
                raise SpecError([(f"kwargs.{name}", f"got {value!r}; a number of seconds > 0")], "runtime")
        if self.context.base != "multiproc":
            raise OuroactorsError("the session runtime runs turns in a thread beside the actor: it needs the "
                                  f"multiproc base (this system is {self.context.base!r})")
        self.runtime_id = uuid.uuid4().hex
        self.capacity = capacity
        self.network_private = tuple(network_private)
        self.ledger = LedgerWriter.for_worker(self)  # a leaf: this process creates no actor children
        _quiet_child_exits()
        # the loop's thread is begun once the start is reported (_BEGIN_LOOP): see TrioThread
        self.trio = TrioThread(f"runtime:{self.path}", start=False)
        self.wakeupAfter(timedelta(0), payload=_BEGIN_LOOP)
        self.outbox = Outbox()  # the trio side's sends, performed on this actor's thread (see .bridge)
        self.watched_fds = (self.outbox.read_fd,)
        self.events = EventWriter(self.context.events_path, self.path, self.context.node_epoch, self.context.node)
        self.live: _Live | None = None
        self.stall_after_s = float(stall_after_s)
        self.trio.watch(self.stall_after_s, self._stalled)
        self.wakeupAfter(timedelta(seconds=unopened_limit_s), payload=_UNOPENED)
        self.wakeupAfter(timedelta(seconds=REHEARSE_AFTER_S), payload=_REHEARSE)
        self.wakeupAfter(timedelta(seconds=REHEARSE_TURN_AFTER_S), payload=_REHEARSE_TURN)

    def _stalled(self, stalled_s: float, where: str) -> None:
        """The loop has not run for ``stalled_s`` (called on the watch thread): report it and end the process."""
        session = self.live.session if self.live is not None else None
        why = (f"the turn loop of session {session!r} has not run for {stalled_s:.1f} s (limit "
               f"{self.stall_after_s:g} s); its thread is in {where}")
        try:
            self.events.write("runtime_stalled", None, {"session": session, "stalled_s": round(stalled_s, 3),
                                                        "where": where})
            log.error("%s: %s: ending the runtime", self.path, why)
        finally:
            os._exit(EXIT_STALLED)

    def on_stop(self, reason: Any) -> None:
        if hasattr(self, "trio"):
            self.trio.stop()
        if hasattr(self, "outbox"):
            self.outbox.close()
        if hasattr(self, "events"):
            self.events.close()
        if getattr(self, "wake_line", None) is not None:
            self.wake_line.close()

    # -- dispatch: requests by type, everything else is an answer from grants --------------------------------

    def on_message(self, message: Any, sender: Any) -> Any:
        if isinstance(message, WakeupMessage) and message.payload == _BEGIN_LOOP:  # only ours: Worker refuses others
            self.trio.begin()
            return None
        if isinstance(message, WakeupMessage) and message.payload in (_REHEARSE, _REHEARSE_TURN):
            if self.live is None:  # a spare, most likely: nobody has opened it yet (see .warming, .rehearsal_turn)
                assert self.context is not None  # set before any message (on_start)
                began = time.perf_counter()
                fields: dict[str, Any] = {"runtime_id": self.runtime_id}
                if message.payload == _REHEARSE_TURN:
                    fields["status"] = rehearse_turn()
                else:
                    rehearse(self.ledger.env, self.context.data_dir)
                fields["ms"] = round((time.perf_counter() - began) * 1e3, 3)
                self.events.write(f"runtime_rehearsed{'_turn' if 'status' in fields else ''}", None, fields)
            return None
        if isinstance(message, WakeupMessage) and message.payload == _UNOPENED:
            if self.live is None:  # nobody opened it: a spare whose directory is gone, an opener that died first
                log.info("%s: not opened within its limit: ending (it ran nothing)", self.path)
                self.events.write("runtime_unused", None, {"runtime_id": self.runtime_id})
                self.stop()
            return None
        if isinstance(message, WatchMessage):
            mark("outbox_take")
            for address, outgoing in self.outbox.take_merged(_folded):
                if isinstance(outgoing, _TurnFailed):
                    raise RuntimeError(f"a turn of session {self.live.session if self.live else '?'} failed: "
                                       f"{outgoing.detail}")
                self.send(address, outgoing)
                mark("outbox_sent", getattr(outgoing, "produced", ""))
            return None
        if isinstance(message, REQUESTS):
            return super().on_message(message, sender)
        grants = self.authorities.get("grants")
        # only the grants authority answers a grants request: anything else (a refusal a coordinator sent back to a
        # push, another actor's message) must never be taken for the verdict the turn waits for
        if self.live is not None and grants is not None and sender == grants.address \
                and self.trio.call(self.live.grants.answer, message):
            return None
        return super().on_message(message, sender)

    # -- the session ------------------------------------------------------------------------------------------

    def _open(self) -> _Live:
        if self.live is None:
            raise NotOpen(f"{self.path}: no session is open here")
        return self.live

    def handle_SendText(self, message: SendText, sender: Any) -> Accepted:
        live = self._open()
        faults.point(TEXT_RECEIVED)
        if live.running:
            raise Busy(f"session {live.session!r}: turn {live.loop.turns} is running; steer or interrupt it")
        live.running = True
        mark("start.text_received")
        turn = live.turn = live.loop.turns + 1
        self.trio.start(self._turn, live, message.text)
        return Accepted(turn)

    async def _turn(self, live: _Live, text: str) -> None:
        """One turn in the trio thread; an exception crashes the runtime (through a message to itself)."""
        try:
            self.events.write("turn_started", None, {"session": live.session, "turn": live.loop.turns + 1})
            live.stats.take()  # what an earlier turn that raised had counted is not this turn's
            faults.point(TURN_STARTED)
            outcome = await live.loop.run_turn(text)
            timing.dump()
            faults.point(TURN_SETTLED)
            self.events.write("turn_settled", None, {"session": live.session, "turn": outcome.turn,
                                                     "status": outcome.status, "reason": outcome.reason,
                                                     METRICS_FIELD: live.stats.take()})
        except Exception as exc:  # through the outbox: thespian's send is the actor thread's, never this one's
            log.error("%s: a turn of session %s failed", self.path, live.session, exc_info=True)  # the traceback
            self.outbox.post(self.myAddress, _TurnFailed(f"{type(exc).__name__}: {exc} at {_where(exc)}"))
        finally:
            live.running = False

    def handle_SteerTurn(self, message: SteerTurn, sender: Any) -> Accepted:
        """Answered once journaled (:meth:`.SessionLoop.receive_steer`) and queued, both in the turn's thread."""
        live = self._running()
        live.steering.check(message.text)
        if not self.trio.call(live.steering.accept, live.loop, live.turn, message.text, uuid.uuid4().hex[:16]):
            raise SteerNotRecorded(f"session {live.session!r}: the steer's acceptance could not be committed to the "
                                   "journal; it was not queued (send it again)")
        return Accepted(live.turn)

    def handle_InterruptTurn(self, message: InterruptTurn, sender: Any) -> Accepted:
        live = self._running()
        live.steering.interrupt(live.turn)  # not loop.turns: the turn may not have begun counting in its thread yet
        self.trio.call(live.loop.cancel_activity)
        return Accepted(live.turn)

    def _running(self) -> _Live:
        live = self._open()
        if not live.running:
            raise NoActiveTurn(f"session {live.session!r}: no turn is running")
        return live

    def handle_DrainOutput(self, message: DrainOutput, sender: Any) -> Any:
        live = self._open()
        return self.trio.call(live.channel.drain, message.after, message.limit)

    def handle_SubscribeOutput(self, message: SubscribeOutput, sender: Any) -> Accepted:
        live = self._open()
        if message.subscriber is not None and message.subscriber != sender:
            raise BadRequest("SubscribeOutput", "subscriber", "must be the sender itself (an actor subscribes only "
                             "itself: an adopting coordinator, never a third party)", repr(message.subscriber))
        if message.subscriber is None and live.subscriber is not None and sender != live.subscriber:
            raise BadRequest("SubscribeOutput", "subscriber", "None (unsubscribe) is asked by the subscriber only",
                             "None")
        live.subscriber = message.subscriber
        return Accepted(live.loop.turns)

    def handle_AckOutput(self, message: AckOutput, sender: Any) -> Acked:
        live = self._open()
        dropped = self.trio.call(live.channel.ack, message.cursor)
        faults.point(OUTPUT_ACKED)
        return Acked(message.cursor, dropped)

    def handle_CloseSession(self, message: CloseSession, sender: Any) -> Closed:
        live = self._open()
        if live.running and message.settle:  # else the stop cancels the turn unsettled (see CloseSession)
            self.trio.call(live.loop.cancel_activity)
        elif not live.running:  # opened and closed with no turn since: its session_opened is still only staged
            self.trio.call(live.loop.ports.journal.flush)
        self.events.write("runtime_closed", None, {"session": live.session, "runtime_id": self.runtime_id})
        self.stop()
        return Closed(live.session)

    def handle_RuntimeStatusRequest(self, message: RuntimeStatusRequest, sender: Any) -> RuntimeStatus:
        live = self.live
        if live is None:
            return RuntimeStatus(None, self.runtime_id, self.generation, False, 0, False, 0, 0)
        produced, acked = self.trio.call(lambda: (live.channel.buffer.produced, live.channel.buffer.acked))
        return RuntimeStatus(live.session, self.runtime_id, self.generation, True, live.loop.turns, live.running,
                             produced, acked)


__all__ = ["JournalRefused", "LeaseRefused", "Runtime"]
