"""The coordinator's link to its runtime: start one, lease (or reclaim) the workspace for it, open, attach, close.

A mixin of :class:`~.actor.Coordinator`. The runtime is a child of ``agent/execution``, started by
asking that supervisor (``AdminCall("start_child")``), never by the coordinator itself: this process
holds the node's LMDB environment and must not fork. The runtime is the workspace lease's owner, so
its death — not the coordinator's — turns the lease into a reservation; the lease's capability is
kept durably (:func:`.configs.put_lease`) so a replacement can reclaim it (:mod:`.leasing`).

**Every ask to a runtime is watched** (:meth:`RuntimeLink._runtime_ask`, :class:`.calls.Watch`): each
:data:`WATCH_S` without an answer, the execution supervisor is asked whether the runtime's child is still that
generation, running — the question the heartbeat asks — and a gone runtime ends the wait with
:class:`.calls.Gone` at once, instead of after the ask's timeout (seconds during which no other job, recovery
included, runs). Only unanswered asks cost a check: a live runtime answers within milliseconds. The supervisor,
not the runtime's pid, is the truth on purpose: recovery asks the supervisor too, so it finds what the watch found
(a pidfd could fire before the supervisor has handled the exit, and recovery would then probe a child it still
calls running).
A watched ask that finds its runtime gone changes nothing the job would not have done on a timeout: a close still
releases the lease (the workspace may have made it a reservation by then; the next lease reclaims it).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from ...authorities.workspace.messages import Release
from ...core import faults
from ...core.errors import ActorCrashed, OuroactorsError, StaleGeneration
from ...core.generation_text import format_generation
from ...core.procs import pid_alive
from ...supervision.calls import Addressed
from ...supervision.protocol import AdminCall
from ..execution.errors import AlreadyOpen
from ..execution.messages import CloseSession, Opened, OpenSession, RuntimeStatus, RuntimeStatusRequest, SendText
from . import spares
from .calls import ASK_TIMEOUT_S, Ask, Job, OffThread, TimedOut, Watch
from .commands import CoordinatorError, value_of
from .configs import get_config, get_lease, get_runtime, put_lease, put_runtime
from .leasing import NAP_S, RECLAIM_WAIT_S, WorkspaceLeasing, lease_refused, reclaim_request_id
from .messages import RuntimeStarted, SpareOffer, SpareWanted
from .record import RuntimeAttachment, SessionRecord
from .spares import SpareChild
from .trace import mark

if TYPE_CHECKING:
    from ...supervision.protocol import SystemContext
    from .store import SessionStore

PUSH = True  # see "Pushed publication" in the actor's module docstring
START_ATTEMPTS = 3  # runtimes that may die while opening one turn before the turn fails
OPEN_SLICE_S = 2.0  # how long an open waits before asking whether its runtime still lives
OPEN_TIMEOUT_S = 30.0  # an open that a live runtime does not answer in this time fails the turn
WATCH_S = 1.0  # how long an ask to a runtime waits before asking its supervisor whether it still lives
SPARE_ASK_S = 1.0  # how long a resume of the coordinator's own waits for its directory's offer (then starts one)
log = logging.getLogger("ouroactors.coordinator")
# Named boundaries for crash enumeration; free unless a plan is armed.
RUNTIME_STARTED = faults.register_point("coordinator.runtime_started", "a runtime child started and located, no lease")
LEASE_KEPT = faults.register_point("coordinator.lease_kept", "the runtime's lease is durable, the runtime not open")
RUNTIME_OPENED = faults.register_point("coordinator.runtime_opened", "the runtime opened the session, not yet attached")
ATTACHED = faults.register_point("coordinator.attached", "the record names the runtime, no text sent yet")
RUNTIME_CLOSED = faults.register_point("coordinator.runtime_closed", "the runtime closed, its lease not yet released")


class RuntimeLost(CoordinatorError):
    """The runtime being opened died before it answered (the open is retried with another one)."""


class RuntimeTaken(RuntimeLost):
    """The spare being opened serves another session already (the open is retried with a runtime started anew)."""


@dataclasses.dataclass
class _Attached:
    address: Any
    key: str
    runtime_id: str
    generation: int
    capability: Any = None
    lease_id: str | None = None
    adopted: bool = False  # opened by an earlier incarnation: its OutputReady goes there
    token: int = 0  # the lease's fencing token


def for_runtime(generation: Any, message: Any) -> Any:
    """``message`` for the runtime of ``generation`` only (:class:`~...supervision.calls.Addressed`): any other
    worker refuses it.

    A runtime's address is a TCP port, and a runtime killed with SIGKILL frees it before anyone tells this
    coordinator: the next actor the kernel gives that port to — another session's runtime, a spare — receives what
    is sent to the dead one (thespian addresses carry no incarnation). Unstamped, a ``SendText`` would run this
    session's message in another session, and an ``AckOutput`` would have another runtime drop output its own
    coordinator has not committed. Addressed, the worker's door compares the generation with its own (unique per
    node: the generation source) and answers :class:`~ouroactors.core.errors.StaleGeneration` instead of acting. An
    unknown generation (None) leaves the message as it is."""
    return Addressed(generation, message) if type(generation) is int else message


class RuntimeLink(WorkspaceLeasing):
    """See the module docstring."""

    directory: Any = None  # the session directory that forwards this session's commands (None: none yet)
    offered = False  # a command's job runs, with the spare its directory offered or none (see _offering)

    if TYPE_CHECKING:  # what the coordinator provides
        session_id: str
        incarnation: str
        store: SessionStore
        attached: _Attached | None
        spare: Any  # a SpareRuntime offered with the command being run, or None (see _offering)
        spare_trusted: bool  # offered by the directory that started this coordinator
        record: SessionRecord | None
        answered_asks: list[str]
        released_lease: str | None
        myAddress: Any
        context: SystemContext | None

        def send(self, targetAddr: Any, msg: Any) -> None: ...

        def _authority(self, name: str, payload: Any, timeout_s: float = 10.0) -> Ask: ...
        def _execution(self, call: AdminCall, timeout_s: float = 30.0) -> Ask: ...
        def _poll(self) -> None: ...

    def _watch(self, key: str, generation: int) -> Watch:
        """Is the execution child ``key`` still generation ``generation``, running? (See the module docstring.)"""
        def alive(info: Any) -> bool:
            return getattr(info, "generation", None) == generation and getattr(info, "status", None) == "running"
        return Watch(self._execution(AdminCall("which_child", key), 10.0), alive, WATCH_S)

    def _runtime_ask(self, message: Any, timeout_s: float = ASK_TIMEOUT_S, to: _Attached | None = None) -> Ask:
        """An ask to runtime ``to`` (the one attached by default), watched: :class:`.calls.Gone` when it dies."""
        runtime = to if to is not None else self.attached
        assert runtime is not None
        return Ask(runtime.address, for_runtime(runtime.generation, message), timeout_s,
                   self._watch(runtime.key, runtime.generation))

    def _start_runtime(self, start: int, reclaim: dict[str, Any] | None = None,
                       answered: tuple[tuple[str, str], ...] = (), tail: int = 0) -> Generator[Ask, Any, Opened]:
        """Start a runtime child, lease the workspace for it (it is the owner), open it at cursor ``start``.

        ``reclaim``: the lost runtime's lease (:func:`.configs.get_lease`); its reservation is reclaimed
        with its capability instead of acquiring anew. The runtime runs under the record's state version
        and parks its approvals on the coordinator (:mod:`.waits`); ``answered``: the approvals answered
        since its turn began (approval id, call digest); ``tail``: the turn the committed log has not seen settle
        (``OpenSession.tail_turn``; a replacement passes it).
        """
        self.answered_asks = []  # a new runtime: no answered ask is pending in it yet (see .waits)
        config = get_config(self.store, self.session_id)
        if config is None:
            raise CoordinatorError(f"session {self.session_id!r} has no stored configuration")
        lost: list[str] = []
        for _ in range(START_ATTEMPTS):
            try:
                return (yield from self._start_once(config, start, reclaim, answered, tail))
            except RuntimeLost as exc:  # it ran nothing (an open runs no turn): another one opens instead
                log.warning("%s: %s; starting another runtime", self.session_id, exc)
                lost.append(str(exc))
                reclaim = None  # the lost runtime took the reservation; its lease is released or reclaimed next
        raise CoordinatorError(f"{START_ATTEMPTS} runtimes died while opening the session: {'; '.join(lost)}")

    def _start_once(self, config: dict[str, Any], start: int, reclaim: dict[str, Any] | None,
                    answered: tuple[tuple[str, str], ...], tail: int) -> Generator[Ask, Any, Opened]:
        earlier = get_runtime(self.store, self.session_id)  # the runtime before this one, if any (see below)
        # Workspace Acquires are keyed per runtime generation by an HMAC under the data dir's secret (.request_keys):
        # a replayed key is answered with its lease's capability, so it must not be derivable from the session id
        # and a generation count alone — yet this incarnation must recompute the key of the runtime before its own
        # from the durable record (``earlier``), to reclaim a grant that never reached a coordinator. Its secret is
        # read before a runtime is started: a key file that cannot be trusted refuses the start, leaving no runtime.
        if config.get("workspace"):
            self._acquire_secret()
        mark("start.runtime_asked")
        info = yield from self._runtime_child(earlier)
        mark("start.runtime_started")
        if isinstance(info, BaseException | TimedOut):
            raise CoordinatorError(f"the execution supervisor did not start a runtime: {info!r}")
        value_of(put_runtime(self.store, self.session_id, info.id, info.generation), "runtime location")
        faults.point(RUNTIME_STARTED)
        self.attached = attached = _Attached(info.address, info.id, "", info.generation)
        try:
            return (yield from self._lease_and_open(config, info, attached, start, reclaim, answered, tail, earlier))
        except RuntimeTaken:
            # a spare another coordinator opened first (see .spares): not ours to stop; our lease is ours to free
            yield from self._discard(attached, stop=False)
            raise
        except (OuroactorsError, OSError):
            # It ran nothing (an open runs no turn) and no later incarnation would find it (it opened no session):
            # stop it, and free the lease it may hold, before the failure is reported.
            yield from self._discard(attached)
            raise

    def _offering(self, spare: Any, trusted: bool, command: Job) -> Job:
        """Run ``command`` with ``spare`` (or None) on offer to the runtime start it may make. A spare this
        coordinator's directory offered and the command did not take (a duplicate, a stale version …) is stopped once
        the command has answered (or that it refused: too old for this session), as it would otherwise idle until its
        unopened limit. Anybody else's is left alone."""
        self.spare, self.spare_trusted, self.offered = spare, trusted, True
        try:
            yield from command
        finally:
            unused, self.spare, self.offered = self.spare, None, False
        if unused is not None and trusted:
            yield self._execution(AdminCall("terminate_child", unused.key), 10.0)

    def _with_a_spare(self, resume: Generator[Ask | OffThread, Any, Any]) -> Job:
        """Run ``resume``, a turn this coordinator resumes itself (a timer due, an approval a look or its recovery
        found answered), with a spare runtime its directory offers on asking (:class:`~.messages.SpareWanted`), as a
        caller's command comes with one. Inside a command the directory has offered already (or had none): asked
        nothing. The answer comes from the directory that started this coordinator: trusted as its offers are."""
        directory = getattr(self, "started_by", None)
        if self.offered or directory is None:
            yield from resume
            return
        offer = yield Ask(directory, SpareWanted(self.session_id), SPARE_ASK_S)
        spare = offer.spare if isinstance(offer, SpareOffer) else None  # refused, or too slow: one is started
        yield from self._offering(spare, True, resume)

    def _runtime_child(self, earlier: dict[str, Any] | None) -> Generator[Ask, Any, Any]:
        """The execution child this turn's runtime is: the spare the directory offered, if :mod:`.spares` lets it be
        used, else one started now (its ``which_child``-like info, or the failed ask's answer)."""
        spare, self.spare = self.spare, None
        if spare is not None:
            last = max(self.record.last_generation if self.record is not None else 0,
                       int(earlier["generation"]) if earlier else 0)
            if self.spare_trusted:  # from the directory that started this coordinator: it came from the supervisor
                child: Any = SpareChild(spare.key, "running", spare.generation, spare.address)
            else:  # anybody's offer: the supervisor says whether it is a live child, the runtime whether it is unused
                child = yield self._execution(AdminCall("which_child", spare.key), 10.0)
            why = spares.child_refusal(spare, child, last)
            if why is None and not self.spare_trusted:
                status = yield Ask(spare.address, for_runtime(spare.generation, RuntimeStatusRequest()), 5.0)
                why = spares.status_refusal(spare, status if isinstance(status, RuntimeStatus) else None)
            if why is None:
                mark("start.spare_taken")
                return child
            log.info("%s: the spare runtime offered is not used: %s; starting one", self.session_id, why)
            if self.spare_trusted:  # our directory's, offered to nobody else now: stopped once the command answered
                self.spare = spare
        started = yield self._execution(AdminCall("start_child"))
        if self.directory is not None:  # a spare it starts from now on is newer than this runtime (.spares)
            self.send(self.directory, RuntimeStarted(self.session_id))
        return started

    def _lease_and_open(self, config: dict[str, Any], info: Any, attached: _Attached, start: int,
                        reclaim: dict[str, Any] | None, answered: tuple[tuple[str, str], ...], tail: int,
                        earlier: dict[str, Any] | None) -> Generator[Ask, Any, Opened]:
        """Lease the workspace for the runtime just started (``info``) and open the session on it."""
        if config.get("workspace"):
            granted = yield from self._lease_workspace(
                config["workspace"], info.address, self._acquire_request_id(info.generation), reclaim,
                earlier=self._acquire_request_id(earlier["generation"]) if earlier else None,
                owner_generation=info.generation)
            if isinstance(granted, BaseException | TimedOut):
                raise lease_refused(granted)
            lease = granted.lease
            attached.lease_id, attached.capability, attached.token = lease.lease_id, granted.capability, \
                lease.fencing_token
            value_of(put_lease(self.store, self.session_id, {
                "lease_id": lease.lease_id, "root": lease.root, "mode": lease.mode,
                "capability": granted.capability, "fencing_token": lease.fencing_token}), "lease")
            faults.point(LEASE_KEPT)
            mark("start.leased")
        subscriber = self.myAddress if PUSH else None
        version = self.record.state_version if self.record is not None else 0
        opened = yield from self._open(info, OpenSession(self.session_id, config, attached.lease_id, subscriber,
                                                         start=start, state_version=version, park_approvals=True,
                                                         answered=tuple(a for a, _ in answered),
                                                         answered_asks=tuple(d for _, d in answered),
                                                         tail_turn=tail))
        if isinstance(opened, AlreadyOpen):
            raise RuntimeTaken(f"runtime {info.id} (generation {format_generation(info.generation)}) serves another "
                               f"session: {opened}")
        if isinstance(opened, StaleGeneration):  # another actor holds its port: it died (see for_runtime)
            raise RuntimeTaken(f"runtime {info.id} (generation {format_generation(info.generation)}) is gone: "
                               f"another actor answered at its address ({opened})")
        if isinstance(opened, ActorCrashed):  # it crashed opening: gone as surely as one killed there (it ran nothing)
            raise RuntimeLost(f"runtime {info.id} (generation {format_generation(info.generation)}) crashed while "
                              f"opening: {opened}")
        if not isinstance(opened, Opened):
            raise CoordinatorError(f"the runtime did not open the session: {opened!r}")
        attached.runtime_id = opened.runtime_id
        mark("start.opened")
        faults.point(RUNTIME_OPENED)
        self._poll()
        return opened

    def _discard(self, runtime: _Attached, stop: bool = True) -> Generator[Ask, Any, None]:
        """Stop a runtime that opened no session (``stop``), and release the lease granted for it, if any."""
        if self.attached is runtime:
            self.attached = None
        if stop:
            yield self._execution(AdminCall("terminate_child", runtime.key), 10.0)
        if runtime.lease_id is not None:
            released = yield self._authority("workspace", Release(runtime.lease_id, runtime.capability))
            self._released(runtime.lease_id, released)

    def _open(self, info: Any, request: OpenSession) -> Generator[Ask, Any, Any]:
        """Ask the runtime child ``info`` to open, watching it: thespian tells nobody but its supervisor that it
        died, so every :data:`OPEN_SLICE_S` without an answer the supervisor is asked whether the child is still the
        one started. Gone: :class:`RuntimeLost` (seconds, not the whole :data:`OPEN_TIMEOUT_S`); alive: the same
        open is asked again (a runtime answers a repeated open as the first)."""
        waited = 0.0
        while True:
            opened = yield Ask(info.address, for_runtime(info.generation, request), OPEN_SLICE_S)
            if not isinstance(opened, TimedOut):
                return opened
            waited += OPEN_SLICE_S
            child = yield self._execution(AdminCall("which_child", info.id), 10.0)
            generation, status = getattr(child, "generation", None), getattr(child, "status", None)
            if generation != info.generation or status != "running":
                if status == "running":  # its supervisor restarted it: that incarnation holds nothing, a stray
                    yield self._execution(AdminCall("terminate_child", info.id), 10.0)
                raise RuntimeLost(f"runtime {info.id} (generation {format_generation(info.generation)}) died while "
                                  "opening: "
                                  f"now {status or child!r}")
            if waited >= OPEN_TIMEOUT_S:
                return opened

    def _stop_stray(self) -> Job:
        """A session that holds no runtime may still have one open: its coordinator died after the turn's last
        checkpoint and before closing it. Close it and release its lease, so the next turn can lease the root. One
        its coordinator started and died before opening is stopped."""
        where = get_runtime(self.store, self.session_id)
        if where is None:
            return
        info = yield self._execution(AdminCall("which_child", where["key"]), 10.0)
        if getattr(info, "status", None) != "running" or getattr(info, "generation", None) != where["generation"]:
            return
        stray = _Attached(info.address, where["key"], "", where["generation"])
        status = yield self._runtime_ask(RuntimeStatusRequest(), 5.0, to=stray)
        if isinstance(status, RuntimeStatus) and status.session_id is None:
            # started for this session and never opened (its coordinator died first, e.g. right after a reclaim
            # granted it the session's lease): it ran nothing, and as long as it lives the lease stays its own
            yield from self._discard(stray)
            return
        if not isinstance(status, RuntimeStatus) or status.session_id != self.session_id or not status.open:
            return
        # A waiting session's turn is re-run once the wait ends: the dead coordinator was closing this runtime
        # with the turn unsettled, and so does this one (settling it as interrupted would end the turn).
        waiting = self.record is not None and self.record.state.wait is not None
        yield self._runtime_ask(CloseSession(settle=not waiting), 10.0, to=stray)
        lease = get_lease(self.store, self.session_id)
        if lease is not None and lease.get("capability"):
            released = yield self._authority("workspace", Release(lease["lease_id"], lease["capability"]))
            self._released(lease["lease_id"], released)

    def _attach(self, record: SessionRecord, opened: Opened) -> SessionRecord:
        """Name the runtime just opened in the record (a new generation, above every earlier one)."""
        attachment = RuntimeAttachment(runtime_id=opened.runtime_id, generation=int(opened.generation or 0))
        workspace = self._workspace()
        self.record = value_of(self.store.update(
            self.session_id, record.revision,
            lambda r: r.model_copy(update={"runtime": attachment, "last_generation": attachment.generation,
                                           "workspace": workspace}),
            coordinator=self.incarnation), "attach")
        faults.point(ATTACHED)
        return self.record

    def _send_text(self, text: str) -> Generator[Ask | OffThread, Any, Any]:
        assert self.attached is not None
        return (yield self._runtime_ask(SendText(text)))

    def _close_runtime(self, settle: bool = True) -> Job:
        """Close the attached runtime and release its lease; ``settle`` False leaves a running turn unsettled
        (to be re-run from the checkpoint when the session resumes: see :mod:`.waits`)."""
        attached, self.attached = self.attached, None
        if attached is None:
            return
        yield self._runtime_ask(CloseSession(settle), 10.0, to=attached)  # gone: its lease is released all the same
        faults.point(RUNTIME_CLOSED)
        if attached.lease_id is not None:
            released = yield self._authority("workspace", Release(attached.lease_id, attached.capability))
            self._released(attached.lease_id, released)

    def _close_and_reap(self) -> Job:
        """Close the attached runtime, then have its supervisor terminate it — which answers once the process is
        gone. Recovery's reconciliation must find that runtime's ledger writer dead: the ledger makes a writer's
        unsettled starts ``ambiguous`` (what reconcilers work on) only then, and a runtime that closes exits a
        moment after it answered."""
        where = get_runtime(self.store, self.session_id)
        pid = None
        if where is not None:  # its pid is asked before the close: a closed runtime leaves its supervisor's list
            info = yield self._execution(AdminCall("which_child", where["key"]), 10.0)  # before its process is gone
            if getattr(info, "generation", None) == where["generation"]:
                pid = getattr(info, "pid", None)
        yield from self._close_runtime()
        if where is None:
            return
        info = yield self._execution(AdminCall("which_child", where["key"]), 10.0)
        if getattr(info, "generation", None) != where["generation"]:
            info = None  # gone from its supervisor already (or another runtime is there): not its to stop
        if getattr(info, "status", None) == "running":
            yield self._execution(AdminCall("terminate_child", where["key"]), 10.0)
        if isinstance(pid, int) and pid > 0:  # and gone it is — not merely told to go — before recovery looks
            yield OffThread(functools.partial(_wait_gone, pid, REAP_WAIT_S))



__all__ = ["NAP_S", "PUSH", "RECLAIM_WAIT_S", "WATCH_S", "RuntimeLink", "reclaim_request_id"]


REAP_WAIT_S = 10.0


def _wait_gone(pid: int, timeout_s: float) -> bool:
    """Poll until ``pid`` is gone or a zombie (what the ledger counts as a dead writer), up to ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while pid_alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)  # another process's exit has no event to wait on here: polled, with a deadline
    return True
