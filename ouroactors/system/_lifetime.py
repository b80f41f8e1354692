"""How the processes of a system end together (patches 2, 3 and 13 of :mod:`._patches`).

* **With their parent**: every actor process asks the kernel for SIGKILL when its parent dies
  (:func:`set_parent_death_signal`), so the death of any supervisor takes its whole subtree with it.
* **With their creator**: the admin of a system that is not detached watches the creating process (a pidfd) and,
  when it is gone, ends every process of the system's session (:func:`watch_creator`).
* **With their tree host**: the admin's one actor child, which runs every tree; dead outside a shutdown, the system
  is headless and ends (:func:`end_headless_system`, patch 15).
* **With their last tree, when detached**: a tree that ends on its own (escalation, auto_shutdown, its root killed)
  ends a foreground ``run`` (exit 4); a detached system, which nobody watches, ends too once no tree is left
  (:func:`end_treeless_system`) rather than serve nothing and refuse the next ``run`` on its data dir.
* **What an actor started, with the actor**: every actor process leads a process group of its own inside the
  system's session (:func:`lead_own_group`), so what it started stays findable by that group after the actor was
  SIGKILLed from outside (:func:`ouroactors.core.procs.end_orphaned_group`).
* **What left both, with the system or its actor**: every process of a system carries its lineage marks in its
  environment (:func:`mark_system`, :func:`mark_actor`), so a program an actor started that left the session
  (``start_new_session=True``, ``setsid``, a sandboxed command) is still found by its marks (:func:`ouroactors.
  core.procs.end_marked`) when the system ends, when that actor ends (:mod:`ouroactors.supervision.leftovers`) and
  when it is SIGKILLed.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import logging
import multiprocessing
import os
import select
import signal
import sys
import threading
import time
from typing import Any, ClassVar

from ..core import procs
from .host_protocol import HOST_NAME

_PR_SET_PDEATHSIG = 1


def expected_parent() -> int | None:
    """The pid of the process that forked this one (multiprocessing's record), None in the creating process."""
    parent = multiprocessing.parent_process()
    return parent.pid if parent is not None else None


def set_parent_death_signal(expected_parent: int | None) -> None:
    """Ask for SIGKILL when the parent dies; if it already died, die now."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if expected_parent is not None and os.getppid() != expected_parent:
        os._exit(1)  # the parent is already gone: the kernel will not signal us any more


def lead_own_group() -> None:
    """Put this actor process in a process group of its own, inside the system's session (patch 13).

    What an actor starts then stays in its group, even orphaned: when the actor is SIGKILLed from outside (the OOM
    killer, ``system.kill``, a fault plan) its children move to init and no process tree leads to them any more, but
    its supervisor can still end them by the group (:func:`ouroactors.core.procs.end_orphaned_group`) before it
    starts the next incarnation. The system as a whole is its admin's session (:func:`~ouroactors.core.procs.
    end_session`)."""
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)


def mark_system() -> None:
    """In the admin: the system's lineage mark, inherited by every actor it forks (see :mod:`ouroactors.core.
    procs`)."""
    mark = procs.system_mark(os.getpid())
    if mark is not None:
        os.environ[procs.SYSTEM_MARK] = mark


def mark_actor() -> None:
    """In an actor process: its own pid as the actor mark of the programs it starts."""
    os.environ[procs.ACTOR_MARK] = str(os.getpid())


def enter_actor_process() -> None:
    """What every actor process does first (patches 2 and 13): die with its parent, lead a group of its own, carry
    its actor mark."""
    set_parent_death_signal(expected_parent())
    lead_own_group()
    mark_actor()


def watched_admin(admin_class: Any, creator_fd: int | None) -> Any:
    """Thespian's admin class as this system runs it (patches 3, 14, 15): it carries the system's mark, watches its
    creator (``creator_fd``, a pidfd; None: detached), keeps what a restart of its logger needs, and ends the system
    when its tree host dies outside a shutdown."""

    class WatchedAdmin(admin_class):
        def __init__(self, *a: Any, **k: Any) -> None:
            mark_system()  # in the admin's own process (forked once more after the setsid), as its handle sees
            super().__init__(*a, **k)
            # patch 14: thespian restarts a dead logger with the admin's logDefs, which it never kept: the
            # AttributeError ended the admin, and the whole system with it (a SIGKILLed logger, the OOM killer)
            self.logDefs = getattr(self, "logDefs", a[3] if len(a) > 3 else k.get("logDefs"))
            if creator_fd is not None:
                threading.Thread(target=watch_creator, args=(creator_fd,), daemon=True).start()

        def h_ChildActorExited(self, envelope: Any) -> Any:
            host = getattr(self, "_globalNames", {}).get(HOST_NAME)  # read before thespian forgets the name
            handled = super().h_ChildActorExited(envelope)
            if host is not None and envelope.message.childAddress == host and not self.isShuttingDown():
                end_headless_system()  # patch 15
            return handled

    WatchedAdmin.__name__ = admin_class.__name__
    WatchedAdmin.__qualname__ = admin_class.__qualname__
    return WatchedAdmin


def watch_creator(creator_fd: int) -> None:
    """Block until the creator exits, then take the whole system down with it (:func:`_end_system`)."""
    with contextlib.suppress(OSError):
        select.select([creator_fd], [], [])
    _end_system()


def end_headless_system() -> None:
    """In the admin, its tree host having died outside a shutdown (SIGKILLed: the OOM killer, anybody): its trees died
    with it (parent-death signal), and nothing can be started or asked any more — a headless system, every ask of
    which timed out. As an OTP node ends when its application controller dies, the system ends, saying why."""
    logging.getLogger("ouroactors.system").error(
        "the tree host (pid %s's child that ran every tree) died outside a shutdown: its trees died with it and "
        "nothing could be asked or started any more; the system ends", os.getpid())
    _end_system()


def end_treeless_system(data_dir: str, tree: str, reason: str) -> None:
    """In the tree host of a detached system, its last tree having ended on its own: end the system as a foreground
    ``run`` ends at that moment, saying why in admin.out, and leave no marker naming it.

    The admin is stopped (SIGSTOP) before the rest of the session is ended, and killed last: it would restart its
    logger meanwhile, and its death ends this process (the parent-death signal) before it could finish.
    """
    from .marker import remove_marker_of

    logging.getLogger("ouroactors.system").error(
        "tree %r ended on its own (%s) and no tree is left: a detached system with no tree ends, as a foreground "
        "`run` exits then", tree, reason)
    admin = os.getppid()
    with contextlib.suppress(OSError):
        remove_marker_of(data_dir, admin)
    with contextlib.suppress(OSError):
        os.kill(admin, signal.SIGSTOP)
    _end_marked()
    with contextlib.suppress(OSError):
        procs.end_session(os.getsid(0), wait_s=2.0, sparing=(admin,))
    _end_marked()
    os.kill(admin, signal.SIGKILL)  # this process goes with it


def _end_system() -> None:
    """Every program that carries the system's mark and every process of its session (each actor leads a group of
    its own), then the admin's own group, this process last.

    The marked programs first: should the admin's loop end while the session dies (it did in 4 runs of 4 before
    patch 14: the logger's death, part of the session's, crashed the admin's restart of it), nothing else would find
    them. Again after the session, in case a dying actor started one meanwhile."""
    _end_marked()
    with contextlib.suppress(OSError):
        procs.end_session(os.getsid(0), wait_s=2.0)
    _end_marked()
    os.killpg(os.getpgid(0), signal.SIGKILL)


def _end_marked() -> None:
    if (mark := os.environ.get(procs.SYSTEM_MARK)) is not None:
        with contextlib.suppress(OSError):
            procs.end_marked(mark)


class InProcessLineage:
    """The lineage mark of an in-process (simple base) system, whose actors run in the process that owns it.

    That process has no system session or admin of its own to find what the actors started, so while the system
    lives its environment carries a :data:`~ouroactors.core.procs.SYSTEM_MARK` naming this system alone
    (``<owner pid>:<its start ticks>:<a number>``: unique for the boot, across concurrent test workers too), which
    every program started by exec inherits. Its shutdown ends what still carries it (:meth:`end`, recording each in
    :attr:`ended`) and puts back the value the environment had. One process may own several at once: the newest
    live one's mark is in force. The process's own code shares that environment: a program it starts while the
    system lives is ended with the system too.

    The processes that were the owner's children when the system started are kept (:attr:`baseline`): the leak
    check tells a child that appeared while it ran (:meth:`new_children`) from one that predates it.
    """

    _live: ClassVar[list[InProcessLineage]] = []
    _outer: ClassVar[str | None] = None  # the environment's value before the first live one
    _numbers: ClassVar[itertools.count[int]] = itertools.count(1)

    def __init__(self) -> None:
        self.owner = os.getpid()
        self.mark = f"{self.owner}:{procs.process_start_ticks(self.owner)}:{next(self._numbers)}"
        self.baseline = {(pid, procs.process_start_ticks(pid)) for pid in procs.children(self.owner)}
        self.ended: list[str] = []  # "pid (command line)" of each program the shutdown had to end

    @classmethod
    def begin(cls) -> InProcessLineage:
        """Put a new system's mark into this process's environment."""
        lineage = cls()
        if not cls._live:
            cls._outer = os.environ.get(procs.SYSTEM_MARK)
        cls._live.append(lineage)
        os.environ[procs.SYSTEM_MARK] = lineage.mark
        return lineage

    def end(self, wait_s: float = 2.0) -> list[str]:
        """At the system's shutdown: SIGKILL every program that carries its mark, round after round (one may fork
        meanwhile), and put back the environment; what was ended (also kept in :attr:`ended`)."""
        deadline = time.monotonic() + wait_s
        while found := [pid for pid in procs.marked(self.mark) if not procs.multiprocessing_helper(pid)]:
            described = {pid: f"{pid} ({(procs.command_line(pid) or '?')[:80]})" for pid in found}
            ended = procs.end_pids(found, lambda pid: procs.carries_mark(pid, self.mark),
                                   max(0.0, deadline - time.monotonic()))
            self.ended += [described[pid] for pid in ended]
            if time.monotonic() >= deadline:
                break
        self._release()
        return self.ended

    def _release(self) -> None:
        live = type(self)._live
        if self in live:
            live.remove(self)
            value = live[-1].mark if live else type(self)._outer
            if value is None:
                os.environ.pop(procs.SYSTEM_MARK, None)
            else:
                os.environ[procs.SYSTEM_MARK] = value

    def new_children(self) -> list[int]:
        """Live children of the owner that were not its children when the system started (zombies and
        ``multiprocessing``'s own helpers do not count)."""
        if os.getpid() != self.owner:
            return []
        return sorted(pid for pid in procs.children(self.owner)
                      if (pid, ticks := procs.process_start_ticks(pid)) not in self.baseline and ticks is not None
                      and not procs.multiprocessing_helper(pid))


def sweep_session(sid: int, lineage_mark: str | None) -> None:
    """At a system's end, from the process that ran its shutdown: kill anything still in the system's session (the
    admin called setsid: its group's id is the session's; each actor leads a group of its own inside it) and every
    program that left the session but carries the system's lineage mark, then wait (bounded) for the kernel to reap."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(sid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        procs.end_session(sid)
    if lineage_mark is not None:
        with contextlib.suppress(OSError):
            procs.end_marked(lineage_mark)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and session_alive(sid):
        time.sleep(0.01)  # waiting for the kernel to reap, bounded


def session_alive(sid: int) -> bool:
    """Whether a process of session ``sid`` (a system's: its admin's, which every actor process is part of, each
    leading a group of its own) still lives; zombies do not count."""
    return bool(procs.members(session=sid))


def log_stop_forced(context: Any, tree: str, timeout: float) -> None:
    """The event of a shutdown that stopped waiting for ``tree``'s orderly stop (its processes are killed next)."""
    from ..supervision.events import EventWriter

    with contextlib.suppress(OSError):
        EventWriter(context.events_path, "", context.node_epoch, context.node).write(
            "stop_forced", tree, {"reason": f"its orderly stop did not finish within {timeout:g}s: every process of "
                                            "the system is killed", "timeout_s": timeout})
