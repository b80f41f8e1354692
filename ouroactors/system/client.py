"""A thin client of a running system: the trees, their children, asks by path — nothing that starts one.

:class:`SystemClient` is what ``ouroactors status`` and ``tree`` need: it attaches to the system serving a
data dir (its marker names the admin port), asks the tree host which trees run and each supervisor which
children it has, and resolves paths for asks. It imports thespian's multiproc endpoint, the frame patches
and the small dataclasses of the answers — and not the pydantic specs, the supervisor, the host actor or the
event log: those are what made every such call pay ~0.2 s of imports before it asked anything. The tree
host is named to thespian by its class *path* (:data:`~.host_protocol.HOST_CLASS`), so the admin, which
already runs it, answers its address without this process importing the class.

:class:`~.handle.ActorSystem` is a client too (it inherits every query here) and adds what owns a system:
starting, stopping, the event log, the OTP admin calls that change a tree, fault injection.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from ..core.errors import (
    ActorCrashed,
    ActorCrashedBefore,
    ActorStopped,
    ActorStopping,
    ActorSystemError,
    NoSuchActor,
    OuroactorsError,
    StaleGeneration,
)
from ..core.generation_text import format_generation
from ..supervision.calls import AdminCall, Stamped
from ..supervision.child_info import ChildInfo
from . import _stopped, marker
from ._answers import STOPPED, Answers, _check_timeout
from ._ref import ActorRef, _addressed, _stopped_error
from ._resolving import Resolving
from ._threads import ThreadEndpoints
from .host_protocol import HOST_CLASS, HOST_NAME, ListTrees, TreeInfo

MULTIPROC = "multiprocTCPBase"


_UNHANDLED = object()  # an ask whose worker had stopped before it was sent (see SystemClient._ask_path)
TELL_WAIT_S = 1.0  # how long a tell waits for the next incarnation of a worker this handle knows is down
RESENDS = 3  # an ask by path is sent again at most this often, each time after an answer that proves it unhandled


def _refused_as_moved(answer: Any, generation: int | None) -> bool:
    """Did the worker at the address refuse an ask addressed to ``generation`` (another incarnation holds the
    port, or the worker's generation moved on)? A stale stamp of the caller's own names another generation."""
    return generation is not None and isinstance(answer, StaleGeneration) and answer.got == generation


def attach_endpoint(directory: Path) -> tuple[marker.Marker, Any]:
    """The live multiproc system serving ``directory``: its marker and a thespian endpoint to its admin.

    Refused with :class:`ActorSystemError` naming why: no marker, a stale one, an in-process system.
    Frames to the admin are authenticated with the data dir's secret, registered here for its port.
    """
    from thespian.actors import ActorSystem as ThespianSystem

    from . import _frames, _logs, _patches, _secret

    found = marker.read_marker(directory)
    if found is None:
        raise ActorSystemError(f"no system marker in {directory}: is a system running with this data dir?")
    if not marker.is_live(found):
        raise ActorSystemError(
            f"{directory}: the system started by pid {found.owner_pid} is gone (stale marker); "
            "the next start on this data dir cleans it up"
        )
    if found.base != "multiproc":
        raise ActorSystemError(
            f"the system in {directory} runs on the in-process simple base (pid {found.owner_pid}); "
            "it cannot be reached from another process"
        )
    _patches.install()
    secret = _secret.read_secret_file(directory / _secret.SECRET_NAME)
    if found.admin_port is not None:
        _frames.register(found.admin_port, secret, directory / _frames.COUNTER_FILE)
    os.environ["OUROACTORS_BIND_HOST"] = found.bind_host
    os.environ["THESPIAN_BASE_IPADDR"] = found.bind_host
    _logs.log_thespian_into(directory)
    return found, ThespianSystem(MULTIPROC, {"Admin Port": found.admin_port}, transientUnique=True)


class SystemClient(Resolving, Answers):
    """Queries of a running system: trees, children, paths, asks and tells. Create it with :meth:`attach`."""

    def __init__(self, thespian: Any, base: str, data_dir: Path, port: int | None, *, pgid: int | None = None,
                 host_class: Any = HOST_CLASS) -> None:
        self._thespian = thespian
        self._asker: Any = None  # a fresh endpoint once an ask timed out (see _answers)
        # other threads ask through endpoints of their own; the in-process base's calls take turns (see _threads)
        self._threads = ThreadEndpoints(self._fresh_endpoint) if base == "multiproc" and port is not None else None
        self._turns = threading.RLock() if base != "multiproc" else None
        self._teller_lock = threading.Lock()
        self.base = base
        self.data_dir = data_dir
        self.admin_port = port
        self.pgid = pgid
        self.admin_pid: int | None = None
        self.marker: marker.Marker | None = None
        self._addresses: dict[str, Any] = {}
        self._workers: set[str] = set()  # the paths in _addresses that are workers (see ActorRef.worker)
        self._generations: dict[str, int] = {}  # a worker path's generation when it was resolved (see ask)
        self._resolved_at: dict[str, int] = {}  # where the event log ended when a path was resolved (._stopped)
        self._watches: dict[str, _stopped.Watch] = {}  # per path, whether its resolved worker is down (._stopped)
        self._down: dict[str, int] = {}  # per worker path, a generation known to serve no more (see ask)
        self._host = thespian.createActor(host_class, globalName=HOST_NAME)

    @classmethod
    def attach(cls, data_dir: str | os.PathLike[str]) -> SystemClient:
        """A client of the live system serving ``data_dir`` (started by another process)."""
        directory = Path(data_dir)
        found, thespian = attach_endpoint(directory)
        client = cls(thespian, found.base, directory, found.admin_port, pgid=found.admin_pgid)
        client.admin_pid, client.marker = found.admin_pid, found
        return client

    def close(self) -> None:
        """Close this process's endpoints; the system runs on (only its owner or ``stop`` ends it)."""
        import contextlib

        self._close_endpoints()
        with contextlib.suppress(Exception):
            self._thespian._systemBase.transport.close()

    def admin_alive(self) -> bool:
        """Whether the admin process of a multiproc system still runs (always True in-process)."""
        if self.base != "multiproc" or self.admin_pid is None:
            return True
        return marker.process_start_ticks(self.admin_pid) is not None

    # -- the shape of the system ----------------------------------------------------------------------

    def trees(self) -> list[TreeInfo]:
        return self._call(self._host, ListTrees(), 10.0, "host")

    def _admin(self, supervisor_path: str, call: AdminCall, timeout: float = 30.0) -> Any:
        """An OTP admin call to the supervisor at ``supervisor_path``; one that stops before it answers (it reached
        its intensity) ends the wait with :class:`~ouroactors.core.errors.ActorStopped` (see :mod:`._stopped`)."""
        logged = _stopped.log_end(self.data_dir) if self.base == "multiproc" else None  # before it is resolved
        address, info = self._locate(supervisor_path)
        if info is not None and info.type != "supervisor":
            parent = supervisor_path.strip("/").rpartition("/")[0]
            raise NoSuchActor(f"{supervisor_path.strip('/')} is a {info.type}, not a supervisor: {call.op} goes to "
                              f"the supervisor of a child (here {parent})")
        where = supervisor_path.strip("/")
        generation = info.generation if info is not None and type(info.generation) is int else None
        gone = _stopped.watch(self.data_dir, logged, where, generation) \
            if logged is not None and generation is not None else None
        asked = time.monotonic()
        answer = self._ask_raw(address, call, timeout, gone=gone)
        if self._undelivered(answer, asked, timeout):
            raise NoSuchActor(f"supervisor {where} is gone (the call came back undelivered); {call.op} was not "
                              "carried out")
        if answer is STOPPED:
            raise ActorStopped(f"supervisor {where} (generation {format_generation(generation)}) stopped before it "
                               f"answered {call.op}; it may or may not have been carried out")
        return self._answer(answer, supervisor_path, timeout)

    def _undelivered(self, answer: Any, asked: float, timeout: float) -> bool:
        """An empty answer at once (multiproc): a dead letter — the actor at that address is gone — not a silence,
        which takes the whole timeout (the in-process base answers a silence at once too)."""
        return answer is None and self.base == "multiproc" and time.monotonic() - asked < timeout / 2

    def which_children(self, supervisor_path: str) -> list[ChildInfo]:
        """Children newest first, as OTP's ``which_children``."""
        return self._admin(supervisor_path, AdminCall("which_children"))

    def child_info(self, path: str) -> ChildInfo:
        parent, _, child_id = path.strip("/").rpartition("/")
        if not parent:
            names = [tree.name for tree in self.trees()]
            if child_id in names:
                raise NoSuchActor(f"{path!r} is a tree root, not a child: its state is in trees()")
            raise NoSuchActor(f"no actor at {path!r}: no tree of that name (trees: {', '.join(names) or 'none'})")
        return self._admin(parent, AdminCall("which_child", child_id))

    def walk(self, root: str | None = None, *, trees: list[TreeInfo] | None = None) -> list[tuple[str, ChildInfo]]:
        """Every child of every running tree (or of ``root``), depth first, in start order.

        Each supervisor is asked at the address its parent reported, not resolved again from the root: one
        ask per supervisor. ``trees`` (an answer of :meth:`trees` the caller already has) saves one more.

        A walk is a snapshot of a tree that may be restarting: a supervisor below the first that stopped since its
        parent listed it (it answers that it is not running, or ends with the question in hand: :mod:`._stopped`)
        keeps the row its parent gave it, and its children are left out.
        """
        out: list[tuple[str, ChildInfo]] = []
        logged = _stopped.log_end(self.data_dir) if self.base == "multiproc" else None  # before anyone is asked

        def visit(path: str, address: Any, listed: ChildInfo | None = None) -> None:
            generation = listed.generation if listed is not None and type(listed.generation) is int else None
            gone = _stopped.watch(self.data_dir, logged, path, generation) \
                if logged is not None and generation is not None else None
            asked = time.monotonic()
            answer = self._ask_raw(address, AdminCall("which_children"), 30.0, gone=gone)
            if listed is not None and (answer is STOPPED or self._undelivered(answer, asked, 30.0)
                                       or isinstance(answer, NoSuchActor)):
                return  # stopped since its parent listed it (a restart in flight)
            children: list[ChildInfo] = self._answer(answer, path, 30.0)
            for child in reversed(children):  # OTP order is newest first
                child_path = f"{path}/{child.id}"
                out.append((child_path, child))
                if child.type == "supervisor" and child.status == "running":
                    visit(child_path, child.address, child)

        if root:
            address, info = self._locate(root)
            if info is not None and info.type != "supervisor":
                return [(root.strip("/"), info)]  # a worker has no children: its own row
            visit(root.strip("/"), address)
        else:
            for tree in self.trees() if trees is None else trees:
                if tree.status == "running":
                    visit(tree.name, tree.address)
        return out

    # -- addressing -----------------------------------------------------------------------------------

    def resolve(self, path: str, timeout: float = 10.0) -> Any:
        """The current address of the actor at ``path`` (``root/child/grandchild``)."""
        return self._locate(path, timeout)[0]

    def ref(self, path: str) -> ActorRef:
        logged = _stopped.log_end(self.data_dir)  # before the supervisor is asked
        address, info = self._locate(path)
        worker = info is not None and info.type == "worker"
        return ActorRef(self, path, address, worker=worker, generation=info.generation if info is not None else None,
                        resolved_at=logged)

    def ask(self, path: str, message: Any, timeout: float = 5.0, *, stamp: int | None = None) -> Any:
        """Ask the actor at ``path``; errors it answers with are raised here.

        Addresses are cached per path. An ask to a gone actor comes back empty at once (a dead
        letter: the message was not handled), unlike a live actor that does not answer, which
        takes the whole timeout; so a fast empty answer re-resolves the path and asks the new
        incarnation once. In-process an empty answer also comes at once from a worker that died handling the ask (a
        simulated death): there the event log decides — the worker's end logged before the ask left is a dead letter,
        asked again; after, :class:`~ouroactors.core.errors.ActorStopped` (it may have been handled), as on
        multiproc. Any error also drops the cached address.

        An address is a TCP port and a dead worker's goes to whoever comes next: an ask to a worker goes
        :class:`~ouroactors.supervision.calls.Addressed` to the generation it had when its path was resolved, so
        another worker at that port refuses it. Refused so (or the worker's generation moved on), the path is
        resolved again and asked once more. While its supervisor still names the same address and generation, a
        refusal by the worker itself (its generation moved on in place) is asked again bare; one by another worker
        is :class:`~ouroactors.core.errors.NoSuchActor`, never asked of that worker.

        A worker generation that answered its own crash (``ActorCrashed``), or stopped without answering, is never
        asked again: its supervisor names it for a moment after the crash, until it has handled the exit, and an ask
        sent to it then was dropped by the exiting process (the ask right after a crash waited out its timeout, or
        ended ``ActorStopped`` after 0.7 s). The next ask by the path waits, within its timeout, for the supervisor
        to name the next incarnation. An ask whose worker's end was logged before the ask was sent was never handled
        (:mod:`._stopped`), nor one refused ``ActorStopping`` (its supervisor was stopping it, say for a rest_for_one
        group restart): it is asked of the next incarnation, not reported as an outcome nobody knows. An ask is sent
        again at most :data:`RESENDS` times, each time only after an answer that proves it was not handled.
        """
        _check_timeout(timeout)  # before it is added to a clock
        payload = Stamped(stamp, message) if stamp is not None else message
        deadline = time.monotonic() + timeout
        address = self._address_of(path, deadline)
        generation = asked = self._generations.get(path)
        started = time.monotonic()
        answer = self._ask_path(path, address, generation, payload, timeout)
        for _ in range(RESENDS):  # only while what came back proves the request was not handled
            moved = _refused_as_moved(answer, generation)
            if not (moved or answer is _UNHANDLED or (answer is None and self.base == "multiproc"
                                                          and time.monotonic() - started < timeout / 2)):
                break  # (in-process an empty answer is a dead letter only when the log says so: _UNHANDLED)
            self._addresses.pop(path, None)
            fresh = self._address_of(path, deadline)  # past a generation known down (see _locate_past_down)
            now = self._generations.get(path)
            if fresh != address or now != generation:
                address, generation = fresh, now
                asked, started = now, time.monotonic()
                # (a resend gets what is left of the timeout, never less than a tenth of it)
                answer = self._ask_path(path, fresh, now, payload, max(deadline - started, timeout / 10))
            elif moved and answer.authority == path.strip("/"):
                # the worker itself, its generation moved on in place, which its supervisor has not heard of yet:
                # asked as before
                answer = self._ask_raw(fresh, payload, timeout, worker=path in self._workers)
                break
            elif moved:  # another worker holds the port, and the supervisor still names it: that worker is gone
                self._addresses.pop(path, None)
                raise NoSuchActor(f"{path}: its address is {answer.authority}'s now, and its supervisor has not "
                                  "noticed that it is gone yet; nothing was asked")
            else:
                break
        if answer is STOPPED or answer is _UNHANDLED:
            self._addresses.pop(path, None)
            raise _stopped_error(path, asked, answer is _UNHANDLED, "ask again once its supervisor has restarted it")
        try:
            return self._answer(answer, path, timeout)
        except OuroactorsError:
            self._addresses.pop(path, None)
            raise

    def _ask_path(self, path: str, address: Any, generation: int | None, payload: Any, timeout: float) -> Any:
        """One ask of the actor at ``path`` (``generation``: the worker's, when resolved): its raw answer, or
        :data:`~._answers.STOPPED` when the worker stopped without answering, or :data:`_UNHANDLED` when its end
        was logged before the ask was sent (see :mod:`._stopped`). A worker that stopped, or answered its own crash,
        is remembered as down (see :meth:`_locate_past_down`)."""
        watch = self._stop_watch(path)
        sent_at = _stopped.log_end(self.data_dir) if watch is not None else None
        # in-process, event times may be virtual (a simulated system): only where the log stood tells "before"
        sent_ns = time.monotonic_ns() if self.base == "multiproc" else None
        answer = self._ask_raw(address, _addressed(generation, payload), timeout, worker=path in self._workers,
                               gone=_stopped.AskWatch(watch, sent_at, sent_ns) if watch is not None else None)
        if generation is None or path not in self._workers:
            return answer
        if answer is None and watch is not None and self.base != "multiproc" and watch():
            # in-process an empty answer comes at once both from a dead letter and from a worker that died handling
            # the ask (a simulated death): the log tells which — its end logged before the ask left, or after
            answer = STOPPED
        if answer is STOPPED:
            self._down[path] = generation
            assert watch is not None
            return _UNHANDLED if watch.ended_before(sent_at, sent_ns) else STOPPED
        if isinstance(answer, ActorCrashed) and answer.path == path.strip("/"):
            self._down[path] = generation  # it crashed (on this request or an earlier one): it serves no more
            if isinstance(answer, ActorCrashedBefore):
                return _UNHANDLED  # it crashed before this request came (another handle's, say): not handled
        elif isinstance(answer, ActorStopping) and answer.path == path.strip("/"):
            self._down[path] = generation  # its supervisor is stopping it (a group restart, say): not handled
            return _UNHANDLED
        return answer

    def _stop_watch(self, path: str) -> _stopped.Watch | None:
        """Whether the worker at ``path`` has stopped since its path was resolved (:mod:`._stopped`), one watch per
        resolution; None where nothing can tell (not a worker, no generation)."""
        generation, offset = self._generations.get(path), self._resolved_at.get(path)
        if path not in self._workers or generation is None or offset is None:
            return None
        found = self._watches.get(path)
        if found is None or found.generation != generation or found.path != path.strip("/"):
            found = self._watches[path] = _stopped.watch(self.data_dir, offset, path.strip("/"), generation)
        return found

    def tell(self, path: str, message: Any) -> None:
        """Send ``message`` to the actor at ``path`` and return; whatever it sends back is dropped (see _tell).

        Addressed as an ask is (to the generation cached with the path's address): another worker that got the
        cached port refuses it instead of acting on it. Nothing comes back to say so, so such a tell is lost, as a
        tell to a dead actor's unbound port is; the next ask by the path resolves it again. A worker generation this
        handle knows is down (it answered its crash) is never told: the tell waits up to :data:`TELL_WAIT_S` for its
        supervisor to name the next incarnation (see :meth:`ask`).
        """
        address = self._address_of(path, time.monotonic() + TELL_WAIT_S)
        self._tell(address, _addressed(self._generations.get(path), message))

    def _address_of(self, path: str, deadline: float | None = None) -> Any:
        address = self._addresses.get(path)
        if address is None:
            logged = _stopped.log_end(self.data_dir)  # before the supervisor is asked
            address, info = self._locate_past_down(path, deadline)
            self._resolved_at[path] = logged
            self._watches.pop(path, None)  # a new resolution: watched from where the log ended before it
            self._addresses[path] = address
            if info is not None and info.type == "worker":
                self._workers.add(path)
                if type(info.generation) is int:
                    self._generations[path] = info.generation
                else:
                    self._generations.pop(path, None)
            else:
                self._workers.discard(path)
                self._generations.pop(path, None)
        return address
