"""The session directory (``agent/sessions``): creates sessions, serves reads, routes commands, sweeps at boot.

It sits after ``coordinator`` in the agent tree (rest_for_one), so whenever the coordinator subtree
restarts — and at every boot — the directory restarts after it and runs the **recovery sweep** over every
non-terminal session of this node (:meth:`~.store.SessionStore.list_recoverable`, a small projection): in
batch (:mod:`.sweep`, :mod:`.sweeping`), a session whose recovery needs an actor gets a coordinator child, which
adopts, replaces or parks (:mod:`.actor`); an idle one is left as it is (its coordinator starts with its next
command), and one that recovery must refuse is parked by the sweep itself. If the directory
alone restarted, coordinators are still running: it asks each running child which session it
serves (:class:`~.messages.WhichSession`) and starts only the missing ones, so a session never has
two coordinators racing on its record (the store's claim would stop one, but racing is waste).

Reads (``list``, ``show``, ``events``, the long poll) are answered from the durable store, scoped to what the reader
may read: :mod:`.reads`.

Commands for one session go to its coordinator wrapped in :class:`~.messages.ForSession`; the
coordinator answers the caller directly. The coordinator's address is looked up from its supervisor
on each command (a restarted coordinator has a new address; its child key stays).

**No command is lost on the way to a coordinator** that dies as it arrives (a dead letter) or before it began it
(no ``Taken`` came back): :mod:`.redelivery` forwards it again to the coordinator's next incarnation, or tells its
caller to try again.

**Spare runtimes** (``spare_runtimes``, a tree kwarg; ``supervision_trees/agent.toml`` keeps one): runtimes the
directory started ahead, offered with each command that may start a runtime so that its turn does not wait for a
process to start, and replaced right after; what is trusted, and how a stale one is handled: :mod:`.spares`.

A :class:`~.messages.Committed` nudge (and a :class:`~.messages.RuntimeStarted`, which only lets a spare refill
start) passes the door like a request and is taken only from the coordinator
the directory last forwarded that session's commands to (the only one that knows this directory's address), for
a cursor that is durable and not below the one it nudged before; anything else is refused with
:class:`~ouroactors.core.errors.BadRequest` naming the field. A nudge only makes followers read the durable log
sooner, so a refused one changes nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Generator
from datetime import timedelta
from typing import Any

from thespian.actors import DeadEnvelope, WakeupMessage

from ...core.errors import BadRequest, OuroactorsError, SpecError
from ...supervision.calls import Asker
from ...supervision.events import log_event
from ...supervision.protocol import AdminCall
from ...supervision.worker import Worker
from ..execution import tool_set, versions
from ..execution.config import parse_session_config
from ..execution.providers import make_provider
from .admission import already_cancelled, workspace_refusal
from .calls import Ask, Job, Jobs, TimedOut
from .configs import config_writer, get_config
from .errors import CursorAhead, SessionExists, UnknownSession
from .in_flight import InFlight
from .messages import (
    COMMANDS,
    DIRECTORY_REQUESTS,
    Committed,
    ListSessions,
    NewSession,
    ReadEvents,
    RuntimeStarted,
    Serving,
    ShowSession,
    SpareOffer,
    SpareRuntime,
    SpareWanted,
    StopReading,
    Taken,
    WhichSession,
)
from .principals import PrincipalCheck, Unverified
from .reads import FOLLOW, FOLLOW_TICK_S, LEND_GRACE_S, DirectoryError, DirectoryReads, Follower
from .record import PinnedVersions, SessionRecord
from .redelivery import LOOK, Redelivery
from .spares import REFILL_COLD_S, may_start_a_runtime, take_fresh
from .store import SessionStore
from .sweeping import Sweeper
from .trace import mark
from .views import view_of
from .workflow import State, is_terminal

log = logging.getLogger("ouroactors.coordinator")

# The node a session record names. The system's node name is its admin address, which changes at every start,
# so it cannot find "this node's sessions" after a restart; the LMDB environment, however, is the node's own (one
# per data dir, never shared between nodes), so every session in it is this node's: one stable name suffices.
STORE_NODE = "local"
MAX_SPARES = 8  # spare runtimes a directory may keep started (kwargs.spare_runtimes)
_REFILL = "sessions:refill-spares"  # a wakeup's payload: start the spares missing (.spares)




class Sessions(DirectoryReads, Redelivery, Sweeper, Worker):
    """The session directory; see the module docstring."""

    protocol = DIRECTORY_REQUESTS
    refusals = (DirectoryError, SessionExists, UnknownSession, CursorAhead, ValueError)

    def on_start(self, spare_runtimes: int = 0) -> None:
        assert self.context is not None
        for name in ("storage", "coordinator"):
            if name not in self.authorities:
                raise OuroactorsError(f"{self.path}: no {name!r} before the session directory in the tree")
        if not isinstance(spare_runtimes, int) or isinstance(spare_runtimes, bool) \
                or not 0 <= spare_runtimes <= MAX_SPARES:
            raise SpecError([("kwargs.spare_runtimes", f"got {spare_runtimes!r}; an integer from 0 to {MAX_SPARES}")],
                            "sessions")
        if spare_runtimes and "execution" not in self.authorities:
            raise SpecError([("kwargs.spare_runtimes", f"got {spare_runtimes}; spares are children of 'execution', "
                                                       "which is not before the session directory in the tree")],
                            "sessions")
        self.spare_target = spare_runtimes
        self.spares: list[tuple[SpareRuntime, float]] = []  # started ahead (and when), not offered yet (.spares)
        self.refill_due = False  # a refill job is queued or running, or waits for a coordinator's RuntimeStarted
        self.cold_refill: str | None = None  # the session whose coordinator's RuntimeStarted the refill waits for
        self.node = STORE_NODE
        self.store = SessionStore.open(self.context.data_dir, fence=self.authorities["storage"].generation)
        self.principals = PrincipalCheck(self.context.data_dir)  # who a request is from (.principals)
        self.jobs = Jobs(self.send, self.wakeupAfter)
        self.keys: dict[str, str] = {}  # session id -> its coordinator's child key
        self.serving: dict[str, Any] = {}  # session id -> the coordinator its commands were last forwarded to
        self.nudged: dict[str, int] = {}  # session id -> the cursor that coordinator last nudged
        self.followers: list[Follower] = []
        self.ticking = False  # one follow tick at a time (a Committed nudge may empty the list between ticks)
        self.swept: list[str] = []
        self.in_flight = InFlight()  # commands forwarded and not taken yet (.redelivery)
        self.look_armed = None
        self.handleDeadLetters(startHandling=True)  # a command forwarded to a coordinator just gone comes back
        self.jobs.submit(self._sweep)

    def _coordinators(self, call: AdminCall) -> Ask:
        return Ask(self.authorities["coordinator"].address, call, 30.0)

    # -- dispatch -----------------------------------------------------------------------------------------

    def on_message(self, message: Any, sender: Any) -> Any:
        if isinstance(message, WakeupMessage):
            if message.payload == FOLLOW:
                self.ticking = False
                self._serve_followers()
            elif message.payload == _REFILL:  # the coordinator did not say it started its runtime: refill anyway
                if self.cold_refill is not None:
                    self.cold_refill = None
                    self.jobs.submit(self._refill)
            elif message.payload == LOOK:  # forwards no coordinator has said it took (.redelivery)
                self._look_woken()
            else:
                self.jobs.offer(message.payload, None)
            return None
        if isinstance(message, Committed):  # a coordinator's nudge: its followers are answered now, not at a tick
            refused = self._refused_nudge(message, sender)
            if refused is not None:
                return refused
            self.nudged[message.session_id] = message.cursor
            self._serve_followers(message.session_id, frozenset(message.served))
            return None
        if isinstance(message, Taken):  # a coordinator began a command: no longer looked after here
            return self._taken(message, sender)
        if isinstance(message, SpareWanted):
            return self._spare_wanted(message, sender)
        if isinstance(message, RuntimeStarted):  # the runtime a cold command needed is started: the refill goes now
            refused = self._refused_sender("RuntimeStarted", message.session_id, sender)
            if refused is not None:
                return refused
            if self.cold_refill == message.session_id:
                self.cold_refill = None
                self.jobs.submit(self._refill)
            return None
        if type(message) in COMMANDS:  # answered as asked, tagged or bare, also by the coordinator (ForSession.tag)
            caller = self.asker_of(sender)
            self.jobs.submit(lambda: self._forward(message, caller))
            return None
        if isinstance(message, DeadEnvelope):
            self._dead_letter(message)
            return None
        if isinstance(message, NewSession):
            creator = self.asker_of(sender)
            self.jobs.submit(lambda: self._new(message, creator))
            return None
        if isinstance(message, ListSessions | ShowSession | ReadEvents | StopReading):
            return super().on_message(message, sender)
        if self.jobs.offer(message, sender):
            return None
        return super().on_message(message, sender)

    # -- the sweep ------------------------------------------------------------------------------------------

    def _sweep(self) -> Job:
        children = yield self._coordinators(AdminCall("which_children"))
        if isinstance(children, BaseException | TimedOut):
            raise OuroactorsError(f"the coordinator supervisor did not list its children: {children!r}")
        for child in children:
            if child.status == "running" and child.address is not None:
                serving = yield Ask(child.address, WhichSession(), 5.0)
                if isinstance(serving, Serving):
                    self.keys[serving.session_id] = child.id
                    self._served_by(serving.session_id, child.address)  # its readers are lent to it from now on
        sweep = self.store.list_recoverable(self.node)
        for corrupt in sweep.corrupt:
            log.error("%s: session %r: its recoverable projection is corrupt (quarantined); not started",
                      self.path, corrupt)
        yield from self._sweep_sessions([f for f in sweep.sessions if f.session_id not in self.keys])

    def _start(self, session_id: str) -> Generator[Ask, Any, Any]:
        mark("start.coordinator_asked")
        info = yield self._coordinators(AdminCall("start_child", extra_args=(session_id, self.myAddress)))
        mark("start.coordinator_started")
        if isinstance(info, BaseException | TimedOut):
            raise DirectoryError(f"could not start the coordinator of {session_id!r}: {info}")
        self.keys[session_id] = info.id
        # known from now on, not from the session's first command: a follower that comes before it is lent to the
        # coordinator (answered at its commits) instead of waiting here for a follow tick
        self._served_by(session_id, getattr(info, "address", None))
        return info

    def _served_by(self, session_id: str, address: Any) -> None:
        """``address`` is the coordinator of ``session_id`` now; a new one's nudges start afresh."""
        if address is not None and self.serving.get(session_id) != address:
            self.serving[session_id] = address
            self.nudged.pop(session_id, None)
            self._lend_waiting(session_id, address)

    # -- creation and commands ----------------------------------------------------------------------------

    def _new(self, request: NewSession, sender: Asker) -> Job:
        try:
            if not isinstance(request.config, dict):
                raise DirectoryError(f"session {request.session_id!r}: config is a table (dict), "
                                     f"not {type(request.config).__name__}")
            # the owner is whom the channel verified (.principals), never a name the request merely gives
            owner = self.principals.verify(request.principal, request.token)
            if isinstance(owner, Unverified):
                raise DirectoryError(f"session {request.session_id!r}: {owner}")
            config = parse_session_config(request.config, f"session {request.session_id}")
            # the model too, as the runtime will make it (a scripted model's file read and parsed): a typo there
            # refused now, not by the first message's open, which would fail the session
            make_provider(config.model)
            if config.workspace is not None:  # as a lease will judge it, now: else no turn of it could ever start
                refused = yield from workspace_refusal(self.authorities, config.workspace)
                if refused is not None:
                    given = config.workspace if len(config.workspace) <= 200 else config.workspace[:200] + "…"
                    raise DirectoryError(f"session {request.session_id!r}: workspace: {given!r}: {refused}")
            pins = config.pins
            try:  # the workflow version is pinned as it is now (``default``: this code's), never left to resolve later
                workflow = versions.check(request.session_id, pins.workflow)
            except versions.WorkflowUnavailable as exc:
                raise DirectoryError(f"session {request.session_id!r}: pins.workflow: got {pins.workflow!r}; "
                                     f"allowed: {', '.join(repr(v) for v in (versions.DEFAULT, *exc.provided))}"
                                     ) from None
            # the tool set too: ``default`` becomes the digest of its tools as this code defines them (.tool_set)
            try:
                tools = tool_set.resolve(request.session_id, pins.tool_set, config.tools.enabled)
            except ValueError as exc:  # a pin this code does not provide: refused as the workflow's is (bad input)
                raise DirectoryError(str(exc)) from None
            record = SessionRecord(
                session_id=request.session_id, node=self.node, state=State.SUSPENDED, state_version=0, revision=0,
                pinned=PinnedVersions(prompt=pins.prompt, model=pins.model, tools=tools,
                                      workflow=workflow, policy=pins.policy),
                principal=request.principal, tenant=request.tenant, channels=(request.channel,))
            if self.store.get(request.session_id) is not None:
                raise SessionExists(request.session_id)
            stored = {**request.config, "pins": {**(request.config.get("pins") or {}), "workflow": workflow,
                                                 "tool_set": tools}}
            # the record and its configuration in one commit: neither is ever stored without the other
            created = self.store.create(record, also=config_writer(self.store, request.session_id, stored))
            if created.kind != "committed":
                raise DirectoryError(f"session {request.session_id!r} was not created: {created}")
            yield from self._start(request.session_id)
            self.answer_asker(sender, view_of(created.value))  # type: ignore[union-attr]
        except (OuroactorsError, ValueError) as exc:  # a refusal, typed: a bare ValueError is no answer a CLI reads
            self.answer_asker(sender, exc if isinstance(exc, OuroactorsError) else DirectoryError(str(exc)))

    def _forward(self, request: Any, sender: Asker) -> Job:
        record = self.store.get(request.session_id)
        if record is None:
            self.answer_asker(sender, UnknownSession(request.session_id))
            return
        if is_terminal(record.state):
            self.answer_asker(sender, already_cancelled(request, record, self.principals)
                              or DirectoryError(f"session {request.session_id!r} is {record.state.value}"))
            return
        key = self.keys.get(request.session_id)
        if key is None:
            yield from self._start(request.session_id)
            key = self.keys[request.session_id]
        info = yield self._coordinators(AdminCall("which_child", key))
        address = getattr(info, "address", None)
        if address is None or getattr(info, "status", None) != "running":
            self.answer_asker(sender, DirectoryError(f"the coordinator of {request.session_id!r} is not running "
                                                     f"now ({getattr(info, 'status', info)!r}); try again"))
            return
        self._served_by(request.session_id, address)
        # a command that may start a runtime: it can be one started ahead
        spare = self._offer_spare(request.session_id) if may_start_a_runtime(request, record.state) else None
        self._send_command(sender, request, address, getattr(info, "generation", None), spare)

    # -- spare runtimes (.spares) ---------------------------------------------------------------------------

    def _offer_spare(self, session_id: str) -> SpareRuntime | None:
        """A spare for a runtime ``session_id``'s coordinator starts now (None: none kept), and the refill after it:
        as a job of its own, nothing on the command's way waits for it."""
        if not self.spare_target:
            return None
        spare = take_fresh(self.spares, time.monotonic())
        if not self.refill_due and len(self.spares) < self.spare_target:
            self.refill_due = True
            if spare is not None:
                self.jobs.submit(self._refill)
            else:  # the coordinator starts a runtime now: the spare must come after it (a newer generation),
                # so the refill waits for its RuntimeStarted (at most REFILL_COLD_S)
                self.cold_refill = session_id
                self.wakeupAfter(timedelta(seconds=REFILL_COLD_S), payload=_REFILL)
        return spare

    def _spare_wanted(self, message: SpareWanted, sender: Any) -> SpareOffer | BadRequest:
        """A turn the session's coordinator resumes itself (no command of a caller brought a spare with it): the
        offer goes to that coordinator alone, whose answer this is (a stranger is refused)."""
        refused = self._refused_sender("SpareWanted", message.session_id, sender)
        return refused if refused is not None else SpareOffer(self._offer_spare(message.session_id))

    def _refill(self) -> Job:
        try:
            while len(self.spares) < self.spare_target:
                info = yield Ask(self.authorities["execution"].address, AdminCall("start_child"), 30.0)
                if isinstance(info, BaseException | TimedOut) or getattr(info, "address", None) is None:
                    log.warning("%s: no spare runtime started: %r", self.path, info)
                    return
                self.spares.append((SpareRuntime(info.id, int(info.generation), info.address), time.monotonic()))
                self._spare_kept(info)
        finally:
            self.refill_due = False

    def _spare_kept(self, info: Any) -> None:
        """Log ``spare_kept``: the spare is offered from now on (its own ``runtime_rehearsed`` may come sooner)."""
        self._log_event("spare_kept", {"runtime": f"{self.authorities['execution'].path}/{info.id}",
                                       "generation": int(info.generation)})

    def _log_event(self, kind: str, fields: dict[str, Any]) -> None:
        """One event of this directory's in the system's event log."""
        log_event(self.context, self.path, kind, fields)

    def _refused_sender(self, what: str, session: str, sender: Any) -> BadRequest | None:
        """Why a coordinator's word about ``session`` is not taken from ``sender`` (None: it is that session's)."""
        if sender is None or self.serving.get(session) != sender:
            return BadRequest(what, "session_id", "is not a session whose commands the directory forwards "
                              "to the sender (only its coordinator nudges)", repr(session[:80]))
        return None

    def _refused_nudge(self, nudge: Committed, sender: Any) -> BadRequest | None:
        """Why ``nudge`` is not taken (see the module docstring), or None."""
        session = nudge.session_id
        refused = self._refused_sender("Committed", session, sender)
        if refused is not None:
            return refused
        record = self.store.get(session)
        if record is None:
            return BadRequest("Committed", "session_id", "is not a session of this node", repr(session[:80]))
        if nudge.cursor > record.committed_cursor:
            return BadRequest("Committed", "cursor", f"is beyond the durable cursor {record.committed_cursor} of "
                              f"{session!r} (a nudge follows a commit)", repr(nudge.cursor))
        if nudge.cursor < self.nudged.get(session, 0):
            return BadRequest("Committed", "cursor", f"goes back: {session!r} was nudged at cursor "
                              f"{self.nudged[session]} already", repr(nudge.cursor))
        return None

__all__ = ["FOLLOW_TICK_S", "LEND_GRACE_S", "DirectoryError", "Sessions", "get_config"]
