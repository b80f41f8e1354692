"""The actor system handle: Python code outside the actors starts, inspects and stops a system.

::

    with ActorSystem.start() as system:          # multiprocTCPBase, one process per actor
        system.start_tree(supervisor("root", [worker("echo", Echo)]))
        system.ask("root/echo", "hi")
        system.kill("root/echo")                 # a real SIGKILL
        system.events.wait_for(lambda e: e.kind == "started" and e.path == "root/echo")

Two bases: ``multiproc`` (thespian's multiprocTCPBase, the default: real processes, sockets on
127.0.0.1, its own free admin port) and ``simple`` (simpleSystemBase: one process, deterministic,
for fast unit tests; no kill, timers fire only while the caller waits; ``simulated=True`` puts it
on virtual time, deterministic to the byte).

A system that is not started ``detached`` dies with the process that started it, and
:meth:`ActorSystem.shutdown` leaves no process and no bound port behind: trees are stopped in
order first, then thespian is shut down, then anything left in the system's session is killed (the admin's
``setsid``; every actor process leads a process group of its own inside it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from thespian.actors import ActorSystem as ThespianSystem

from ..core import clock, procs
from ..core.errors import ActorSystemError, AskTimeout, OuroactorsError, StartInterrupted
from ..supervision import reasons
from ..supervision.actor_paths import unsendable_arguments
from ..supervision.events import Event, EventReader
from ..supervision.generations import bump_node_epoch
from ..supervision.protocol import SystemContext
from ..supervision.specs import ChildSpec
from . import _frames, _lifetime, _logs, _patches, _pickling, _secret, _simulation, _startup, marker
from ._answers import STOPPED
from ._lifetime import session_alive as session_alive  # re-exported: tests wait on it
from ._operations import Operations
from ._startup import free_port as free_port  # re-exported: tests and benchmarks pick ports with it
from ._startup import make_private_dir, parse_address, refuse_unreachable
from .client import ActorRef as ActorRef  # re-exported: ouroactors.ActorRef
from .client import SystemClient, attach_endpoint
from .host import Configure, StartTree, StopTree, TreeHost, TreeInfo

BASES = {"multiproc": "multiprocTCPBase", "simple": "simpleSystemBase"}
LOOPBACK = "127.0.0.1"


_USER_THESPLOG = _logs.USER_THESPLOG  # a file the user chose wins over every system's own


def _log_thespian_into(directory: Path) -> None:
    """Thespian's own log goes into this system's data dir (see :func:`._logs.log_thespian_into`)."""
    _logs.log_thespian_into(directory, _USER_THESPLOG)


class ActorSystem(Operations, SystemClient):
    """A running ouroactors system. Create it with :meth:`start`."""

    def __init__(self, thespian: Any, base: str, data_dir: Path, context: SystemContext,
                 port: int | None, *, owner: bool, pgid: int | None = None) -> None:
        super().__init__(thespian, base, data_dir, port, pgid=pgid, host_class=TreeHost)
        self.context = context
        self.owner = owner
        self.events = EventReader(context.events_path)
        if base == "multiproc" and pgid is None:
            self.admin_pid, self.pgid = self._call(self._host, "admin", 10.0, "host")
        # the mark every process of the system carries (read while the admin lives): what left its session is
        # still found by it at the end (see ouroactors.core.procs)
        self.lineage_mark = procs.system_mark(self.admin_pid) if self.admin_pid is not None else None
        self.stale_marker: marker.Marker | None = None
        self.simulation: _simulation.Simulation | None = None  # set when started with simulated=True
        self._log_handler: Any = None  # the simple base's log file, when the process configured none
        self._closed = False
        self.forced: list[str] = []  # trees whose orderly stop ran out of time in shutdown (their processes killed)
        self._action_mark = 0  # events before this index happened before this handle's last action
        self._owner_proof: int | None = None  # in-process owner: the event log held open (see marker.verify_processes)
        self.in_process: _lifetime.InProcessLineage | None = None  # the simple base's own lineage mark

    # -- lifecycle ----------------------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        base: str = "multiproc",
        data_dir: str | os.PathLike[str] | None = None,
        *,
        detached: bool = False,
        name: str = "ouroactors",
        capabilities: dict[str, Any] | None = None,
        bind_host: str = LOOPBACK,
        admin_port: int | None = None,
        leader: bool = False,
        convention: str | None = None,
        simulated: bool = False,
        pickle_messages: bool = False,
        log_level: str | int | None = None,
        secret_file: str | os.PathLike[str] | None = None,
        join_timeout: float = 10.0,
    ) -> ActorSystem:
        """Start a system on ``base`` with its state under ``data_dir`` (a temp dir if None).

        More than one machine: ``leader=True`` makes this system a thespian convention leader on
        its admin port; ``convention="HOST:PORT"`` joins the convention led there, adding this
        node and its ``capabilities`` (children with ``requires`` are placed by them).

        Every frame between the processes of a multiproc system is authenticated with the
        system's secret (``<data_dir>/secret``, created 0600 on first use; see :mod:`._frames`).
        Nodes of a convention share one secret explicitly: a member joins with
        ``secret_file=`` naming a copy of the leader's secret file. Frames are authenticated,
        not encrypted: across machines, use a network you trust or a tunnel. A member that the leader has not
        registered within ``join_timeout`` seconds (frames tagged with another secret are dropped unanswered)
        is refused with :class:`ActorSystemError`.

        ``simulated=True`` (simple base only) runs the system on virtual time
        (:mod:`._simulation`): timers, restarts, generations and the event log depend only on
        what the system is asked, so the same asks give the same event log byte for byte.

        ``pickle_messages=True`` (simple base only) carries every message pickled and unpickled, as between
        processes (:mod:`._pickling`): what cannot travel on multiproc fails here too, and every receiver gets a copy.

        ``log_level`` (multiproc): the lowest level of the lines every actor logs — the framework's and your own
        ``logging.getLogger(...)`` ones — written to ``<data_dir>/admin.out``; None: the levels of the logging this
        process configured (``logging.basicConfig``), else WARNING. The in-process base logs through the caller's own
        logging.
        """
        if base not in BASES:
            raise ActorSystemError(f"unknown base {base!r}; choose one of {sorted(BASES)}")
        level = None if log_level is None else _logs.level_of(log_level)
        if pickle_messages and base != "simple":
            raise ActorSystemError(f"pickle_messages=True is for the simple base (multiproc pickles every message "
                                   f"anyway), not {base!r}")
        if admin_port is not None and (type(admin_port) is not int or not 1 <= admin_port <= 65535):
            raise ActorSystemError(f"admin_port must be a port number 1-65535 (or None: a free one), "
                                   f"not {admin_port!r}")
        directory = Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix="ouroactors-"))
        try:
            make_private_dir(directory)
        except OSError as exc:
            raise ActorSystemError(f"cannot use {directory} as the data dir: {exc.strerror or exc}") from None
        join = parse_address(convention) if convention else None
        if (leader or join) and base != "multiproc":
            raise ActorSystemError("a convention (leader or join) needs the multiproc base")
        with marker.claiming(directory) as stale:  # refuses a directory a live system serves, or one being claimed
            if join is not None:
                refuse_unreachable(join)
                if secret_file is None:
                    raise ActorSystemError(
                        f"joining the convention led at {convention} needs the leader's secret: pass a copy of "
                        "its <data dir>/secret file (secret_file=..., or --secret-file on the command line)"
                    )
            if simulated and base != "simple":
                raise ActorSystemError(f"simulated=True needs the simple base (one process), not {base!r}")
            # refused: nothing changed
            secret = _secret.for_start(directory, secret_file) if base == "multiproc" else b""
            epoch = bump_node_epoch(directory)
            port: int | None = None
            if base == "multiproc":
                port = admin_port or free_port(bind_host)  # provisional: _startup may choose again
            node = f"{bind_host}:{port}" if port else ("sim" if simulated else f"local:{os.getpid()}")
            simulation = _simulation.begin() if simulated else None  # before anything reads the clock
            context = SystemContext(
                name=name, base=base, data_dir=str(directory), events_path=str(directory / "events.jsonl"),
                node_epoch=epoch, origin_ns=clock.monotonic_ns(), node=node,
            )
            os.environ["OUROACTORS_NODE"] = node  # inherited by the admin and every actor it forks
            if base == "multiproc":
                _patches.install()
                # The framework's loggers are made when their modules are imported. Made before the admin forks, they
                # hang under the root the admin gives its admin.out handler (_patches._log_into_admin_output); made
                # after it, in an actor, under thespian's forwarder, which never writes admin.out — where a crash's
                # error says to look.
                from ..supervision import supervisor as _supervisor  # noqa: F401
                from ..supervision import worker as _worker  # noqa: F401
                os.environ["OUROACTORS_BIND_HOST"] = bind_host
                os.environ["THESPIAN_BASE_IPADDR"] = bind_host
                _log_thespian_into(directory)
                _frames.reset_counter(directory)

                def start_on(chosen: int) -> Any:
                    nonlocal context
                    context = dataclasses.replace(context, node=f"{bind_host}:{chosen}")
                    os.environ["OUROACTORS_NODE"] = context.node
                    _frames.register(chosen, secret, directory / _frames.COUNTER_FILE)
                    _patches.admin_settings.update(detached=detached, stdio_path=str(directory / "admin.out"),
                                                   admin_port=chosen, log_level=level)
                    caps: dict[str, Any] = {**(capabilities or {}), "Admin Port": chosen,
                                            "Process Startup Method": "fork"}
                    if leader:
                        caps["Convention Address.IPv4"] = (bind_host, chosen)
                    elif join is not None:
                        caps["Convention Address.IPv4"] = join
                    return ThespianSystem(
                        BASES[base], caps, logDefs=_logs.log_defs(directory / "actors.log"), transientUnique=True
                    )

                thespian, port = _startup.start_admin(bind_host, admin_port, start_on)
            else:
                try:
                    thespian = ThespianSystem(BASES[base], capabilities or {}, logDefs=False, transientUnique=True)
                    if simulation is not None:
                        simulation.attach(thespian)
                    if pickle_messages:
                        _pickling.attach(thespian)  # after the simulation's base: it keeps virtual time
                except BaseException:
                    if simulation is not None:
                        simulation.stop()
                    raise
            log_handler = _logs.capture_simple(directory / "actors.log") if base == "simple" else None
            lineage = _lifetime.InProcessLineage.begin() if base == "simple" else None  # before any actor runs
            try:
                system = cls(thespian, base, directory, context, port, owner=True)
                system.simulation, system._log_handler = simulation, log_handler
                if lineage is not None:
                    system.in_process, system.lineage_mark = lineage, lineage.mark
                system._call(system._host, Configure(context, convention=bool(leader or join)), 10.0, "host")
                if join is not None:
                    system._await_convention(join, join_timeout)
            except BaseException:
                thespian.shutdown()
                if simulation is not None:
                    simulation.stop()
                _logs.release(log_handler)
                if lineage is not None:
                    lineage.end()
                raise
            system.stale_marker = stale
            if base == "simple":  # what `stop` checks before it signals an in-process system's owner
                system._owner_proof = os.open(context.events_path,
                                              os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
            system.marker = marker.Marker(
                base=base, admin_port=port, admin_pid=system.admin_pid, admin_pgid=system.pgid,
                admin_start_ticks=marker.process_start_ticks(system.admin_pid) if system.admin_pid else None,
                owner_pid=os.getpid(), detached=detached, bind_host=bind_host, node_epoch=epoch,
                started_ns=time.time_ns(), origin_ns=context.origin_ns, name=name,
            )
            marker.write_marker(directory, system.marker)
        return system

    @classmethod
    def connect(cls, data_dir: str | os.PathLike[str]) -> ActorSystem:
        """Attach to the live system serving ``data_dir`` (started by another process).

        The handle does not own the system: dropping it leaves the system running; only an
        explicit :meth:`shutdown` stops it.
        """
        directory = Path(data_dir)
        found, thespian = attach_endpoint(directory)
        context = SystemContext(
            name=found.name, base=found.base, data_dir=str(directory), events_path=str(directory / "events.jsonl"),
            node_epoch=found.node_epoch, origin_ns=found.origin_ns,
        )
        system = cls(thespian, found.base, directory, context, found.admin_port, owner=False, pgid=found.admin_pgid)
        system.admin_pid = found.admin_pid
        system.lineage_mark = (procs.system_mark(found.admin_pid, found.admin_start_ticks)
                               if found.admin_pid is not None else None)
        system.marker = found
        return system

    def __enter__(self) -> ActorSystem:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.owner:
            self.shutdown()

    def shutdown(self, timeout: float = 30.0) -> None:
        """Stop every tree in reverse start order, shut thespian down, sweep what is left.

        ``timeout`` bounds the orderly part as a whole, not each tree. A tree still stopping when it runs out is
        not waited for (nor is thespian's own orderly shutdown, which would wait on the same busy actors): the sweep
        kills every process of the system, :attr:`forced` names the tree, and the event log says so
        (``stop_forced``) — a stop that had to kill is never reported as an orderly one.
        """
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + timeout
        try:
            if not self.admin_alive():
                return  # nothing to ask politely: sweep what may be left
            with contextlib.suppress(OuroactorsError):
                for tree in reversed(self.trees()):
                    if tree.status in ("running", "starting"):
                        try:
                            self.stop_tree(tree.name, timeout=max(deadline - time.monotonic(), 0.001))
                        except AskTimeout:
                            self._forced(tree.name, timeout)
                        except OuroactorsError:
                            pass  # ended meanwhile, or already stopping
        finally:
            self._close_endpoints()
            if not (self.forced and self.base == "multiproc"):
                self._thespian.shutdown()
            if self.simulation is not None:
                self.simulation.stop()
            _logs.release(self._log_handler)
            with contextlib.suppress(Exception):  # fails fast, without closing, when the admin is gone
                self._thespian._systemBase.transport.close()
            self._sweep()
            if self.in_process is not None:
                self.in_process.end()  # what carries the in-process system's mark, and the environment put back
            marker.remove_marker(self.data_dir, self.marker)
            if self._owner_proof is not None:
                os.close(self._owner_proof)
                self._owner_proof = None
            if self.owner and self.admin_port is not None:
                _frames.forget(self.admin_port)  # a later system on this port registers its own key

    def _forced(self, tree: str, timeout: float) -> None:
        self.forced.append(tree)
        _lifetime.log_stop_forced(self.context, tree, timeout)

    def dropped_frames(self) -> dict[str, int]:
        """Inbound frames the processes of this system dropped unread, by reason (see :mod:`._frames`)."""
        return _frames.dropped(self.data_dir)

    def _sweep(self) -> None:
        """Kill anything still in the system's session, and every program that carries its lineage mark."""
        if self.pgid is not None and self.pgid not in (os.getpgid(0), os.getsid(0)):
            _lifetime.sweep_session(self.pgid, self.lineage_mark)

    # -- events ---------------------------------------------------------------------------------------

    def wait_for(self, kind: str | None = None, path: str | None = None, timeout: float = 10.0,
                 predicate: Callable[[Event], bool] | None = None, after: int | None = None) -> Event:
        """Wait for the first event of ``kind`` at ``path`` matching ``predicate``.

        By default only events logged **after this handle's last action** count: ``start_tree``,
        ``stop_tree``, ``start_child``, ``terminate_child``, ``restart_child``, ``delete_child``, ``kill``
        and ``arm_faults`` each take a :meth:`mark` before they act. So ``kill(path)`` then
        ``wait_for("started", path)`` waits for the *restart*, not the start logged long before. An ask or a
        tell is not an action here (marking every ask would cost every ask a read of the log): to wait for
        what an ask causes, take ``m = system.mark()`` before it and pass ``after=m``. ``after=0`` searches
        the whole log of this run.
        """

        def matches(event: Event) -> bool:
            return ((kind is None or event.kind == kind) and (path is None or path in (event.path, event.subject))
                    and (predicate is None or predicate(event)))

        start = self._action_mark if after is None else after
        return self.events.wait_for(matches, timeout, after=start, idle=self._idle)

    def mark(self) -> int:
        """The number of events seen so far: pass it as ``after`` to wait only for newer ones."""
        self.events.poll()
        return len(self.events.seen)

    def _acting(self) -> None:
        """Called by every action before it acts: :meth:`wait_for` then looks only at what follows."""
        self._action_mark = self.mark()

    def run_for(self, seconds: float) -> None:
        """Let the system run for ``seconds``: on multiproc, wait; the in-process base only runs while
        called; a simulated one passes that much virtual time at once (timers due in it fire, in order)."""
        if not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds < 0:
            raise ValueError(f"seconds: must be a number >= 0, got {seconds!r}")
        if self._closed:  # a loop waiting on a system somebody shut down would otherwise wait forever
            raise ActorSystemError("the system was shut down: run_for has nothing to run")
        self._idle(seconds)

    def _idle(self, seconds: float) -> None:
        if self.base == "simple":
            with self._taking_turns():
                self._thespian.listen(seconds)  # the in-process base only runs while called
        else:
            time.sleep(seconds)

    # -- trees ----------------------------------------------------------------------------------------

    def start_tree(self, spec: ChildSpec, timeout: float = 60.0, *,
                   interrupted: Callable[[], bool] | None = None) -> TreeInfo:
        """Start a tree (its root is ``spec``, a supervisor spec); wait until it is up.

        ``interrupted`` (multiproc): looked at every 0.1 s while the start is not answered; once it says True the
        wait ends with :class:`StartInterrupted` (the tree is left starting: stop it, or shut the system down) —
        how ``ouroactors run`` lets Ctrl-C or ``stop`` end a boot whose ``on_start`` hangs.
        """
        if not isinstance(spec, ChildSpec):
            raise TypeError(f"start_tree takes a supervisor spec (ouroactors.supervisor(...), or the tree of a "
                            f"loaded tree file), not {type(spec).__name__}")
        if not spec.is_supervisor:
            raise ActorSystemError(f"a tree's root must be a supervisor spec, not a {spec.type.value}")
        self._check_sendable(unsendable_arguments(spec))
        self._acting()
        if interrupted is None or self.base != "multiproc":
            result = self._call(self._host, StartTree(spec, self.context), timeout, spec.id)
        else:
            answer = self._ask_raw(self._host, StartTree(spec, self.context), timeout, gone=interrupted)
            if answer is STOPPED:
                raise StartInterrupted(f"the start of tree {spec.id!r} was interrupted before it was up")
            result = self._answer(answer, spec.id, timeout)
        assert isinstance(result, TreeInfo)
        return result

    def stop_tree(self, name: str, reason: str | None = None, timeout: float = 60.0) -> TreeInfo:
        """Terminate a tree politely (children in reverse start order); wait until it is gone."""
        self._acting()
        return self._call(self._host, StopTree(name, reasons.shutdown(reason)), timeout, name)
