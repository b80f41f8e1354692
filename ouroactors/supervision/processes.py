"""A supervisor's children as thespian processes: slots, liveness, release and kill.

Mixed into :class:`~.supervisor.Supervisor`; what it adds is how thespian behaves with child processes:

* ``ChildActorExited`` can arrive twice for one child; the second is ignored.
* Thespian has no kill, so the supervisor SIGKILLs the pid each child reported at start. A
  child's children die with it (parent-death signal, see ``ouroactors.system._patches``).
* Thespian never tells a parent that a child on another node died with its node (and notices a
  lost node only after many minutes), so a supervisor pings its remote children and synthesises a
  ``killed`` exit for those whose node stops answering.
* Thespian also loses ``ChildActorExited`` when two children die within a few milliseconds of each
  other. A supervisor therefore checks its local children's pids itself: a child whose process
  is gone and whose exit notice has not come within a grace period is taken as ``killed``.
* Thespian keeps its own list of children and, when a supervisor is ended, waits for an exit
  notice from each one still listed — with no deadline, and its dead-target fallback only ever
  clears the last child of the list (a late-binding closure in ``_shutdownActor``). A child whose
  notice was lost would keep its supervisor alive forever and its ``stop_tree`` would never
  return. So a child we take as gone without thespian's notice is SIGKILLed if its process still
  runs and then struck from thespian's list directly (its ``_handleChildExited``, what a real
  notice runs). Not by a ``ChildActorExited`` sent to ourselves: thespian itself turns each
  SIGCHLD into one such self-send, and a few hundred more at once overflow its send queue —
  which is how notices got lost in the first place.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from thespian.actors import ActorExitRequest, ChildActorExited

from ..core import clock
from ..core.procs import boot_id, end_tree
from ..core.procs import pid_alive as _pid_alive
from . import reasons
from .leftovers import end_after_kill
from .protocol import Ping, SystemContext, this_node
from .reasons import ExitReason
from .signals import ChildDown, ChildStartFailed, Emit, Input

if TYPE_CHECKING:
    from .events import EventWriter

log = logging.getLogger("ouroactors.supervisor")

HEARTBEAT_INTERVAL = 0.5  # seconds between pings of remote children; also the local pid check
LOCAL_EXIT_GRACE = 1.0  # a local child's process gone this long without an exit notice: killed
NODE_LOST_AFTER = 2.0  # no answer for this long: the child's node is gone
_HEARTBEAT = "ouroactors:heartbeat"


@dataclass(eq=False)  # identity: one slot per child process
class _Slot:
    """One child process as thespian sees it."""

    key: str
    incarnation: int
    address: Any
    pid: int | None = None
    node: str = "local"
    last_seen: float = 0.0
    gone_since: float | None = None  # when its pid was first seen gone without an exit notice
    started: bool = False
    refused: ExitReason | None = None
    reported: ExitReason | None = None
    log_offset: int | None = None  # a supervisor child: the event log's end before it was forked (.leftovers)
    requires: tuple[tuple[str, Any], ...] = ()  # the spec's placement requirements (a failed placement names them)


def _never_started(slot: _Slot) -> str:
    """Why a child that never reported its start is gone. One placed by ``requires`` that never got a process was
    most likely placed nowhere: thespian found no node offering those capabilities (its log line in admin.out,
    "Pending Actor create … failed", names no requirement)."""
    if slot.requires and slot.pid is None:
        wanted = ", ".join(f"{key} = {value!r}" for key, value in slot.requires)
        return (f"no node of the system created it for requires = {{{wanted}}}: none offers those capabilities (start "
                "a node with them, or drop the requirement), or the one that does failed before it reported")
    return "exited before reporting its start"


_REPORTS_KEPT = 4096  # exit reports remembered for their end's event at most (see ChildProcesses._note_report)


def stopped_serving(stamped: int | None, node: str, here: str, arrived: int) -> int:
    """When a child stopped handling messages, on this host's monotonic clock, from its exit report: the instant it
    stamped (``stamped``), never later than the report's ``arrived``; the arrival itself when it stamped nothing, or
    is on another node (a stamp of another host's clock compares with nothing here)."""
    if stamped is None or node != here:
        return arrived
    return max(0, min(stamped, arrived))


class ChildProcesses:
    """Slot bookkeeping and liveness checks; the state they touch belongs to :class:`~.supervisor.Supervisor`."""

    path: str
    _context: SystemContext | None
    _slots: dict[tuple[str, int], _Slot]
    _by_address: dict[str, _Slot]
    _unnoticed: list[_Slot]  # children thespian still lists: no ChildActorExited yet
    _heartbeat_running: bool
    _events: EventWriter
    _reports: dict[tuple[str, int], int]  # (key, incarnation) -> when it stopped serving (see _note_report)

    if TYPE_CHECKING:  # what the actor provides
        myAddress: Any

        def send(self, targetAddr: Any, msg: Any) -> None: ...
        def wakeupAfter(self, timePeriod: timedelta, payload: Any = None) -> None: ...
        def _feed(self, first: Input) -> None: ...

    def _start_heartbeat(self) -> None:
        if not self._heartbeat_running:
            self._heartbeat_running = True
            self.wakeupAfter(timedelta(seconds=HEARTBEAT_INTERVAL), payload=_HEARTBEAT)

    def _heartbeat(self) -> None:
        """Ping remote children; a child silent for NODE_LOST_AFTER died with its node."""
        self._heartbeat_running = False
        now = clock.monotonic()
        self._check_local_pids(now)
        remote = [s for s in self._slots.values() if s.started and s.node != this_node()]
        lost_nodes: set[str] = set()
        for slot in remote:
            if now - slot.last_seen > NODE_LOST_AFTER:
                lost_nodes.add(slot.node)
                del self._slots[(slot.key, slot.incarnation)]
                self._by_address = {k: v for k, v in self._by_address.items() if v is not slot}
                self._feed(ChildDown(slot.key, slot.incarnation, reasons.killed(f"node {slot.node} lost")))
            else:
                self.send(slot.address, Ping(slot.key, slot.incarnation))
        for node in sorted(lost_nodes):
            self._events.write("node_lost", None, {"peer": node, "silent_for": NODE_LOST_AFTER})
        if any(s.started for s in self._slots.values()):
            self._start_heartbeat()

    def _check_local_pids(self, now: float) -> None:
        if self._context is None or self._context.base == "simple":
            return
        for slot in list(self._slots.values()):
            if not slot.started or slot.node != this_node() or slot.pid is None or slot.pid == os.getpid():
                continue
            if _pid_alive(slot.pid):
                slot.gone_since = None
            elif slot.gone_since is None:
                slot.gone_since = now  # give thespian's own notice time to arrive first
            elif now - slot.gone_since > LOCAL_EXIT_GRACE and (slot.key, slot.incarnation) in self._slots:
                log.warning("%s: %s (pid %d) is gone but no exit notice came; taking it as exited",
                            self.path, slot.key, slot.pid)
                del self._slots[(slot.key, slot.incarnation)]
                self._by_address = {k: v for k, v in self._by_address.items() if v is not slot}
                self._release(slot)
                self._feed(ChildDown(slot.key, slot.incarnation, slot.reported or reasons.killed()))

    def _release(self, slot: _Slot) -> None:
        """Tell thespian a child it still lists is gone (SIGKILLing it first if it still runs)."""
        if self._context is None or self._context.base == "simple" or slot not in self._unnoticed:
            return
        self._unnoticed.remove(slot)
        if slot.pid is not None and slot.pid != os.getpid() and slot.node == this_node() and _pid_alive(slot.pid):
            try:
                os.kill(slot.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        forget = getattr(getattr(self, "_myRef", None), "_handleChildExited", None)
        if callable(forget):
            forget(slot.address)
        else:  # a thespian without that bookkeeping: fall back on the notice itself
            self.send(self.myAddress, ChildActorExited(slot.address))

    def _release_all(self) -> None:
        """Before this supervisor ends: no child may be left for thespian to wait for forever."""
        for slot in list(getattr(self, "_unnoticed", ())):
            if slot.node == this_node() or slot.pid is None:
                self._release(slot)

    def _child_gone(self, address: Any) -> None:
        self._unnoticed = [s for s in self._unnoticed if s.address != address]
        slot = self._by_address.pop(str(address), None)
        if slot is None or slot.address != address:
            slot = next((s for s in self._slots.values() if not s.started and s.address == address), slot)
        if slot is None or (slot.key, slot.incarnation) not in self._slots:
            return  # a duplicate ChildActorExited, or not one of ours
        del self._slots[(slot.key, slot.incarnation)]
        unreported = slot.reported is None and slot.refused is None
        if unreported and slot.pid is not None and slot.pid != os.getpid() and slot.node == this_node():
            # what it started and left behind, found by its process group (each actor leads its own): a child
            # SIGKILLed from outside could not end it itself, and the next incarnation must not meet it. One that
            # reported its end (or its refused start) has ended its own (.leftovers, before the report): no /proc scan
            end_after_kill(self._context, f"{self.path}/{slot.key}", slot.pid, slot.log_offset)
        if not slot.started:
            why = slot.refused or reasons.killed(_never_started(slot))
            self._feed(ChildStartFailed(slot.key, slot.incarnation, why))
        else:
            self._feed(ChildDown(slot.key, slot.incarnation, slot.reported or reasons.killed()))

    def _kill(self, slot: _Slot) -> None:
        """End a child's process now: SIGKILL on process bases, thespian's exit request in-process.

        A child on another node cannot be signalled from here; its node ends it on request.
        """
        if slot.pid is not None and slot.pid != os.getpid() and slot.node == this_node():
            # the whole process tree: what the child started (a server on a port) ends with it, as its own stop would
            # have ended it (.leftovers) — the next incarnation must not meet it (OTP: a killed owner's ports close)
            end_tree(slot.pid)  # none signalled: already gone, its ChildActorExited is on the way
            return
        self.send(slot.address, ActorExitRequest())

    # -- when a child stopped serving --------------------------------------------------------------

    def _note_report(self, key: str, incarnation: int, stopped_ns: int | None, node: str) -> None:
        """Remember when a child stopped handling messages, for its ``exited``/``terminated`` event: the instant its
        exit report says (``time.monotonic_ns``, one clock for every process of the host), never later than the
        report's arrival — the arrival itself when it says none, or is on another node. An ask sent after that
        instant was never handled by that child, however late its process ends: a handle asks the next incarnation
        instead (:meth:`~ouroactors.system._stopped.Watch.ended_before`). Only where handles watch the log (the
        process bases); a simulation's log stays the same from run to run."""
        if self._context is None or self._context.base == "simple":
            return
        self._reports[(key, incarnation)] = stopped_serving(stopped_ns, node, this_node(), time.monotonic_ns())
        while len(self._reports) > _REPORTS_KEPT:  # an end never logged (this supervisor stopping first)
            del self._reports[next(iter(self._reports))]

    def _with_report(self, cmd: Emit) -> dict[str, Any]:
        """``cmd``'s fields, with ``stopped_ns`` on a child's end: when it stopped handling messages (see
        :meth:`_note_report`)."""
        if cmd.kind not in ("exited", "terminated") or cmd.child is None or not self._reports:
            return cmd.fields
        stopped = self._reports.pop((cmd.child, cmd.fields.get("incarnation", -1)), None)
        boot = boot_id()  # the clock it is on: a reader on another host (or boot) leaves the stamp alone
        return cmd.fields if stopped is None or boot is None else {**cmd.fields, "stopped_ns": stopped, "boot": boot}
