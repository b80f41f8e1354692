"""Opening a session in its runtime: the config checked, the live ports built, the session continued.

A mixin of :class:`~.runtime.Runtime` (one actor per live session; its module docstring tells the whole story).
``OpenSession`` is the one request that builds anything: it parses the session's config and checks the workflow and
tool set it was pinned to (:mod:`.versions`, :mod:`.tool_set`), takes the root of the session's live lease
(:mod:`.continuing`, checked in the workspace's durable records), and builds the ports the turn loop runs on — the
provider, grants by message (:class:`~.live.ActorGrants`), the effect path (:mod:`.effects`), the journal, steering
and the output channel — then journals ``session_opened``. A tool call's events ride in the ledger commit that
records it (:mod:`.carried`), the journal's records in the ledger's start and settle commits.

**A session is continued, never begun again.** A runtime is started per turn and after a crash: a session that
already has a journal is re-derived through the loop first (:mod:`.continuing`: replay, nothing runs), and the
settled turn's last events a dead runtime withheld are emitted again, derived from the journal (:mod:`.tail`).
Whatever the log already holds of the turn the runtime continues is not published again (:mod:`.repeats`): its
output channel holds back the repeats and marks where the new runtime went on.

**An open is answered once.** The same open again (its opener lost patience with the first answer) gets the first
answer again, and nothing is opened twice. Everything the open built is kept in :class:`_Live`, which the
runtime's other handlers share. The refusals an open may answer (``LeaseRefused``, ``JournalRefused``) are
defined in :mod:`.continuing` and re-exported from :mod:`.runtime`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...authorities.grants.inline import InlineGrants
from ...authorities.grants.messages import ConsumeApproval, Decide, RequestApproval, WaitApproval
from ...authorities.grants.rules import Request
from ...core import faults
from ...core.errors import CorruptRecord, OuroactorsError
from ...supervision.calls import Tagged
from ...supervision.protocol import Stamped
from ..coordinator.publishing import ACK_EVERY
from ..coordinator.store import SessionStore
from ..coordinator.trace import mark
from ..coordinator.wake import WakeWriter
from ..sandbox import SandboxMode
from . import tool_set, versions
from .carried import CarriedOutput
from .config import SessionConfig, parse_session_config
from .effects import EffectSettings, LiveEffects
from .errors import AlreadyOpen
from .journal import Journal
from .live import ActorGrants, OutputChannel
from .loop import Ports, SessionLoop
from .messages import Opened, OpenSession, OutputReady
from .metrics import TurnStats
from .output import OutputBuffer, OutputEvent
from .ports import JournalWriter, ProviderModel, SteeringQueue, SystemClock, ToolsCatalog
from .providers import make_provider
from .reading import StoredRecord
from .repeats import Repeats, published_run
from .reuse import RecordedSteer, RedeliveringControl, ReusingModel, recorded_calls, recorded_steers
from .snapshot_rider import SnapshotRider, tail_hook
from .tail import SettledTail
from .tools.shell import warm as warm_shell

log = logging.getLogger("ouroactors.runtime")

if TYPE_CHECKING:
    from ...authorities.ledger.direct import LedgerWriter
    from ...supervision.events import EventWriter
    from ...supervision.protocol import SystemContext
    from ...supervision.signals import AuthorityEntry
    from .bridge import Outbox, TrioThread
    from .replay import ReplayReport


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
    turn: int = 0  # the turn this actor started last (the loop counts it only once the turn runs in its thread)
    stats: TurnStats = field(default_factory=TurnStats)  # the running turn's counts (runtime metrics)
    opened_with: tuple[str | None, int] = (None, 0)  # the open's lease and start cursor (a repeated open)
    opened: Opened | None = None  # the open's answer, given again to a repeated open
    journal: Journal | None = None


# Named boundaries for crash enumeration (ouroactors.faults.session_enumerate); free unless a plan is armed.
OPENED = faults.register_point("runtime.opened", "the session is open (journaled), the opener not yet answered")
# How long a turn's start may wait, staged, for the commit of its first tool call (SessionLoop.start_grace_s): ~20x
# what that takes with a scripted or local model (~1 ms from the turn's start to the first ledger start here), below
# a hosted model's first token, and too short for a follower to notice the turn began late. The price: a follower
# sees turn_started with the first tool call (measured +3 ms with the scripted model, bench_publication's
# turn_started row) or, with a slow model, at the grace's end.
START_GRACE_S = 0.02


class SessionOpening:
    """The runtime's ``OpenSession``; see the module docstring."""

    if TYPE_CHECKING:  # what the runtime provides
        live: _Live | None
        runtime_id: str
        capacity: int
        network_private: tuple[str, ...]
        ledger: LedgerWriter
        trio: TrioThread
        outbox: Outbox
        events: EventWriter
        path: str
        generation: int | None
        context: SystemContext | None
        authorities: Mapping[str, AuthorityEntry]

        def _leased_root(self, session: str, lease_id: str | None, config: SessionConfig) -> str | None: ...
        def _restore(self, loop: SessionLoop, session: str, tail: SettledTail,
                     snapshot: SnapshotRider) -> ReplayReport | None: ...

    def handle_OpenSession(self, message: OpenSession, sender: Any) -> Opened:
        mark("start.open_received")
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

        def send_grants(ref: str, payload: Any) -> None:
            self.outbox.post(grants_entry.address, Tagged(ref, Stamped(grants_entry.generation, payload)))

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
        journal = Journal(self.ledger.env, message.session_id, budget_bytes=config.limits.journal_budget_bytes)
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
        # a coordinator with no follower to serve is woken only when acks are due (see ..coordinator.quiet)
        self.wake_line.unacked = lambda cursor: cursor - channel.buffer.acked
        self.wake_line.ack_every = ACK_EVERY
        # a conversation snapshot rides in the journal's commit at the end of a turn, bound to its turn_settled, or
        # (a long replay's, staged by the open) in the journal's next commit (see .snapshot_rider)
        snapshot = SnapshotRider(self.ledger.env, session, journal)
        journal_port = JournalWriter(journal, (carried, snapshot))
        ports = Ports(model=ProviderModel(provider, on_call=stats.model_call), effects=effects,
                      journal=journal_port, clock=SystemClock(),
                      control=steering, sink=channel, catalog=ToolsCatalog(tuple(config.tools.enabled)))
        # The journal's records ride in the ledger's start and settle commits (see .effects): no flush of its own
        # before tools or model calls; it still commits at turn_settled and whenever a turn runs no tool.
        # The turn's start rides in its first tool call's start commit too, unless the model is slow (START_GRACE_S).
        loop = SessionLoop(session, config, ports, flush_before_tools=False, flush_before_model=False,
                           start_grace_s=START_GRACE_S)
        journal_port.on_settled = tail_hook(snapshot, loop, journal)
        snapshot.published = lambda: channel.published_turn
        tail = SettledTail(message.tail_turn)
        restored = self._restore(loop, session, tail, snapshot)
        settings.resumed = restored is not None
        if restored is not None:  # a turn it re-runs takes the model's recorded answers first (.reuse)
            self._reuse_recorded(ports, session, restored.unsettled, loop.turns + 1)
        runtime = {"runtime_id": self.runtime_id, "generation": self.generation, "pid": os.getpid()}
        # session_opened is staged, not committed: it rides in the next commit of the journal — the first turn's start,
        # which follows the open at once (or the close's flush) — one synced commit fewer on a message's way (a runtime
        # lost before that commit ran nothing, and leaves no record of its open but the event log's runtime_opened)
        self.trio.call(lambda: loop.open(runtime=runtime, flush=False))
        channel.repeats = self._repeats(session, message, loop.turns)
        if tail.settled:  # the settled turn's events the log does not hold, as the dead runtime emitted them (derived,
            def emit_withheld() -> None:  # nothing ran): the channel holds back those it does (.repeats)
                for kind, turn, data in tail.events:
                    for event in channel.append(kind, turn, data):
                        notify(event)

            self.trio.call(emit_withheld)
        self.live = _Live(session, config, loop, channel, steering, grants, subscriber, stats=stats,
                          opened_with=(message.lease_id, message.start), journal=journal)
        faults.point(OPENED)
        self.events.write("runtime_opened", None, {"session": session, "runtime_id": self.runtime_id,
                                                   "generation": self.generation, "root": root})
        self.live.opened = Opened(session, self.runtime_id, self.generation, channel.buffer.produced,
                                  tail=tail.settled)
        return self.live.opened

    def _repeats(self, session: str, message: OpenSession, settled: int) -> Repeats | None:
        """What the log holds of the turn this runtime continues — its settled tail, or the turn after the last
        settled one, which it runs again — so that the channel does not publish it again (:mod:`.repeats`). A log
        that cannot be read holds nothing back: a repeat is better than a gap."""
        if message.start == 0:
            return None
        turn = message.tail_turn or settled + 1
        try:
            events = SessionStore(self.ledger.env).turn_events(session, turn, message.start)
        except CorruptRecord as exc:
            log.warning("session %s: its log of turn %d cannot be read (%s): what a re-run repeats is published",
                        session, turn, exc)
            return None
        published = published_run(events, turn)
        return Repeats(turn, published, message.answered_asks) if published else None

    def _reuse_recorded(self, ports: Ports, session: str, unsettled: Sequence[StoredRecord], turn: int) -> None:
        """Answer the re-run of ``turn`` from the model results its unsettled runs recorded, and deliver the steers
        they delivered again (:mod:`.reuse`), each told in the event log (``model_call_reused``,
        ``steer_redelivered``: the journal record it took)."""
        steers = recorded_steers(unsettled, turn)
        if steers:
            def redelivered(steer: RecordedSteer) -> None:  # delivered: False — accepted, never delivered before
                self.events.write("steer_redelivered", None, {"session": session, "turn": turn,
                                                              "at_call": steer.at_call, "seq": steer.seq,
                                                              "delivered": steer.delivered})

            ports.control = RedeliveringControl(ports.control, turn, steers, on_redeliver=redelivered)
        recorded = recorded_calls(unsettled, turn)
        if not recorded:
            return

        def reused(turn: int, index: int, seq: int) -> None:
            self.events.write("model_call_reused", None, {"session": session, "turn": turn, "index": index,
                                                          "seq": seq})

        ports.model = ReusingModel(ports.model, turn, recorded, on_reuse=reused)
