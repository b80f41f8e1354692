"""The session runtime: one actor per live session, the thin shell around the turn loop.

A child of the ``execution`` supervisor (``simple_one_for_one``, so one per session), with its own runtime id and
generation. It owns the live conversation (:class:`~.loop.SessionLoop`), runs turns as activities in a trio loop
beside the actor (:mod:`.bridge` explains why a thread, and how the two sides talk) and keeps the output in a
bounded buffer behind a cursor (:mod:`.output`) that a reader drains and acknowledges.

What the actor does is decode, call, answer: ``OpenSession`` builds the live ports (provider, tools, journal,
effect path, steering, output) and journals ``session_opened``; ``SendText`` starts a turn as a trio task and
answers at once (``Busy`` if one runs); ``SteerTurn`` / ``InterruptTurn`` reach the running turn between model calls
(an interrupt also cancels the running model call or tools within the activity's cancellation); ``DrainOutput`` /
``AckOutput`` serve the reader while a turn runs. Everything the loop shares with these handlers lives in the trio
thread and is touched only through :meth:`~.bridge.TrioThread.call`.

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
"""

from __future__ import annotations

import logging
import os
import signal
import uuid
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import msgpack
from thespian.actors import WatchMessage

from ...authorities.grants.inline import InlineGrants
from ...authorities.grants.messages import ConsumeApproval, Decide, RequestApproval, WaitApproval
from ...authorities.grants.rules import Request
from ...authorities.ledger.direct import LedgerWriter
from ...authorities.storage.env import db
from ...authorities.workspace.leases import lease_from_record
from ...core import faults
from ...core.errors import BadRequest, OuroactorsError, SpecError
from ...supervision.events import EventWriter
from ...supervision.protocol import Stamped
from ...supervision.worker import Worker
from ..coordinator.store import SessionStore
from ..coordinator.trace import mark
from ..coordinator.wake import WakeWriter
from ..sandbox import SandboxMode
from . import reading, timing, tool_set, versions
from .bridge import Outbox, TrioThread
from .carried import CarriedOutput
from .config import SessionConfig, parse_session_config
from .effects import EffectSettings, LiveEffects
from .errors import AlreadyOpen, Busy, NoActiveTurn, NotOpen, RuntimeRefusal
from .journal import Journal
from .live import ActorGrants, OutputChannel
from .loop import LoopRefusal, Ports, SessionLoop
from .messages import (
    REQUESTS,
    Accepted,
    Acked,
    AckOutput,
    Closed,
    CloseSession,
    DrainOutput,
    InterruptTurn,
    Opened,
    OpenSession,
    OutputReady,
    RuntimeStatus,
    RuntimeStatusRequest,
    SendText,
    SteerTurn,
    SubscribeOutput,
)
from .metrics import FIELD as METRICS_FIELD
from .metrics import TurnStats
from .output import DEFAULT_CAPACITY, OutputBuffer, OutputEvent
from .ports import JournalWriter, ProviderModel, SteeringQueue, SystemClock, ToolsCatalog
from .providers import ProviderConfigError, ScriptFileError, make_provider
from .replay import replay_session
from .tail import SettledTail
from .tools.shell import warm as warm_shell


class LeaseRefused(RuntimeRefusal):
    """The lease named at open is not this session's live lease on the configured workspace."""


class JournalRefused(RuntimeRefusal):
    """The session's journal cannot be continued by this runtime (it diverges from what this loop derives)."""


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


@dataclass(frozen=True)
class _TurnFailed:
    """The trio side tells the actor that a turn raised: the runtime must crash (sent to itself)."""

    detail: str


@dataclass
class _Live:
    """One open session, as the actor sees it (the objects themselves live in the trio thread)."""

    session: str
    config: SessionConfig
    loop: SessionLoop
    channel: OutputChannel
    steering: SteeringQueue
    grants: ActorGrants
    subscriber: Any
    running: bool = False
    stats: TurnStats = field(default_factory=TurnStats)  # the running turn's counts (runtime metrics)
    opened_with: tuple[str | None, int] = (None, 0)  # the open's lease and start cursor (a repeated open)
    opened: Opened | None = None  # the open's answer, given again to a repeated open


# Named boundaries for crash enumeration (ouroactors.faults.session_enumerate); free unless a plan is armed.
OPENED = faults.register_point("runtime.opened", "the session is open (journaled), the opener not yet answered")
TURN_STARTED = faults.register_point("runtime.turn_started", "a turn was accepted, its loop not yet run")
TURN_SETTLED = faults.register_point("runtime.turn_settled", "a turn settled (journaled, output appended)")
OUTPUT_ACKED = faults.register_point("runtime.output_acked", "output up to a cursor was acked and dropped")


log = logging.getLogger("ouroactors.runtime")
STALL_AFTER_S = 60.0  # a loop that has not run for this long is stalled (see "A stalled loop ends the runtime")
EXIT_STALLED = 75  # the process's exit status when it ends a stalled loop


class Runtime(Worker):
    """One live session; see the module docstring."""

    protocol = REQUESTS
    refusals = (RuntimeRefusal, SpecError, ProviderConfigError, ScriptFileError, LoopRefusal)

    def on_start(self, capacity: int = DEFAULT_CAPACITY, network_private: tuple[str, ...] = (),
                 stall_after_s: float = STALL_AFTER_S) -> None:
        assert self.context is not None
        if not isinstance(stall_after_s, int | float) or isinstance(stall_after_s, bool) or stall_after_s <= 0:
            raise SpecError([("kwargs.stall_after_s", f"got {stall_after_s!r}; a number of seconds > 0")], "runtime")
        if self.context.base != "multiproc":
            raise OuroactorsError("the session runtime runs turns in a thread beside the actor: it needs the "
                                  f"multiproc base (this system is {self.context.base!r})")
        self.runtime_id = uuid.uuid4().hex
        self.capacity = capacity
        self.network_private = tuple(network_private)
        self.ledger = LedgerWriter.for_worker(self)  # a leaf: this process creates no actor children
        _quiet_child_exits()
        self.trio = TrioThread(f"runtime:{self.path}")
        self.outbox = Outbox()  # the trio side's sends, performed on this actor's thread (see .bridge)
        self.watched_fds = (self.outbox.read_fd,)
        self.events = EventWriter(self.context.events_path, self.path, self.context.node_epoch, self.context.node)
        self.live: _Live | None = None
        self.stall_after_s = float(stall_after_s)
        self.trio.watch(self.stall_after_s, self._stalled)

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

    def handle_OpenSession(self, message: OpenSession, sender: Any) -> Opened:
        if self.live is not None:
            if (self.live.session, self.live.opened_with) == (message.session_id, (message.lease_id, message.start)) \
                    and self.live.opened is not None:
                # the same open again: its opener lost patience with the first answer (see the coordinator's
                # _open), so it is answered exactly as the first was (its tail too), and nothing is opened twice
                return self.live.opened
            raise AlreadyOpen(f"this runtime serves session {self.live.session!r}")
        assert self.context is not None
        config = parse_session_config(message.config, f"session {message.session_id}")
        versions.check(message.session_id, config.pins.workflow)  # the workflow it was pinned to, or refused
        tool_set.check(message.session_id, config.pins.tool_set, config.tools.enabled)  # and its tools' definitions
        root = self._leased_root(message.session_id, message.lease_id, config)
        provider = make_provider(config.model, on_retry=lambda notice: self.events.write(
            "model_retry", None, {"session": message.session_id, "attempt": notice.attempt,
                                  "status": notice.status, "reason": notice.reason, "delay_s": notice.delay_s}))
        grants_entry = self.authorities.get("grants")
        if grants_entry is None:
            raise OuroactorsError(f"{self.path}: no grants authority before this runtime in the tree")

        def send_grants(payload: Any) -> None:
            self.outbox.post(grants_entry.address, Stamped(grants_entry.generation, payload))

        def decide(request: Request, root: str | None) -> Decide:
            return Decide(request, root)

        def request_approval(session: str, tool: str, arguments: dict[str, Any], call_id: str) -> RequestApproval:
            return RequestApproval(session, tool, arguments, message.state_version)  # the version it runs under

        grants = ActorGrants(send_grants, message.session_id, decide, request_approval, WaitApproval, ConsumeApproval,
                             park=message.park_approvals, answered=message.answered)
        settings = EffectSettings(
            session=message.session_id, root=root, sandbox_mode=SandboxMode(config.sandbox.mode),
            data_dir=self.context.data_dir,
            authority={name: entry.generation for name, entry in self.authorities.items()
                       if entry.generation is not None},
            network_private=self.network_private)
        if root is not None and "shell" in config.tools.enabled:
            warm_shell(root, settings.sandbox_mode, self.context.data_dir)
        journal = Journal(self.ledger.env, message.session_id)
        stats = TurnStats()
        inline = InlineGrants(self.ledger.env)  # decisions in this process, recorded with the start
        inline.warm(message.session_id, root)  # the rules parsed at open, not in the turn's first tool call
        subscriber = message.subscriber
        session = message.session_id

        def push(events: tuple[OutputEvent, ...]) -> bool:
            target = self.live.subscriber if self.live is not None else subscriber  # SubscribeOutput may change it
            if target is None:
                return False
            self.outbox.post(target, OutputReady(session, self.runtime_id, events[-1].cursor, events))
            return True

        # a tool call's events ride in the ledger commit that records it (see .carried): one synced commit, not two
        self.wake_line = WakeWriter(self.context.data_dir, session)
        carried = CarriedOutput(SessionStore(self.ledger.env), session, self.runtime_id, self.generation, push,
                                wake=self.wake_line.wake)
        notify = carried.emitted
        effects = LiveEffects(settings, grants, self.ledger, on_event=lambda kind, fields: self.events.write(
            kind, None, {"session": message.session_id, **fields}), journal=journal, inline=inline, stats=stats,
            publication=carried)
        steering = SteeringQueue()
        channel = OutputChannel(OutputBuffer(capacity=self.capacity, start=message.start), notify)
        ports = Ports(model=ProviderModel(provider, on_call=stats.model_call), effects=effects,
                      journal=JournalWriter(journal, (carried,)), clock=SystemClock(),
                      control=steering, sink=channel, catalog=ToolsCatalog(tuple(config.tools.enabled)))
        # The journal's records ride in the ledger's start and settle commits (see .effects): no flush of its own
        # before tools or model calls; it still commits at turn_settled and whenever a turn runs no tool.
        loop = SessionLoop(session, config, ports, flush_before_tools=False, flush_before_model=False)
        tail = SettledTail(message.tail_turn)
        settings.resumed = self._restore(loop, session, tail)
        runtime = {"runtime_id": self.runtime_id, "generation": self.generation, "pid": os.getpid()}
        self.trio.call(lambda: loop.open(runtime=runtime))
        withheld = tail.withheld(message.tail_published)
        if withheld:  # the settled turn's last events, as the dead runtime emitted them (derived, nothing ran)
            def emit_withheld() -> None:
                for kind, turn, data in withheld:
                    notify(channel.buffer.append(kind, turn, data))

            self.trio.call(emit_withheld)
        self.live = _Live(session, config, loop, channel, steering, grants, subscriber, stats=stats,
                          opened_with=(message.lease_id, message.start))
        faults.point(OPENED)
        self.events.write("runtime_opened", None, {"session": session, "runtime_id": self.runtime_id,
                                                   "generation": self.generation, "root": root})
        self.live.opened = Opened(session, self.runtime_id, self.generation, channel.buffer.produced,
                                  tail=tail.settled)
        return self.live.opened

    def _restore(self, loop: SessionLoop, session: str, tail: SettledTail) -> bool:
        """Continue a session that already has a journal: the conversation after its last verified turn.

        A runtime is started per turn and after a crash, so it must not begin with an empty conversation (turn
        numbers would repeat, and with them effect ids). The journal is re-derived through the loop (replay: no
        tool, no write); a journal that diverges from this code cannot be continued honestly and is refused.
        """
        if reading.head(self.ledger.env, session) is None:
            return False
        report = self.trio.run(partial(replay_session, self.ledger.env, session, sink=tail))
        if report.divergence is not None:
            d = report.divergence
            raise JournalRefused(f"session {session!r}: its journal diverges from this runtime at seq {d.seq} "
                                 f"({d.field}); it cannot be continued — see `ouroactors journal replay {session}`")
        if report.state is not None:
            loop.restore(report.state)
        self.events.write("runtime_restored", None, {"session": session, "turns": report.verified_turns,
                                                     "boundary": report.boundary.reason if report.boundary else None})
        return True

    def _leased_root(self, session: str, lease_id: str | None, config: SessionConfig) -> str | None:
        """The canonical root of the session's live lease, checked in the workspace's durable records."""
        if lease_id is None:
            if config.workspace is not None:
                raise LeaseRefused(f"session {session!r} names workspace {config.workspace!r} but holds no lease: "
                                   "acquire one from the workspace authority and pass its lease_id")
            return None
        with self.ledger.env.begin() as txn:
            raw = txn.get(f"lease/{lease_id}".encode(), db=db(self.ledger.env, b"workspace"))
        if raw is None:
            raise LeaseRefused(f"lease {lease_id!r} does not exist")
        lease = lease_from_record(msgpack.unpackb(bytes(raw), raw=False))
        if lease.status != "active" or lease.session_id != session:
            raise LeaseRefused(f"lease {lease_id!r} is {lease.status} and belongs to session {lease.session_id!r}, "
                               f"not a live lease of {session!r}")
        if config.workspace is not None and os.path.realpath(config.workspace) != lease.root:
            raise LeaseRefused(f"lease {lease_id!r} covers {lease.root!r}, not the configured workspace "
                               f"{config.workspace!r}")
        return lease.root

    def _open(self) -> _Live:
        if self.live is None:
            raise NotOpen(f"{self.path}: no session is open here")
        return self.live

    def handle_SendText(self, message: SendText, sender: Any) -> Accepted:
        live = self._open()
        if live.running:
            raise Busy(f"session {live.session!r}: turn {live.loop.turns} is running; steer or interrupt it")
        live.running = True
        turn = live.loop.turns + 1
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
        except Exception as exc:
            self.send(self.myAddress, _TurnFailed(f"{type(exc).__name__}: {exc}"))
        finally:
            live.running = False

    def handle_SteerTurn(self, message: SteerTurn, sender: Any) -> Accepted:
        live = self._running()
        live.steering.steer(live.loop.turns, message.text)
        return Accepted(live.loop.turns)

    def handle_InterruptTurn(self, message: InterruptTurn, sender: Any) -> Accepted:
        live = self._running()
        live.steering.interrupt(live.loop.turns)
        self.trio.call(live.loop.cancel_activity)
        return Accepted(live.loop.turns)

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
