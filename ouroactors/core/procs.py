"""Facts about local processes, read from ``/proc`` (Linux), and the ends of those a system left running.

**Lineage marks.** A process that starts a session of its own (``start_new_session=True``, ``setsid``, the sandbox's
every command) leaves its actor's process group and the system's session, so neither finds it. What it cannot leave
so easily is its environment: every process of a system carries :data:`SYSTEM_MARK` (set by the admin, inherited by
every actor) and :data:`ACTOR_MARK` (the pid of the actor process it descends from), and a program started by exec
shows both in ``/proc/<pid>/environ`` whatever session it is in. The system's end and the end of a SIGKILLed actor
read them (:func:`end_marked`). A program started with an environment of its own loses them unless its starter adds
:func:`lineage` (the sandbox does); a process that clears its environment on purpose escapes. An unsandboxed tool
command carries one more, :data:`COMMAND_MARK`, its own: what it leaves ends with it (:func:`end_command_leftovers`).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import resource
import select
import signal
import time
from collections.abc import Callable, Iterable

SYSTEM_MARK = "OUROACTORS_SYSTEM"  # "<admin pid>:<its start ticks>": one system, unique for the boot
ACTOR_MARK = "OUROACTORS_ACTOR"  # the pid of the actor process a program descends from
COMMAND_MARK = "OUROACTORS_COMMAND"  # one unsandboxed tool command's own (ouroactors.runtime.sandbox, none mode)


def _stat(pid: int | str) -> list[str] | None:
    """``/proc/<pid>/stat`` after the command name (``fields[0]`` the state, ``[1]`` the parent, ``[2]`` the process
    group, ``[3]`` the session, ``[19]`` the start time); None if gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if not fields or fields[0] == "Z" else fields


def process_start_ticks(pid: int) -> int | None:
    """The kernel's start time of ``pid`` (clock ticks since boot); None if gone or a zombie."""
    fields = _stat(pid)
    return None if fields is None else int(fields[19])


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a reaped or dead child is gone)."""
    return process_start_ticks(pid) is not None


@functools.cache
def boot_id() -> str | None:
    """This kernel's boot id: equal in two processes exactly when they share one monotonic clock (the same host,
    the same boot), so a ``time.monotonic_ns()`` of one means something to the other. None where it cannot be read."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            return handle.read().strip() or None
    except OSError:
        return None


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (every thread's ``children`` list: a child belongs to the thread that forked it)."""
    found: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                found += [int(x) for x in fh.read().split()]
        except (OSError, ValueError):
            continue
    return found


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it, read from ``/proc`` before anything is killed (a killed parent's
    children move to a subreaper and could no longer be found)."""
    tree, stack = [], [pid]
    while stack:
        current = stack.pop()
        tree.append(current)
        stack += children(current)
    return tree


def end_descendants(pid: int, spare: Callable[[int], bool] = lambda _: False, wait_s: float = 2.0) -> list[int]:
    """SIGKILL every process below ``pid`` but the subtrees of the children ``spare`` keeps: the pids signalled.
    Each is pinned by a pidfd before any is signalled, so a pid reused meanwhile is never hit; then up to ``wait_s``
    seconds pass until each has exited. A SIGKILL is only delivered: a process on a busy machine holds its port or
    its files a while longer, and what is started next (the worker's next incarnation) would meet them."""
    return _end(itertools.chain.from_iterable(descendants(child) for child in children(pid) if not spare(child)),
                wait_s)


def end_tree(pid: int, wait_s: float = 2.0) -> list[int]:
    """SIGKILL ``pid`` and every process below it, as :func:`end_descendants` does (the tree read from ``/proc``
    before any is killed: a killed parent's children move away); the pids signalled (none: ``pid`` was gone)."""
    return _end(descendants(pid), wait_s)


def members(*, group: int | None = None, session: int | None = None) -> list[int]:
    """Live (non-zombie) processes of process group ``group`` or of session ``session``, read from ``/proc``."""
    field, wanted = (2, group) if group is not None else (3, session)
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat(entry)) is not None and int(fields[field]) == wanted:
            found.append(int(entry))
    return sorted(found)


def end_orphaned_group(pgid: int, wait_s: float = 2.0) -> list[int]:
    """SIGKILL what is left of process group ``pgid`` once its leader is dead: the pids signalled.

    Every actor process of a system leads a process group of its own (:mod:`ouroactors.system._patches`), so what
    it started — a server, ``cmd &``, a double-forked daemon — stays in that group even when it is orphaned, which is
    the only trace left of it once its actor was SIGKILLed from outside (its children moved to init, out of reach
    of :func:`end_tree`). Nothing is signalled while a process of pid ``pgid`` lives: that is the leader itself (not
    an orphaned group) or, the group having emptied, a new process given the same number. A process that started a
    session of its own (``start_new_session=True``, ``setsid``) has left the group and is not found here."""
    try:
        os.killpg(pgid, 0)  # one system call answers the common case, a group with nobody left in it
    except ProcessLookupError:
        return []
    except PermissionError:
        pass
    if pid_alive(pgid):
        return []
    return _end(members(group=pgid), wait_s, _in(2, pgid))


def end_own_group(spare: Callable[[int], bool] = lambda _: False, wait_s: float = 2.0) -> list[int]:
    """SIGKILL the other members of the process group this process leads (none if it leads none) but those
    ``spare`` keeps: what it started that left its process tree while it lived (``cmd &`` whose shell exited)."""
    me = os.getpid()
    if os.getpgid(0) != me:
        return []
    # Leave the group first (into the session leader's, which lives as long as the system does): then one system
    # call tells whether anybody is left in it, and the common answer, nobody, costs no read of /proc (every worker
    # of a tree that stops pays this at once)
    with contextlib.suppress(OSError):
        os.setpgid(0, os.getsid(0))
        try:
            os.killpg(me, 0)
        except ProcessLookupError:
            return []
        except PermissionError:
            pass
    return _end([pid for pid in members(group=me) if pid != me and not spare(pid)], wait_s, _in(2, me))


def end_session(sid: int, wait_s: float = 5.0, sparing: tuple[int, ...] = ()) -> list[int]:
    """SIGKILL every process of session ``sid`` but this one (and ``sparing``), round after round until none is left
    (a supervisor alive during one round may fork a child the next round finds): the pids signalled. A system's
    processes are its admin's session: each actor leads a process group of its own inside it."""
    ended: list[int] = []
    deadline = time.monotonic() + wait_s
    spared = {os.getpid(), *sparing}
    while found := [pid for pid in members(session=sid) if pid not in spared]:
        ended += _end(found, max(0.0, deadline - time.monotonic()), _in(3, sid))
        if time.monotonic() >= deadline:
            break
    return ended


def _end(members: Iterable[int], wait_s: float, still: Callable[[int], bool] | None = None) -> list[int]:
    """Pin each of ``members`` by a pidfd (those gone already are skipped), SIGKILL them all, await their exits.
    ``still``: asked again once a member is pinned (a pid found by a scan may have been reused since): only a
    process it accepts is signalled."""
    pinned: list[tuple[int, int]] = []
    try:
        for member in members:
            with contextlib.suppress(OSError):
                fd = os.pidfd_open(member)
                if still is not None and not still(member):
                    os.close(fd)
                    continue
                pinned.append((member, fd))
        for _, fd in pinned:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
        _await_exits([fd for _, fd in pinned], wait_s)
    finally:
        for _, fd in pinned:
            os.close(fd)
    return [member for member, _ in pinned]


def _in(field: int, wanted: int) -> Callable[[int], bool]:
    """A process's test that its ``/proc`` stat ``field`` (2: process group, 3: session) is ``wanted``."""
    return lambda pid: (fields := _stat(pid)) is not None and int(fields[field]) == wanted


def system_mark(admin_pid: int, ticks: int | None = None) -> str | None:
    """The :data:`SYSTEM_MARK` of the system whose admin is ``admin_pid``, started at ``ticks`` (read from ``/proc``
    when not given: None once that process is gone)."""
    ticks = process_start_ticks(admin_pid) if ticks is None else ticks
    return None if ticks is None else f"{admin_pid}:{ticks}"


def lineage() -> dict[str, str]:
    """This process's lineage marks, for the environment of a program it starts with an environment of its own."""
    return {name: os.environ[name] for name in (SYSTEM_MARK, ACTOR_MARK) if name in os.environ}


def _environ(pid: int | str) -> set[bytes]:
    """The entries of ``pid``'s environment as it was exec'd (empty if gone or not ours to read)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return set(handle.read().split(b"\0"))
    except OSError:
        return set()


def _marks(system: str, actor: int | None) -> set[bytes]:
    return {f"{SYSTEM_MARK}={system}".encode()} | ({f"{ACTOR_MARK}={actor}".encode()} if actor is not None else set())


def marked(system: str, actor: int | None = None) -> list[int]:
    """Live processes but this one whose environment carries ``system``'s mark (and with ``actor``, that actor's
    mark): what the system's actors started by exec, whatever session or group it is in now."""
    wanted, me = _marks(system, actor), os.getpid()
    return sorted(int(entry) for entry in os.listdir("/proc")
                  if entry.isdigit() and int(entry) != me and wanted <= _environ(entry) and _stat(entry) is not None)


def left_behind(sid: int | None, mark: str | None) -> list[int]:
    """What still lives of a system: the processes of its session ``sid`` and those carrying its lineage ``mark``
    (a program that started a session of its own); zombies do not count."""
    found = members(session=sid) if sid is not None else []
    return sorted({*found, *(marked(mark) if mark is not None else ())})


def command_line(pid: int) -> str | None:
    """``pid``'s command line, its arguments joined by spaces (None if gone or not ours to read)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return None


_MULTIPROCESSING_HELPERS = ("from multiprocessing.resource_tracker import main",
                            "from multiprocessing.forkserver import main")


def multiprocessing_helper(pid: int) -> bool:
    """Whether ``pid`` is a helper ``multiprocessing`` starts once for the process that first needs it and keeps for
    that process's life (its resource tracker, its fork server): part of that process, not a program it left."""
    command = command_line(pid) or ""
    return any(helper in command for helper in _MULTIPROCESSING_HELPERS)


def carries_mark(pid: int, system: str) -> bool:
    """Whether ``pid``'s environment (as it was exec'd) carries ``system``'s lineage mark."""
    return f"{SYSTEM_MARK}={system}".encode() in _environ(pid)


def end_pids(pids: Iterable[int], still: Callable[[int], bool] | None = None, wait_s: float = 2.0) -> list[int]:
    """SIGKILL ``pids`` (each pinned by a pidfd first; with ``still``, only those it accepts once pinned) and await
    their exits, at most ``wait_s`` seconds: the pids signalled."""
    return _end(pids, wait_s, still)


def end_command_leftovers(mark: str, leader: int, wait_s: float = 2.0) -> list[int]:
    """SIGKILL what the command ``leader`` (ended, its process group killed) left running in sessions of their own,
    found by its :data:`COMMAND_MARK` ``mark``, round after round (one may fork before it is killed): the pids
    signalled. Only processes started after the leader are read (:func:`_newer_than`): the usual cost is one read
    of the namespace's last pid."""
    wanted, ended = {f"{COMMAND_MARK}={mark}".encode()}, []
    deadline = time.monotonic() + wait_s
    while (newer := _newer_than(leader)) and (found := [int(entry) for entry in newer if wanted <= _environ(entry)]):
        ended += _end(found, max(0.0, deadline - time.monotonic()), lambda pid: wanted <= _environ(pid))
        if time.monotonic() >= deadline:
            break
    return ended


def _newer_than(pid: int) -> list[str]:
    """The ``/proc`` entries of processes whose pid was given out after ``pid`` (all of them if that is unknown).
    The common case costs one read: nobody was given a pid since (a command that started nothing, on a quiet box);
    a few pids since are looked at one by one rather than listing ``/proc``."""
    try:  # os.read: a third of what a Python file object costs here, on the path of every unsandboxed command
        fd = os.open("/proc/sys/kernel/ns_last_pid", os.O_RDONLY)
        try:
            last = int(os.read(fd, 32))
        finally:
            os.close(fd)
    except (OSError, ValueError):
        last = -1
    return _given_after(pid, last, lambda: [entry for entry in os.listdir("/proc") if entry.isdigit()])


def _given_after(pid: int, last: int, listing: Callable[[], list[str]]) -> list[str]:
    """Which pids to look at for those given out after ``pid``, the last given out being ``last`` (-1: unknown);
    ``listing`` lists ``/proc``'s, called only when needed."""
    if last == pid:
        return []
    if pid < last <= pid + 64:
        return [str(newer) for newer in range(pid + 1, last + 1)]
    entries = listing()
    if last < 0:
        return entries
    if last > pid:
        return [entry for entry in entries if pid < int(entry) <= last]
    return [entry for entry in entries if int(entry) > pid or int(entry) <= last]  # the pids wrapped around


def end_marked(system: str, actor: int | None = None, wait_s: float = 2.0) -> list[int]:
    """SIGKILL the processes :func:`marked` finds (each checked again once pinned): the pids signalled. Only for an
    ``actor`` no process of that pid is: a living actor's programs are its own to end (:func:`end_own_marked`)."""
    if actor is not None and pid_alive(actor):
        return []
    return _end_marked(system, actor, wait_s)


def _end_marked(system: str, actor: int | None, wait_s: float) -> list[int]:
    wanted = _marks(system, actor)
    return _end(marked(system, actor), wait_s, lambda pid: wanted <= _environ(pid))


def end_own_marked(wait_s: float = 2.0) -> list[int]:
    """In an actor process that ends: SIGKILL the programs that carry its own actor mark (what it started that left
    its process tree and its group for a session of its own): the pids signalled."""
    system, me = os.environ.get(SYSTEM_MARK), os.getpid()
    if system is None or os.environ.get(ACTOR_MARK) != str(me):
        return []
    return _end_marked(system, me, wait_s)


def started_programs() -> bool:
    """Whether a process this one started and waited for ran (its page faults count in ``RUSAGE_CHILDREN``): one
    system call. One still running is not counted here: a walk of the process tree finds it."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt > 0


def await_gone(pids: Iterable[int], wait_s: float) -> None:
    """Return once every one of ``pids`` has exited (or was gone already), at most ``wait_s`` seconds."""
    pinned = []
    try:
        for pid in pids:
            with contextlib.suppress(OSError):
                pinned.append(os.pidfd_open(pid))
        _await_exits(pinned, wait_s)
    finally:
        for fd in pinned:
            os.close(fd)


def _await_exits(pidfds: list[int], wait_s: float) -> None:
    """Wait until every process the ``pidfds`` pin has exited (a pidfd polls readable then), at most ``wait_s``."""
    waiting = select.poll()
    for fd in pidfds:
        waiting.register(fd, select.POLLIN)
    left, deadline = len(pidfds), time.monotonic() + wait_s
    while left and (remaining := deadline - time.monotonic()) > 0:
        for fd, _ in waiting.poll(remaining * 1000):
            waiting.unregister(fd)
            left -= 1


def forked_copy(pid: int) -> bool:
    """Whether ``pid`` runs this process's program with its command line (forked, not exec'd: an actor thespian
    forked from this one, a ``multiprocessing`` child) rather than a program of its own."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as theirs, open("/proc/self/cmdline", "rb") as ours:
            return theirs.read() == ours.read() and os.readlink(f"/proc/{pid}/exe") == os.readlink("/proc/self/exe")
    except OSError:
        return False
