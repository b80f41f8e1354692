"""Process-level fixes to thespian's multiproc bases, installed once and inherited across fork.

Thespian forks every actor process (``Process Startup Method`` = fork, the default we keep), so a
change made to its modules in the process that creates the system is present in the admin and in
every actor. Thirteen things are changed, each because thespian's behaviour would break a promise of
ours:

1. **Loopback binding.** Thespian binds every actor socket to ``('', port)`` — all interfaces.
   Only the admin port is bound where ``OUROACTORS_BIND_HOST`` (``--bind``, default 127.0.0.1)
   says; every other socket listens on 127.0.0.1 (:func:`actor_bind_host`).
2. **No orphans.** Killing a middle actor leaves its children running with ppid 1, even across
   ``shutdown()``. Every actor process asks the kernel for ``SIGKILL`` when its parent dies
   (``PR_SET_PDEATHSIG``), so the death of any supervisor takes its whole subtree with it.
3. **A system dies with its creator.** The admin double-forks into its own session and outlives
   the script that started it. Unless the system is started *detached*, the admin watches the
   creator's pid (a pidfd) and kills its own process group when the creator is gone.
4. **Convention timers.** A member that stops re-registering is dropped by the leader only after
   7 min 22 s × 3 by default; we use 2 s × 3 so ``node_left`` arrives within seconds. (Children
   lost with a node are detected faster still, by their supervisor's heartbeat.)
5. **A fresh frame-stack chunk for every actor loop (CPython 3.11/3.12).** An actor forked deep
   inside its supervisor's handler runs its message loop ~80 frames down, right at a 16 KiB
   boundary of CPython's frame stack, and then every message maps and unmaps a stack chunk
   (python/cpython#142183, fixed in 3.13+): measured 80+ page faults and ~0.8 ms per ask. Entering
   the actor through one frame larger than a chunk starts its loop at the top of a fresh chunk.
6. **Quiet daemons.** The admin inherits the creator's stdout/stderr, which makes ``cmd | tail``
   and CI log capture hang until it exits; the admin's standard streams go to a log file.
7. **Authenticated, bounded frames** (:mod:`._frames`). Any local user can connect to 127.0.0.1
   and thespian unpickles whatever arrives; every frame of an ouroactors system carries an HMAC
   of the system's secret and is unpickled only if it checks out, and no frame may be larger
   than a cap, refused before its body is read.
8. **Faults crash.** Thespian installs a Python handler for every catchable signal, so a SIGBUS
   or SIGSEGV (a truncated LMDB map) returns to the faulting instruction forever and the process
   spins instead of dying. SIGSEGV/SIGBUS/SIGILL/SIGFPE keep their default action in every
   process of a system, so the supervisor sees the exit.
9. **No inherited listeners.** The admin is forked from the process that starts the system and
   inherited its sockets (its thespian endpoint's listening socket, connections to other
   systems, the admin port's reservation): a detached system kept them bound after the creator
   exited. The admin closes them before it starts; every actor forks from the admin after that,
   and the logger (forked from the admin) closes the admin's, which it used to keep bound after
   the admin was killed.
10. **Every actor's log lines where the user is told to look.** Thespian gave each actor process a new root
   logger (a forwarder to its logger process, ``actors.log``) and a new logger manager: a logger made before the fork
   (a module imported by ``run`` or the test) still logged under the creator's root, one made in the actor went to
   ``actors.log`` — two places for one logger name, and a user's ``log.info`` reached neither. Every process now
   keeps the root it was forked with (:func:`_inherited_root`), which the admin points at ``admin.out`` from the
   system's ``log_level`` (:func:`_log_into_admin_output`), where crash tracebacks go too.
11. **Messages described only when a log line is written** (:mod:`._lazy_describe`): thespian rendered every
   message it sent or received for DEBUG lines it then dropped.
12. **A poll selector in the transport loop** (:mod:`._selector`): thespian builds a new selector on every turn of
   its loop and registers every open socket in it; as epoll that cost a system call per socket per turn, which made
   a supervisor of a thousand children slow down with every child (starting them took ~76 s). A descriptor the loop
   lists twice is one registration there (a selector's ``KeyError`` had killed an actor process).
13. **Each actor process leads a process group of its own**, inside the system's session
   (:func:`._lifetime.lead_own_group`), so what an actor started can be ended by its group after the actor was
   SIGKILLed from outside. A system's processes are found and ended by its session (the admin's ``setsid``), and
   what left the session by the lineage marks every one of them carries (:func:`._lifetime.mark_actor`).

14. **A dead logger is restarted, not fatal**: thespian's restart read an attribute its admin never set.
15. **A dead tree host ends the system** (:func:`._lifetime.end_headless_system`) instead of leaving it headless.

Patches 2, 3 and 13 live in :mod:`._lifetime` (how a system's processes end together).
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import pickle
import signal
import socket
import stat
import weakref
from typing import Any

from ..supervision import sendable
from . import _frames, _lazy_describe, _selector
from ._lifetime import enter_actor_process, expected_parent, set_parent_death_signal, watched_admin

_installed = False

# Set by the system handle in the creating process just before thespian forks the admin.
admin_settings: dict[str, Any] = {"detached": False, "stdio_path": None, "admin_port": None, "log_level": None}

FAULT_SIGNALS = frozenset({signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE})

# Sockets of this process that a forked admin must not keep: every thespian transport made here,
# and the admin port's reservation (see _startup). Closed in the admin child before it starts.
_transports: weakref.WeakSet[Any] = weakref.WeakSet()
reserved_sockets: list[socket.socket] = []


def default_fault_signals() -> None:
    """Let SIGSEGV/SIGBUS/SIGILL/SIGFPE kill this process (no Python handler, no faulthandler)."""
    if faulthandler.is_enabled():
        faulthandler.disable()
    for number in FAULT_SIGNALS:
        signal.signal(number, signal.SIG_DFL)


def actor_bind_host(bind_host: str) -> str:
    """Where actor sockets listen: loopback, unless the system advertises one specific address.

    Only the admin port is bound where ``--bind`` asks; with ``0.0.0.0`` actors still advertise
    0.0.0.0 (which the kernel routes to loopback) and stay on 127.0.0.1. A specific address is
    what actors advertise to other nodes, so they must listen on it (that one address only).
    """
    if bind_host in ("", "0.0.0.0", "127.0.0.1", "localhost"):
        return "127.0.0.1"
    return bind_host


def _close_inherited_sockets() -> None:
    """In a freshly forked admin: close every socket the creating process owned."""
    owned: list[Any] = list(reserved_sockets)
    reserved_sockets.clear()
    for transport in list(_transports):
        owned.append(getattr(transport, "socket", None))
        owned.extend(getattr(each, "socket", None) for each in getattr(transport, "_openSockets", {}).values())
        owned.extend(getattr(each, "socket", None) for each in getattr(transport, "_incomingSockets", {}).values())
        owned.extend(getattr(each, "socket", None) for each in getattr(transport, "_transmitIntents", {}).values())
    _transports.clear()
    for sock in owned:
        if isinstance(sock, socket.socket):
            with contextlib.suppress(OSError):
                sock.close()


def _release_stray_sockets() -> None:
    """In a freshly forked admin: no socket of the creating process may live on in the system.

    :func:`_close_inherited_sockets` closes the ones thespian's transports own; a creating process (a test run,
    an application) may hold others — an HTTP client's connection, another library's listener. Each remaining
    socket descriptor is pointed at ``/dev/null`` rather than closed: a Python object of the creator may still
    own the number and close it later, and a closed number could by then belong to something of ours.
    """
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return
    null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    try:
        for name in names:
            fd = int(name)
            if fd == null:
                continue
            with contextlib.suppress(OSError):
                if stat.S_ISSOCK(os.fstat(fd).st_mode):
                    os.dup2(null, fd, inheritable=False)
    finally:
        os.close(null)


def _forget_creators_wakeup_fd() -> None:
    """In a freshly forked admin: the creating process's signal wake-up descriptor is not the system's.

    ``ouroactors run`` sets one (its stop pipe), and so does an asyncio loop with signal handlers. Inherited by the
    admin and every actor forked from it, the C-level handler of each signal with a Python handler (thespian's
    SIGCHLD: every child's exit anywhere in the system) wrote a byte into the creator's pipe, and a trio run in an
    actor's main thread (a runtime's rehearsal turn) warned that its signal handling collided with another
    library. Unset here, before any actor is forked; its number now points at ``/dev/null``, as a stray socket's
    does (:func:`_release_stray_sockets`).
    """
    try:
        previous = signal.set_wakeup_fd(-1)
    except ValueError:  # not the main thread: nothing was inherited there
        return
    if previous != -1:
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        try:
            with contextlib.suppress(OSError):
                os.dup2(null, previous, inheritable=False)
        finally:
            os.close(null)


def _admin_port_of(args: tuple[Any, ...]) -> int | None:
    for arg in args:
        if isinstance(arg, dict) and isinstance(arg.get("Admin Port"), int):
            return int(arg["Admin Port"])
    return None


# A function whose frame (2,100 locals ≈ 16.8 KiB) is larger than one frame-stack chunk.
_TRAMPOLINE_SOURCE = (
    "def enter_on_fresh_chunk(fn, args, kwargs):\n"
    + "".join(f"    _{i} = None\n" for i in range(2100))
    + "    return fn(*args, **kwargs)\n"
)
_trampolines: dict[str, Any] = {}


def trampoline() -> Any:
    """``enter_on_fresh_chunk``, compiled on first use (~10 ms: every CLI call used to pay it at import).

    The admin compiles it before it forks anything, so every actor inherits it compiled.
    """
    if "enter_on_fresh_chunk" not in _trampolines:
        exec(compile(_TRAMPOLINE_SOURCE, "<ouroactors-trampoline>", "exec"), _trampolines)  # generated, no input
    return _trampolines["enter_on_fresh_chunk"]


def _redirect_stdio(path: str | None) -> None:
    target = os.open(path or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    null_in = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null_in, 0)
    os.dup2(target, 1)
    os.dup2(target, 2)
    os.close(target)
    os.close(null_in)


def _log_into_admin_output() -> None:
    """In a freshly forked admin: warnings and errors of loggers made before the fork reach ``admin.out``.

    The framework's loggers (``ouroactors.worker``, the supervisor's, …) are made when their modules are
    imported, in the creating process, so in every actor they still hang under the creator's root logger, not
    under the forwarder thespian installs after its fork. Their handlers are the creator's: under pytest they
    capture into memory that no one reads, so a worker's start-failure traceback went nowhere. The root gets a
    handler on this process's descriptor 2 (``admin.out``, inherited by every actor) unless it has one there.
    """
    import logging

    from ._logs import RecordFormatter

    root = logging.getLogger()
    level = admin_settings.get("log_level")  # None: not given (ActorSystem.start's default)
    if level is not None:
        root.setLevel(level)  # every actor is forked from here: their loggers (the user's too) pass what reaches this
    for handler in root.handlers:
        with contextlib.suppress(AttributeError, OSError, ValueError):
            if handler.stream.fileno() in (1, 2):  # type: ignore[attr-defined]
                if level is not None:  # else the creator's own (basicConfig's) level stands
                    handler.setLevel(level)
                return
    # fd 2 itself, not sys.stderr: under pytest's capture sys.stderr writes to a temporary file of the creator
    stream = open(2, "a", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
    handler = logging.StreamHandler(stream)  # lives as long as the process
    handler.setLevel(logging.WARNING if level is None else level)
    handler.setFormatter(RecordFormatter())
    root.addHandler(handler)


def _inherited_root(*args: Any, **kwargs: Any) -> Any:
    """Stands in for thespian's ``ThespianLogForwarder``: the root this process already has (see patch 10)."""
    import logging

    return logging.root


def install() -> None:
    """Install the patches in this process (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    from datetime import timedelta

    from thespian.system import multiprocCommon
    from thespian.system.admin import convention
    from thespian.system.transport import IPBase

    convention.CONVENTION_REREGISTRATION_PERIOD = timedelta(seconds=2)
    convention.CONVENTION_REGISTRATION_MISS_MAX = 3

    original_init = IPBase.IPActorAddress.__init__

    def bind_to_configured_host(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        host = os.environ.get("OUROACTORS_BIND_HOST")
        if host and self.bindname[0] == "":
            port = self.bindname[1]
            admin = port != 0 and port == admin_settings.get("admin_port")
            self.bindname = (host if admin else actor_bind_host(host), port)

    IPBase.IPActorAddress.__init__ = bind_to_configured_host
    _install_frames()
    _lazy_describe.install()
    from thespian.system.transport import TCPTransport

    _selector.install(TCPTransport)

    original_set_signal_handler = multiprocCommon.set_signal_handler

    def set_signal_handler_leaving_faults(number: int, handler: Any) -> Any:
        if number in FAULT_SIGNALS:
            return signal.signal(number, signal.SIG_DFL)
        return original_set_signal_handler(number, handler)

    multiprocCommon.set_signal_handler = set_signal_handler_leaving_faults

    original_start_child = multiprocCommon.startChild

    def start_child_with_parent_death_signal(*args: Any, **kwargs: Any) -> Any:
        enter_actor_process()
        default_fault_signals()
        return trampoline()(original_start_child, args, kwargs)

    multiprocCommon.startChild = start_child_with_parent_death_signal
    multiprocCommon.ThespianLogForwarder = _inherited_root  # one root, one file: admin.out (patch 10)

    original_start_logger = multiprocCommon.startupASLogger

    def start_logger_with_parent_death_signal(*args: Any, **kwargs: Any) -> Any:
        set_parent_death_signal(expected_parent())
        _close_inherited_sockets()  # the admin's listening socket: it kept the admin port bound after a SIGKILL
        default_fault_signals()
        return original_start_logger(*args, **kwargs)

    multiprocCommon.startupASLogger = start_logger_with_parent_death_signal

    original_start_admin = multiprocCommon.startAdmin

    def start_admin_watching_creator(adminClass: Any, *args: Any, **kwargs: Any) -> Any:
        _close_inherited_sockets()
        _release_stray_sockets()
        _forget_creators_wakeup_fd()
        _frames.adopt(_admin_port_of(args) or -1)
        trampoline()  # compiled once here, inherited by every actor the admin forks
        default_fault_signals()
        _redirect_stdio(admin_settings.get("stdio_path"))
        _log_into_admin_output()
        creator_fd: int | None = None
        creator = expected_parent()
        if not admin_settings.get("detached") and creator is not None:
            try:
                creator_fd = os.pidfd_open(creator)
            except OSError:
                os._exit(1)  # the creator is already gone

        return original_start_admin(watched_admin(adminClass, creator_fd), *args, **kwargs)

    multiprocCommon.startAdmin = start_admin_watching_creator


def _admin_port_of_transport(transport: Any) -> int | None:
    try:
        return int(transport._adminAddr.addressDetails.sockname[1])
    except (AttributeError, IndexError, TypeError, ValueError):
        return None


def _install_frames() -> None:
    """Tag every outgoing frame and check every incoming one (see :mod:`._frames`)."""
    from thespian.system.transport import TCPTransport as tcp

    tcp.ReceiveBuffer = _frames.FrameBuffer  # every receive buffer thespian makes, data and acks
    transport_class = tcp.TCPTransport
    original_init = transport_class.__init__

    def init_with_key(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self._ouro_auth = _frames.auth_for(_admin_port_of_transport(self))
        _transports.add(self)

    def tagged_serializer(self: Any, intent: Any) -> bytes:
        try:
            body = pickle.dumps((self.myAddress, intent.message))
        except Exception as error:  # an answer that does not pickle goes as UnsendableAnswer (supervision.sendable)
            instead = sendable.replacement(intent.message, error)
            if instead is None:
                raise
            body = pickle.dumps((self.myAddress, instead))
        else:
            instead = sendable.checked(intent.message, body)  # an exception answer that would not unpickle
            if instead is not None:
                body = pickle.dumps((self.myAddress, instead))
        try:
            return _frames.encode(self._ouro_auth[0], body)
        except _frames.FrameTooLarge as error:  # an answer over the frame cap: the asker hears so, at once
            instead = sendable.replacement(intent.message, error)
            if instead is None:
                raise
            return _frames.encode(self._ouro_auth[0], pickle.dumps((self.myAddress, instead)))

    original_added = transport_class._addedDataToIncoming

    def added_data_checked(self: Any, inc: Any, *args: Any, **kwargs: Any) -> Any:
        buffer = getattr(inc, "_rData", None)
        if isinstance(buffer, _frames.FrameBuffer):
            buffer.auth = self._ouro_auth
            buffer.check_head()
            if buffer.isDone() and not buffer.accept():
                inc.close()  # dropped before unpickling; the sender's retry gets nowhere either
                return None
        return original_added(self, inc, *args, **kwargs)

    original_ack = transport_class._check_XMIT_4_done

    def ack_checked(self: Any, intent: Any, rcv: Any) -> Any:
        buffer = getattr(intent, "ackbuf", None)
        if isinstance(buffer, _frames.FrameBuffer):
            buffer.auth = self._ouro_auth
        return original_ack(self, intent, rcv)

    transport_class.__init__ = init_with_key
    transport_class.serializer = tagged_serializer
    transport_class._addedDataToIncoming = added_data_checked
    transport_class._check_XMIT_4_done = ack_checked
