"""What the handle does to a running system: OTP's supervisor API, fault injection, and joining a convention.

Mixed into :class:`~.handle.ActorSystem`: every call is one ask of the supervisor (or of every
running actor, for fault plans) through the handle's answers (:mod:`._answers`). The read-only calls
(``which_children``, ``child_info``, paths) are the thin client's (:mod:`.client`).
"""

from __future__ import annotations

import os
import signal
import time
from typing import TYPE_CHECKING, Any

from ..core.errors import ActorSystemError, NoSuchActor, SpecError
from ..supervision.actor_paths import unsendable_arguments, unsendable_values
from ..supervision.child_info import ChildInfo
from ..supervision.protocol import AdminCall, ArmFaults
from ..supervision.specs import ChildSpec
from . import _pickling

if TYPE_CHECKING:
    from .host import TreeInfo


class Operations:
    """The OTP admin API and fault injection of :class:`~.handle.ActorSystem`."""

    if TYPE_CHECKING:
        base: str

        def _call(self, address: Any, message: Any, timeout: float, what: str) -> Any: ...
        def resolve(self, path: str, timeout: float = 10.0) -> Any: ...
        def trees(self) -> list[TreeInfo]: ...
        def walk(self, root: str | None = None, *, trees: list[TreeInfo] | None = None
                 ) -> list[tuple[str, ChildInfo]]: ...
        def _admin(self, supervisor_path: str, call: AdminCall, timeout: float = 30.0) -> Any: ...
        def child_info(self, path: str) -> ChildInfo: ...
        def _acting(self) -> None: ...
        _host: Any
        simulation: Any

    def _check_sendable(self, problems: list[tuple[str, str]]) -> None:
        """Refuse arguments that cannot reach an actor's process, naming each (``SpecError``), where messages travel
        pickled (multiproc; the in-process base with ``pickle_messages``) — rather than leave the transport to fail
        with a bare pickling error that names no child."""
        if problems and (self.base == "multiproc" or _pickling.active(getattr(self, "_thespian", None))):
            raise SpecError(problems)

    # -- OTP admin API --------------------------------------------------------------------------------

    def start_child(self, supervisor_path: str, spec_or_args: ChildSpec | tuple[Any, ...] | list[Any] = (),
                    timeout: float = 30.0) -> ChildInfo:
        if isinstance(spec_or_args, ChildSpec):
            self._check_sendable(unsendable_arguments(spec_or_args))
            call = AdminCall("start_child", spec=spec_or_args)
        elif isinstance(spec_or_args, tuple | list):
            self._check_sendable(unsendable_values([(f"{supervisor_path}: extra args[{i}]", value)
                                                    for i, value in enumerate(spec_or_args)]))
            call = AdminCall("start_child", extra_args=tuple(spec_or_args))
        else:  # a str would start a child with one argument per character, a dict with its keys
            raise TypeError(f"start_child takes a child spec, or the extra arguments as a tuple or list (one: "
                            f"({spec_or_args!r:.60},)), not {type(spec_or_args).__name__}")
        self._acting()
        return self._admin(supervisor_path, call, timeout)

    def terminate_child(self, supervisor_path: str, child_id: str, timeout: float = 60.0) -> None:
        self._acting()
        self._admin(supervisor_path, AdminCall("terminate_child", child_id), timeout)

    def restart_child(self, supervisor_path: str, child_id: str, timeout: float = 30.0) -> ChildInfo:
        self._acting()
        return self._admin(supervisor_path, AdminCall("restart_child", child_id), timeout)

    def delete_child(self, supervisor_path: str, child_id: str) -> None:
        self._acting()
        self._admin(supervisor_path, AdminCall("delete_child", child_id))

    def count_children(self, supervisor_path: str) -> dict[str, int]:
        return self._admin(supervisor_path, AdminCall("count_children"))

    def get_childspec(self, supervisor_path: str, child_id: str) -> ChildSpec:
        return self._admin(supervisor_path, AdminCall("get_childspec", child_id))

    # -- fault injection ------------------------------------------------------------------------------

    def kill(self, path: str) -> int:
        """SIGKILL the process of the actor at ``path``; returns the pid killed.

        On a simulated system the kill is the simulated death of that actor (its supervisor sees ``killed``,
        its memory is lost, LMDB keeps what was committed); the number returned is then its incarnation.
        """
        if self.simulation is not None:
            self._acting()
            return self.simulation.kill(path)
        if self.base != "multiproc":
            raise ActorSystemError("kill needs real processes: start the system on the multiproc base")
        pid = self.pid_of(path)
        self._acting()
        os.kill(pid, signal.SIGKILL)
        return pid

    def arm_faults(self, path: str | None, plan: Any, *, children: bool = False) -> list[str]:
        """Arm a fault plan (``ouroactors.faults.FaultPlan``; None disarms) in actor processes.

        ``path`` None means every running actor of every tree. ``kill`` rules name their victim
        by tree path; it is resolved to a pid here, once. Returns the paths armed.

        ``children=True`` (``path``: a supervisor; None: every running one) arms the plan not in the supervisor
        but in each child it starts from now on, at that child's first start — the dynamic children a
        ``start_child`` adds during a scenario — and never in a restart (a child killed by the plan runs free when
        it comes back); ``plan=None`` forgets it. On the in-process base, where every actor shares one process,
        each such child is armed for itself and what it starts, as in a process of its own
        (:mod:`ouroactors.supervision.faulting`).
        """
        if type(children) is not bool:
            raise TypeError(f"children: must be True or False, got {children!r}")
        if plan is not None:
            plan = self._resolve_kill_targets(plan)
        if path is not None:
            paths = [path]
        elif children:
            paths = [t.name for t in self.trees() if t.status == "running"]
            paths += [p for p, info in self.walk() if info.status == "running" and info.type == "supervisor"]
        else:
            paths = [t.name for t in self.trees() if t.status == "running"]
            paths += [p for p, info in self.walk() if info.status == "running"]
        self._acting()
        for target in paths:
            self._call(self.resolve(target), ArmFaults(plan, children), 10.0, target)
        return paths

    def _resolve_kill_targets(self, plan: Any) -> Any:
        import dataclasses

        from ..core.faults import FaultAction, with_kill_target

        rules = []
        for rule in plan.rules:
            if rule.action is FaultAction.KILL and rule.target is not None:
                if self.simulation is not None:  # an incarnation stands in for pid + start time
                    rule = dataclasses.replace(rule, target_pid=self.simulation.incarnation_of(rule.target))
                else:
                    rule = with_kill_target(rule, self.pid_of(rule.target))
            rules.append(rule)
        return dataclasses.replace(plan, rules=tuple(rules))

    def pid_of(self, path: str) -> int:
        """The pid of the process running the actor at ``path``."""
        if "/" not in path.strip("/"):
            tree = next((t for t in self.trees() if t.name == path.strip("/")), None)
            pid = tree.pid if tree is not None else None
        else:
            pid = self.child_info(path).pid
        if pid is None:
            raise NoSuchActor(f"{path} has no running process")
        return pid

    # -- conventions ---------------------------------------------------------------------------------

    def _await_convention(self, leader: tuple[str, int], timeout: float = 10.0) -> None:
        """A member is part of the convention once the leader shows up in its node list."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.nodes():
                return
            time.sleep(0.05)  # polling the host actor for the registration, bounded
        raise ActorSystemError(
            f"could not join the convention led at {leader[0]}:{leader[1]} within {timeout}s "
            "(is the secret file a copy of the leader's? frames tagged with another secret are dropped)"
        )

    def nodes(self) -> dict[str, dict[str, Any]]:
        """Other nodes of the convention this system knows, with their capabilities."""
        return self._call(self._host, "nodes", 10.0, "host")
