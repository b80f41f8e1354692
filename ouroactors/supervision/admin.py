"""The OTP admin API of a supervisor core: one method per request, as ``handle_call`` clauses.

Mixed into :class:`~.machine.SupervisorCore`; every request either answers at once or runs a job
(a start or a terminate) and answers when it finishes. simple_one_for_one's special cases come
first in each method, as in ``supervisor.erl``.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from ..core.errors import (
    AlreadyPresent,
    AlreadyStarted,
    ChildNotFound,
    ChildRestarting,
    ChildRunning,
    MaxChildren,
    OuroactorsError,
    SimpleOneForOneOnly,
    SpecError,
    StartFailed,
)
from .children import Child, Children, ChildStatus
from .signals import AdminRequest, Command, Reply
from .specs import AutoShutdown, ChildSpec, Strategy, SupervisorFlags

if TYPE_CHECKING:
    from .reasons import ExitReason

Job = Generator[Any, Any, None]


class AdminApi:
    """Request handlers; the state they touch belongs to :class:`~.machine.SupervisorCore`."""

    simple: bool
    template: ChildSpec | None
    flags: SupervisorFlags
    children: Children
    _out: list[Command]
    _now: float
    _dynamic_seq: int

    if TYPE_CHECKING:

        def _record(self, key: str, spec: ChildSpec, args: tuple[Any, ...]) -> Child: ...
        def _run(self, job: Job) -> None: ...
        def _start(self, child: Child) -> Generator[Any, Any, ExitReason | None]: ...
        def _terminate(self, children: list[Child], reason: ExitReason = ...) -> Job: ...

    # -- admin API --------------------------------------------------------------------------------

    def _on_admin(self, req: AdminRequest) -> None:
        handler = getattr(self, f"_admin_{req.op}", None)
        if handler is None:
            self._out.append(Reply(req.token, OuroactorsError(f"unknown supervisor request {req.op!r}")))
            return
        handler(req)

    def _reply(self, req: AdminRequest, result: Any) -> None:
        self._out.append(Reply(req.token, result))

    def _admin_start_child(self, req: AdminRequest) -> None:
        if self.simple:
            assert self.template is not None
            limit = self.flags.max_children
            if limit is not None and len(self.children) >= limit:
                self._reply(req, MaxChildren(self.template.id, limit))
                return
            self._dynamic_seq += 1
            key = f"{self.template.id}#{self._dynamic_seq}"
            child = self._record(key, self.template, self.template.args + tuple(req.extra_args))
        else:
            spec = req.spec
            if spec is None:
                self._reply(req, OuroactorsError(
                    "start_child with arguments only works on a simple_one_for_one supervisor (this one is "
                    f"{self.flags.strategy.value}): give a whole child spec instead "
                    "(system.start_child(path, worker('id', 'pkg.mod:Class')) from Python)"))
                return
            if spec.significant and self.flags.auto_shutdown is AutoShutdown.NEVER:
                self._reply(req, SpecError([(spec.id, "significant child but auto_shutdown is 'never'")]))
                return
            existing = self.children.get(spec.id)
            if existing is not None:
                if existing.alive:
                    self._reply(req, AlreadyStarted(spec.id, existing.pid))
                else:
                    self._reply(req, AlreadyPresent(spec.id))
                return
            child = self._record(spec.id, spec, spec.args)
        self.children.add(child)
        self._run(self._job_start_child(req, child, forget_on_failure=True))

    def _job_start_child(self, req: AdminRequest, child: Child, forget_on_failure: bool) -> Job:
        failure = yield from self._start(child)
        if failure is None:
            self._reply(req, self.children.info(child, self._now))
            if child.status is ChildStatus.UNDEFINED and self.flags.strategy is Strategy.SIMPLE_ONE_FOR_ONE:
                self.children.remove(child.key)  # OTP's ignore: a dynamic child that did not start is not kept
            return
        if forget_on_failure:
            self.children.remove(child.key)
        self._reply(req, StartFailed(child.key, str(failure)))

    def _admin_terminate_child(self, req: AdminRequest) -> None:
        child = self.children.get(req.child_id or "")
        if child is None:
            self._reply(req, ChildNotFound(req.child_id))
            return
        self._run(self._job_terminate_child(req, child))

    def _job_terminate_child(self, req: AdminRequest, child: Child) -> Job:
        yield from self._terminate([child])
        if self.simple or child.is_temporary:
            self.children.remove(child.key)
        self._reply(req, "ok")

    def _admin_restart_child(self, req: AdminRequest) -> None:
        child = self._lookup_static(req)
        if child is None:
            return
        if child.status is ChildStatus.RESTARTING:
            self._reply(req, ChildRestarting(child.key))
        elif child.status is not ChildStatus.UNDEFINED:
            self._reply(req, ChildRunning(child.key))
        else:
            self._run(self._job_start_child(req, child, forget_on_failure=False))

    def _admin_delete_child(self, req: AdminRequest) -> None:
        child = self._lookup_static(req)
        if child is None:
            return
        if child.status is ChildStatus.RESTARTING:
            self._reply(req, ChildRestarting(child.key))
        elif child.status is not ChildStatus.UNDEFINED:
            self._reply(req, ChildRunning(child.key))
        else:
            self.children.remove(child.key)
            self._reply(req, "ok")

    def _lookup_static(self, req: AdminRequest) -> Child | None:
        if self.simple:
            self._reply(req, SimpleOneForOneOnly(req.child_id))
            return None
        child = self.children.get(req.child_id or "")
        if child is None:
            self._reply(req, ChildNotFound(req.child_id))
        return child

    def _admin_which_children(self, req: AdminRequest) -> None:
        """OTP order: newest first."""
        self._reply(req, [self.children.info(c, self._now) for c in self.children.newest_first()])

    def _admin_which_child(self, req: AdminRequest) -> None:
        child = self.children.get(req.child_id or "")
        self._reply(req, ChildNotFound(req.child_id) if child is None else self.children.info(child, self._now))

    def _admin_count_children(self, req: AdminRequest) -> None:
        counts = self.children.counts()
        if self.simple:
            counts["specs"] = 1  # OTP: the template is the one spec of a simple_one_for_one supervisor
        self._reply(req, counts)

    def _admin_get_childspec(self, req: AdminRequest) -> None:
        child = self.children.get(req.child_id or "")
        if child is None:
            self._reply(req, ChildNotFound(req.child_id))
        else:
            spec = child.spec
            # OTP answers the shutdown the child will get: the default is made explicit, never left as None.
            shutdown = spec.shutdown if spec.shutdown is not None else (spec.shutdown_ms if spec.shutdown_ms is not None
                                                                         else "infinity")
            self._reply(req, spec.model_copy(update={"args": child.args, "id": child.key, "shutdown": shutdown}))
