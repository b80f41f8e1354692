"""The supervisor actor: a thin thespian shell around :class:`~.machine.SupervisorCore`.

It decodes mailbox traffic into core inputs and carries out the commands the core returns. The
only knowledge it adds is how thespian behaves:

* A child reports *why* it is ending (``ChildExiting``) and then waits; the supervisor ends its
  process. So when ``ChildActorExited`` arrives the reason is already known, whatever order
  thespian delivers things in, and a death with no report is ``killed`` (SIGKILL, ``os._exit``).
* An ``ActorExitRequest`` means thespian is taking the system down: nothing is restarted.
* How thespian treats child *processes* — duplicate and lost exit notices, no kill, nodes lost
  without a word, children it waits for forever — and what the supervisor does about each is in
  :mod:`.processes` (the slots, the heartbeat and local pid checks, release and kill).
"""
from __future__ import annotations

import logging
import os
from datetime import timedelta
from typing import Any

from thespian.actors import Actor, ActorExitRequest, ChildActorExited, PoisonMessage, WakeupMessage

from ..core import boundary, clock
from ..core.errors import BadRequest, NoSuchActor, UnhandledMessage
from . import reasons
from .actor_paths import kind_problem
from .calls import admin_call_problem
from .events import EventWriter
from .faulting import arm_here
from .generations import generation_source
from .leftovers import log_offset
from .machine import SupervisorCore
from .processes import (
    _HEARTBEAT,
    ChildProcesses,
    _Slot,
)
from .processes import (
    HEARTBEAT_INTERVAL as HEARTBEAT_INTERVAL,  # re-exported
)
from .processes import (
    LOCAL_EXIT_GRACE as LOCAL_EXIT_GRACE,  # re-exported
)
from .processes import (
    NODE_LOST_AFTER as NODE_LOST_AFTER,  # re-exported
)
from .protocol import (
    AdminAnswer,
    AdminCall,
    AnnounceGeneration,
    ArmFaults,
    ChildExiting,
    ChildStarted,
    ChildStartRefused,
    GenerationAssigned,
    Loopback,
    Ok,
    Ping,
    Pong,
    StartChild,
    StopRequest,
    SystemContext,
    TimerPayload,
    requirements_met,
    this_node,
)
from .signals import (
    AdminRequest,
    Boot,
    BootDone,
    ChildStartFailed,
    ChildUp,
    Command,
    Emit,
    ExitSelf,
    GenerationAdopted,
    GenerationAnnounced,
    Input,
    Kill,
    NewGeneration,
    Reply,
    RequestStop,
    ScheduleSelf,
    SendSelf,
    SetTimer,
    ShutdownRequested,
    Spawn,
    TimerFired,
)
from .specs import ChildSpec, ChildType, Strategy, resolve_actor

log = logging.getLogger("ouroactors.supervisor")

_PRELOAD = "ouroactors:preload"  # a wakeup's payload: only this actor can send it


def thespian_class_path(actor_path: str) -> str:
    module, sep, attr = actor_path.partition(":")
    return f"{module}.{attr}" if sep else actor_path


class Supervisor(ChildProcesses, Actor):
    """Supervises children as its spec says. Start it through a parent or a system handle."""

    __ouroactors_child__ = True

    @staticmethod
    def actorSystemCapabilityCheck(capabilities: dict[str, Any], requirements: dict[str, Any]) -> bool:
        return requirements_met(capabilities, requirements)

    core: SupervisorCore | None = None
    path = ""
    _dying = False
    _parent: Any = None
    _children_plan: Any = None  # a fault plan for each child's first start (ArmFaults.children)
    _context: SystemContext | None = None
    _spec: ChildSpec
    _preloaded = False

    def receiveMessage(self, message: Any, sender: Any) -> None:
        try:
            self._handle_message(message, sender)
        except Exception as exc:
            self._crash(exc)

    # -- decoding ---------------------------------------------------------------------------------

    def _handle_message(self, message: Any, sender: Any) -> None:
        if isinstance(message, ActorExitRequest):
            self._dying = True  # thespian is ending us (and, recursively, our children)
            return
        if isinstance(message, WakeupMessage | Loopback) and sender != self.myAddress:
            # thespian delivers timers from the actor's own address, and a Loopback is only ever sent to itself: from
            # anyone else they are forged, and would feed this supervisor's machine (a Loopback(ShutdownRequested)
            # ends the tree, a timer fires a shutdown timeout early)
            log.warning("%s: refused a forged %s from %s", self.path or "?", type(message).__name__, sender)
            self.send(sender, BadRequest(type(message).__name__, "", "is this supervisor's own timer or "
                                         "self-message, never one from another actor"))
            return
        if isinstance(message, StartChild):
            self._begin(message, sender)
            return
        if self.core is None or self._dying:
            if isinstance(message, AdminCall) and self._admin_call_ok(message, sender):
                self._answer(sender, message.ref, NoSuchActor(f"supervisor {self.path or '?'} is not running"))
            return
        if isinstance(message, ChildStarted):
            slot = self._slots.get((message.key, message.incarnation))
            if slot is not None and not slot.started:
                slot.started = True
                slot.pid = message.pid
                slot.node = message.node
                slot.last_seen = clock.monotonic()
                self._by_address[message.address_text] = slot
                self._start_heartbeat()
                self._feed(ChildUp(message.key, message.incarnation, message.pid, slot.address, message.node))
        elif isinstance(message, ChildStartRefused):
            slot = self._slots.get((message.key, message.incarnation))
            if slot is not None:
                slot.refused = message.reason
                self.send(slot.address, ActorExitRequest())
        elif isinstance(message, ChildExiting):
            slot = self._slots.get((message.key, message.incarnation))
            if slot is not None and slot.reported is None:
                slot.reported = message.reason
                self._note_report(message.key, message.incarnation, message.stopped_ns, slot.node)
                self.send(slot.address, ActorExitRequest())
        elif isinstance(message, ChildActorExited):
            self._child_gone(message.childAddress)
        elif isinstance(message, AnnounceGeneration):
            self._feed(GenerationAnnounced(message.key, message.incarnation, message.cause))
        elif isinstance(message, GenerationAdopted):
            self._feed(message)
        elif isinstance(message, WakeupMessage) and isinstance(message.payload, TimerPayload):
            self._feed(TimerFired(message.payload.token))
        elif isinstance(message, WakeupMessage) and isinstance(message.payload, Loopback):
            self._feed(message.payload.payload)  # a backoff delay is over
        elif isinstance(message, WakeupMessage) and message.payload == _HEARTBEAT:
            self._heartbeat()
        elif isinstance(message, WakeupMessage) and message.payload == _PRELOAD:
            self._preload()
        elif isinstance(message, Pong):
            slot = self._slots.get((message.key, message.incarnation))
            if slot is not None:
                slot.last_seen = clock.monotonic()
        elif isinstance(message, Ping):
            if not message.names_another(getattr(self, "_key", None), getattr(self, "_incarnation", None)):
                self.send(sender, Pong(message.key, message.incarnation))
        elif isinstance(message, Loopback):
            self._feed(message.payload)
        elif isinstance(message, StopRequest):
            if message.names_another(getattr(self, "_key", None), getattr(self, "_incarnation", None)):
                log.warning("%s: a stop request for %s#%s ignored: not this child (a dead one's reused port)",
                            self.path, message.key, message.incarnation)
                return
            self._feed(ShutdownRequested(message.reason))
        elif isinstance(message, AdminCall):
            if not self._admin_call_ok(message, sender):
                return
            self._tokens += 1
            self._requesters[self._tokens] = (sender, message.ref)
            self._feed(AdminRequest(self._tokens, message.op, message.child_id, message.spec,
                                    tuple(message.extra_args)))  # a list (OTP's ExtraArgs) is taken as a tuple
        elif isinstance(message, ArmFaults):
            if message.children is True:
                self._children_plan = message.plan
            elif message.children is False:
                arm_here(message.plan, self._context, self.path)
            else:
                self.send(sender, BadRequest("ArmFaults", "children", "must be True or False",
                                             repr(message.children)[:40]))
                return
            self.send(sender, Ok())
        elif isinstance(message, PoisonMessage):
            log.warning("%s: message could not be delivered: %r", self.path, message.poisonMessage)
        elif not isinstance(message, WakeupMessage):
            log.warning("%s: no handler for %s", self.path, type(message).__name__)
            self.send(sender, UnhandledMessage(self.path, type(message).__name__))

    def _admin_call_ok(self, call: AdminCall, sender: Any) -> bool:
        """Whether every field of the call is sound (:func:`~.calls.admin_call_problem`); if not, the caller is told
        which field is wrong and nothing else happens: bare when it is the ``ref`` (it cannot be trusted to be
        echoed) or the call as a whole, inside ``AdminAnswer`` otherwise when the call carried a ``ref``."""
        found = admin_call_problem(call)  # unpickled: whatever the sender put there
        if found is None:
            return True
        try:
            shown = repr(found.value) if found.value is not None else ""
        except Exception:  # a hostile __repr__ must not crash the refusal
            shown = f"<{type(found.value).__name__}>"
        refusal = BadRequest("AdminCall", found.field, found.problem, shown if len(shown) <= 80 else shown[:77] + "...")
        log.warning("%s: refused an admin call: %s", self.path or "?", refusal)
        if found.field in ("ref", ""):  # the ref, or the call as a whole: nothing in it is read, not even its ref
            self.send(sender, refusal)
        else:
            self._answer(sender, call.ref, refusal)  # the ref was checked first: a str or None
        return False

    def _answer(self, requester: Any, ref: str | None, value: Any) -> None:
        """An admin call's answer: bare (OTP's reply) unless the call carried a ``ref`` to correlate it by."""
        self.send(requester, value if ref is None else AdminAnswer(ref, value))

    def _begin(self, start: StartChild, sender: Any) -> None:
        if self.core is not None:
            return
        self._unnoticed: list[_Slot] = []  # children thespian still lists: no ChildActorExited yet
        self._parent = sender
        self._key = start.key
        self._incarnation = start.incarnation
        self._is_root = start.is_root
        self._context = start.context
        self.path = start.path
        self._slots: dict[tuple[str, int], _Slot] = {}
        self._by_address: dict[str, _Slot] = {}
        self._requesters: dict[int, tuple[Any, str | None]] = {}  # token -> (who asked, the call's ref)
        self._reports: dict[tuple[str, int], int] = {}  # (key, incarnation) -> when it stopped serving
        self._tokens = 0
        self._heartbeat_running = False
        self._children_plan = None
        if start.fault_plan is not None:  # its own supervisor's plan for the children it starts
            arm_here(start.fault_plan, start.context, start.path)
        self._events = EventWriter(start.context.events_path, start.path, start.context.node_epoch,
                                   start.context.node)
        self._spec = start.spec
        self.core = SupervisorCore(
            start.spec, path=start.path, inherited=start.snapshot,
            next_generation=generation_source(start.context.node_epoch, start.context.origin_ns),
        )
        self._feed(Boot())

    # -- carrying out commands --------------------------------------------------------------------

    def _feed(self, first: Input) -> None:
        assert self.core is not None
        pending: list[Input] = [first]
        while pending:
            for command in self.core.handle(pending.pop(0), clock.monotonic()):
                failure = self._execute(command)
                if failure is not None:
                    pending.append(failure)

    def _execute(self, cmd: Command) -> Input | None:
        if isinstance(cmd, Spawn):
            return self._spawn(cmd)
        if isinstance(cmd, RequestStop):
            slot = self._slots.get((cmd.key, cmd.incarnation))
            if slot is not None:
                self.send(slot.address, StopRequest(cmd.reason, cmd.key, cmd.incarnation))
        elif isinstance(cmd, Kill):
            slot = self._slots.get((cmd.key, cmd.incarnation))
            if slot is not None:
                self._kill(slot)
        elif isinstance(cmd, SetTimer):
            self.wakeupAfter(timedelta(seconds=cmd.seconds), payload=TimerPayload(cmd.token))
        elif isinstance(cmd, SendSelf):
            self.send(self.myAddress, Loopback(cmd.message))
        elif isinstance(cmd, ScheduleSelf):
            self.wakeupAfter(timedelta(seconds=cmd.seconds), payload=Loopback(cmd.message))
        elif isinstance(cmd, Reply):
            asked = self._requesters.pop(cmd.token, None)
            if asked is not None:
                self._answer(asked[0], asked[1], Ok() if cmd.result is None else cmd.result)
        elif isinstance(cmd, NewGeneration):
            slot = self._slots.get((cmd.key, cmd.incarnation))
            if slot is not None:
                self.send(slot.address, GenerationAssigned(cmd.generation))
        elif isinstance(cmd, Emit):
            self._events.write(cmd.kind, cmd.child, self._with_report(cmd))
        elif isinstance(cmd, BootDone):
            if cmd.failure is None:
                self.send(self._parent, ChildStarted(self._key, self._incarnation, os.getpid(), str(self.myAddress),
                                                     this_node()))
                if self._template() is not None:
                    self.wakeupAfter(timedelta(0), payload=_PRELOAD)
            else:
                self._release_all()
                self.send(self._parent, ChildStartRefused(self._key, self._incarnation, cmd.failure))
                self._dying = True
        elif isinstance(cmd, ExitSelf):
            self._release_all()  # every child is down or taken as killed: thespian must not wait on one
            self.send(self._parent, ChildExiting(self._key, self._incarnation, cmd.reason))
            self._dying = True
        return None

    def _template(self) -> str | None:
        """The actor path of a ``simple_one_for_one`` supervisor's worker template, when it is created here (None
        for any other supervisor, and for a template placed by ``requires``: its node loads it)."""
        spec = self._spec
        if spec.strategy is not Strategy.SIMPLE_ONE_FOR_ONE or not spec.children:
            return None
        template = spec.children[0]
        return template.actor if template.type is ChildType.WORKER and not template.requires else None

    def _preload(self) -> None:
        """Import the worker template's module in this process, once it has started.

        thespian imports a child's class in the creating process (to check its requirements) and forks the child
        from there; children created after that inherit the module. A ``simple_one_for_one`` supervisor has no child
        at boot, so without this its first child paid the import (0.2-0.3 s for a session's coordinator or
        runtime) on the caller's clock. Then its door's message checks are resolved
        (:func:`ouroactors.core.boundary.prepare`: 1-2 ms a child paid on its first message of each kind) and the
        template's :meth:`~.worker.Worker.on_preload` warms what each child would otherwise compute for itself. Once
        per process. Best effort: a module that fails to import fails the first ``start_child`` as before, with the
        reason there."""
        actor = self._template() if self.core is not None and not self._dying and not self._preloaded else None
        if actor is None:
            return
        self._preloaded = True
        try:
            template = resolve_actor(actor)  # imports the module
        except ValueError:  # the start_child that needs it reports the failure
            log.debug("%s: preloading %s failed", self.path, actor, exc_info=True)
            return
        boundary.prepare(*getattr(template, "protocol", ()))  # its door's checks, resolved once for every child
        try:
            template.on_preload()  # type: ignore[attr-defined]  # a Worker (resolve_actor checked the protocol)
        except Exception:
            log.warning("%s: %s.on_preload failed; each child does that work itself", self.path, actor,
                        exc_info=True)

    def _spawn(self, cmd: Spawn) -> Input | None:
        assert self._context is not None
        if not cmd.spec.requires and cmd.spec.actor is not None:
            # A class that does not load here would not load in the child forked from here either: refuse the
            # start with the reason (OTP's undef), not with a child that dies before it can say why. A child placed
            # by ``requires`` may be created on another node, where it is that node's to load.
            try:
                problem = kind_problem(cmd.spec.actor, resolve_actor(cmd.spec.actor), cmd.spec.type.value)
                if problem is not None:  # a spec that reached this supervisor unchecked (the admin door imports
                    raise ValueError(problem)  # nothing): a worker class run as a supervisor answered no one
            except ValueError as exc:
                return ChildStartFailed(cmd.key, cmd.incarnation, reasons.crash(exc))
        offset = log_offset(self._context) if cmd.spec.is_supervisor else None  # before anything below it starts
        try:
            address = self.createActor(
                thespian_class_path(cmd.spec.actor_path),
                targetActorRequirements=dict(cmd.spec.requires) or None,
            )
        except Exception as exc:
            return ChildStartFailed(cmd.key, cmd.incarnation, reasons.crash(exc))
        slot = self._slots[(cmd.key, cmd.incarnation)] = _Slot(cmd.key, cmd.incarnation, address, log_offset=offset,
                                                                requires=tuple(sorted(cmd.spec.requires.items())))
        self._unnoticed.append(slot)
        self.send(
            address,
            StartChild(
                key=cmd.key, incarnation=cmd.incarnation, generation=cmd.generation,
                path=f"{self.path}/{cmd.key}", spec=cmd.spec, args=cmd.args, kwargs=cmd.kwargs,
                snapshot=cmd.snapshot, context=self._context,
                fault_plan=self._children_plan if cmd.first else None,
            ),
        )
        return None

    def _crash(self, exc: Exception) -> None:
        """A bug in the supervisor itself: take the subtree down and report a crash upwards."""
        reason = reasons.crash(exc)
        log.error("supervisor %s crashed: %s", self.path, reason, exc_info=True)
        if self._dying:
            return
        self._dying = True
        for slot in list(getattr(self, "_slots", {}).values()):
            self._kill(slot)
        self._release_all()
        if self._parent is not None:
            self.send(self._parent, ChildExiting(getattr(self, "_key", ""), getattr(self, "_incarnation", 0), reason))
