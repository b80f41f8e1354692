"""The tree host: the one top-level actor of a system, parent of every tree's root supervisor.

A root supervisor speaks the same protocol to the host as any child to its supervisor, so
"report why, then be ended" holds at the top too, and no protocol message ever reaches the caller
outside the system as a stray answer. The host never restarts a root: a root that escalates or
auto-shuts down ends its tree, as an OTP application's top supervisor ends the application.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from thespian.actors import Actor, ActorExitRequest, ActorSystemConventionUpdate, ChildActorExited

from ..core.errors import AlreadyStarted, ChildNotFound, StartFailed
from ..supervision.events import EventWriter
from ..supervision.generations import generation_source
from ..supervision.leftovers import end_after_kill, log_offset
from ..supervision.protocol import (
    ChildExiting,
    ChildStarted,
    ChildStartRefused,
    Ok,
    StartChild,
    StopRequest,
)
from ..supervision.reasons import ExitReason, killed
from ..supervision.supervisor import thespian_class_path
from ._lifetime import end_treeless_system
from ._patches import admin_settings
from .host_protocol import HOST_NAME as HOST_NAME
from .host_protocol import Configure, ListTrees, StartTree, StopTree, TreeInfo


@dataclass
class _Tree:
    name: str
    address: Any
    incarnation: int
    generation: int
    pid: int | None = None
    status: str = "starting"
    reported: ExitReason | None = None
    waiters: list[Any] = field(default_factory=list)
    context: Any = None  # the system context it was started with
    log_offset: int | None = None  # the event log's end before its root was forked (supervision.leftovers)


class TreeHost(Actor):
    def __init__(self) -> None:
        super().__init__()
        self._trees: dict[str, _Tree] = {}
        self._incarnations = 0
        self._events: EventWriter | None = None
        self._nodes: dict[str, dict[str, Any]] = {}  # remote admin address -> its capabilities

    def receiveMessage(self, message: Any, sender: Any) -> None:
        if isinstance(message, Configure):
            ctx = message.context
            if self._events is None:
                self._events = EventWriter(ctx.events_path, "", ctx.node_epoch, ctx.node)
            if message.convention:
                self.notifyOnSystemRegistrationChanges(True)
            self.send(sender, Ok())
        elif isinstance(message, ActorSystemConventionUpdate):
            self._node_changed(message)
        elif message == "nodes":
            self.send(sender, dict(self._nodes))
        elif isinstance(message, StartTree):
            self._start(message, sender)
        elif isinstance(message, ChildStarted):
            tree = self._trees.get(message.key)
            if tree is not None and tree.incarnation == message.incarnation:
                tree.status, tree.pid = "running", message.pid
                self._answer(tree, TreeInfo(tree.name, tree.address, tree.pid, tree.generation, "running"))
        elif isinstance(message, ChildStartRefused | ChildExiting):
            tree = self._trees.get(message.key)
            if tree is not None and tree.incarnation == message.incarnation:
                tree.reported = message.reason
                self.send(tree.address, ActorExitRequest())
        elif isinstance(message, ChildActorExited):
            self._gone(message.childAddress)
        elif isinstance(message, StopTree):
            tree = self._trees.get(message.name)
            if tree is None or tree.status == "ended":
                self.send(sender, ChildNotFound(message.name))
                return
            tree.waiters.append(sender)
            if tree.status != "stopping":
                tree.status = "stopping"
                self.send(tree.address, StopRequest(message.reason))
        elif isinstance(message, ListTrees):
            self.send(sender, [self._info(t) for t in self._trees.values()])
        elif message == "admin":
            # The admin double-forks after setsid: its session's id (its own group's, which names an exited process)
            # finds every process of the system, each actor leading a group of its own in it; so report both.
            self.send(sender, (os.getppid(), os.getsid(0)))

    def _start(self, request: StartTree, sender: Any) -> None:
        name = request.spec.id
        existing = self._trees.get(name)
        if existing is not None and existing.status != "ended":
            self.send(sender, AlreadyStarted(name, existing.pid))
            return
        if self._events is None:
            ctx = request.context
            self._events = EventWriter(ctx.events_path, "", ctx.node_epoch, ctx.node)
        self._incarnations += 1
        generation = generation_source(request.context.node_epoch, request.context.origin_ns)(None)
        offset = log_offset(request.context)  # before anything of the tree starts
        address = self.createActor(thespian_class_path(request.spec.actor_path))
        tree = _Tree(name, address, self._incarnations, generation, waiters=[sender], context=request.context,
                     log_offset=offset)
        self._trees[name] = tree
        self.send(address, StartChild(
            key=name, incarnation=tree.incarnation, generation=generation, path=name, spec=request.spec,
            args=(), kwargs={}, snapshot=(), context=request.context, is_root=True,
        ))

    def _gone(self, address: Any) -> None:
        tree = next((t for t in self._trees.values() if t.address == address and t.status != "ended"), None)
        if tree is None:
            return
        was_starting, was_running = tree.status == "starting", tree.status == "running"
        killed_outright = tree.reported is None
        reason = tree.reported or killed()
        tree.status = "ended"
        tree.reported = reason
        if killed_outright and tree.pid is not None and tree.pid != os.getpid():
            # what the root left behind, and the actors below it (dead with it), as a supervisor ends a child's
            end_after_kill(tree.context, tree.name, tree.pid, tree.log_offset)
        if self._events is not None:
            self._events.write("tree_ended", tree.name, {"reason": reason.to_json(), "generation": tree.generation})
        if was_starting:
            self._answer(tree, StartFailed(tree.name, str(reason)))
        else:
            self._answer(tree, Ok(self._info(tree)))
        if was_running and admin_settings.get("detached") and all(t.status == "ended" for t in self._trees.values()):
            end_treeless_system(tree.context.data_dir, tree.name, str(reason))  # on its own: nobody asked it to stop

    def _node_changed(self, update: ActorSystemConventionUpdate) -> None:
        node = str(update.remoteAdminAddress)
        caps = {k: v for k, v in (update.remoteCapabilities or {}).items() if isinstance(v, str | int | float)}
        if update.remoteAdded:
            self._nodes[node] = caps
        else:
            self._nodes.pop(node, None)
        if self._events is not None:
            kind = "node_joined" if update.remoteAdded else "node_left"
            self._events.write(kind, None, {"peer": node, "capabilities": caps})

    def _answer(self, tree: _Tree, result: Any) -> None:
        for waiter in tree.waiters:
            self.send(waiter, result)
        tree.waiters.clear()

    def _info(self, tree: _Tree) -> TreeInfo:
        return TreeInfo(tree.name, tree.address, tree.pid, tree.generation, tree.status,
                        str(tree.reported) if tree.reported else None)
