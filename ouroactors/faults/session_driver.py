"""The client side of a session run: what a user does to one session, through :class:`ouroactors.sessions.Sessions`.

:class:`Driver` runs the scenario :mod:`.session_workload` describes — create the session, send its message (again
under the same event id after a failure), steer it, suspend and resume it or cancel it, follow its log with long
polls, answer its approvals once a spare runtime exists — and records what it was told (views, reads, what each
resume event was answered) for the session invariants. It also arms the run's fault plans where they belong: a
static worker by path, the session's first coordinator through its supervisor around ``new``, the k-th runtime
through the execution supervisor before ``send``. Every ask goes through its own endpoint (``isolated``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import OuroactorsError
from ..core.faults import FaultPlan
from ..runtime import demo_setup as demo_agent
from ..sessions import SessionRejected, Sessions
from ..system.handle import ActorSystem
from ._asking import isolated
from .session_checks import PARKED, TERMINAL, Read, Seen, View

TEXT = "please tick off 'try the demo' in NOTES.md"
STEER = "and leave the rest of NOTES.md as it is"
EVENT_ID = "m-scenario-1"
COORDINATORS = "agent/coordinator"
EXECUTION = "agent/execution"
STATIC = ("agent/storage", "agent/ledger", "agent/grants", "agent/workspace", "agent/sessions")
ROLES = ("static", "coordinator", "runtime")
REAP_WITHIN_S = 3.0  # the ledger looks for dead writers every 0.25 s


@dataclass(frozen=True)
class SessionWorkload:
    """Timing of one run (small on purpose: every crash site is a whole run)."""

    ask_timeout: float = 3.0  # a command whose coordinator died answers never: retried after this
    read_wait: float = 0.3  # the subscriber's long poll
    deadline: float = 30.0  # the session must be terminal or parked within this (after send; retries: half)
    sandbox: str = "none"
    spare_runtimes: int | None = None  # None: the tree file's (supervision_trees/agent.toml keeps one)
    spare_wait: float = 2.0  # the operator answers an approval once a spare exists, or after this
    suspend: bool = False  # suspend the turn right after the steer, then resume it (see Driver._suspend_and_resume)
    cancel: bool = False  # cancel the session right after the steer, retried until answered (see Driver._cancel)

    def __post_init__(self) -> None:
        if self.suspend and self.cancel:
            raise ValueError("a scenario suspends its turn or cancels its session, not both")


@dataclass(frozen=True)
class Arming:
    """A plan and where it goes: ``role`` static (at ``path``), coordinator (the session's first) or runtime
    (``incarnation`` k: the session's k-th runtime; None: every runtime, as a recording arms them)."""

    plan: FaultPlan
    role: str
    path: str | None = None
    incarnation: int | None = 1

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"arming role: {self.role!r}; allowed: {', '.join(ROLES)}")
        if self.role == "static" and self.path is None:
            raise ValueError("arming a static worker needs its path")


class _Sessions(Sessions):
    """The Python API with the workload's ask timeout (a command whose coordinator died is never answered)."""

    def __init__(self, system: Any, ask_timeout: float, data_dir: Any) -> None:
        super().__init__(system, data_dir=data_dir)
        self.ask_timeout = ask_timeout

    def _ask(self, message: Any, timeout: float = 0.0) -> Any:
        return self.system.ask(self.directory, message, self.ask_timeout)


def spares_of(config: SessionWorkload) -> int:
    """The spare runtimes the run's directory keeps (the tree file's when the workload names none)."""
    if config.spare_runtimes is not None:
        return config.spare_runtimes
    tree = demo_agent.agent_tree(Path("."))
    sessions = next((c for c in tree.children or () if c.id == "sessions"), None)
    return int(sessions.kwargs.get("spare_runtimes", 0)) if sessions is not None else 0


def incarnation_of(path: str) -> int:
    """The k of a dynamic child's path (``agent/execution/runtime#k``): its supervisor's k-th child."""
    _, _, number = path.rpartition("#")
    return int(number) if number.isdigit() else 0


class Driver:
    """The client side of one run: creates the session, sends, steers, suspends or cancels, follows and answers
    approvals through the Python API, as :mod:`.session_workload`'s docstring says; arms the run's fault plans."""

    def __init__(self, system: ActorSystem, config: SessionWorkload, sid: str, workspace: str,
                 armings: Sequence[Arming], mark: int = 0, script_file: str | None = None) -> None:
        self.system, self.config, self.sid = system, config, sid
        self.session_config: dict[str, Any] = {"workspace": workspace, "sandbox": {"mode": config.sandbox},
                               **({"model": {"kind": "scripted", "script": script_file}} if script_file else {})}
        self.armings = armings
        self.reads: list[Read] = []
        self.views: list[View] = []
        self.sent: list[tuple[str, str]] = []
        self.errors: list[str] = []
        self.approvals = 0
        self.cursor = 0
        self.spares = spares_of(config)
        self.mark = mark  # the event log's length when the run began (see _spare_ready)
        self.spares_seen: list[str] = []  # the spare that existed when each approval was answered
        self.resumed = 0  # resumes of a suspended session the client was answered done (each starts a turn)
        self.cancelled_at: int | None = None  # the committed cursor of the record a cancel was answered with

    @contextlib.contextmanager
    def api(self) -> Iterator[_Sessions]:
        with isolated(self.system) as view:
            yield _Sessions(view, self.config.ask_timeout, self.system.data_dir)

    def _arm(self, role: str, path: str | None = None, *, disarm: bool = False) -> None:
        for arming in self.armings:
            if arming.role == role:
                with isolated(self.system) as view:
                    view.arm_faults(arming.path if role == "static" else path, None if disarm else arming.plan)

    def _arm_runtimes(self) -> None:
        """Arm ``agent/execution`` for the k-th runtime it forks from now (every runtime: a recording)."""
        aimed = [arming for arming in self.armings if arming.role == "runtime"]
        if len(aimed) > 1:
            raise ValueError("one runtime arming per run: a process holds one plan")
        for arming in aimed:
            want = arming.incarnation
            plan = arming.plan if want is None else dataclasses.replace(arming.plan, forks=1, skip_forks=want - 1)
            with isolated(self.system) as view:
                view.arm_faults(EXECUTION, plan)

    def _spare_ready(self) -> str | None:
        """The path of a running runtime that rehearsed its open and was not opened since, and that the directory
        keeps to offer (its ``spare_kept``: the runtime may rehearse before the directory has the supervisor's answer,
        and a command it forwards meanwhile starts a runtime of its own — a run that differs from the recording), or
        None. Read from the event log and the supervisor, never asked of the runtimes: a fresh endpoint asking every
        runtime every few milliseconds was load of the harness's own on the processes under test (and met a thespian
        transport failure in one)."""
        events = self.system.events
        events.poll()
        rehearsed: set[str] = set()
        kept: set[str] = set()
        opened: set[str] = set()
        for event in events.all()[self.mark:]:
            if event.kind == "runtime_rehearsed" and event.path:
                rehearsed.add(event.path)
            elif event.kind == "spare_kept":
                kept.add(str(event.fields.get("runtime")))
            elif event.kind == "runtime_opened" and event.path:
                opened.add(event.path)
        waiting = (rehearsed & kept) - opened
        if not waiting:
            return None
        with isolated(self.system) as view:
            running = {f"{EXECUTION}/{child.id}" for child in view.which_children(EXECUTION)
                       if child.status == "running"}
        found = sorted(waiting & running, key=incarnation_of)
        return found[0] if found else None

    def _wait_for_a_spare(self) -> None:
        deadline = time.monotonic() + self.config.spare_wait
        while self.spares and time.monotonic() < deadline:
            try:
                spare = self._spare_ready()
                if spare is not None:
                    self.spares_seen.append(spare)
                    return
            except OuroactorsError as exc:  # the supervisor restarting, a runtime gone meanwhile: looked at again
                self._error("spare", exc)
            time.sleep(0.05)  # polling a condition with a deadline (the spare is forked after the message's runtime)

    def _error(self, what: str, exc: BaseException) -> None:
        self.errors.append(f"{what}: {type(exc).__name__}: {exc}"[:300])

    def drive(self) -> None:
        self._arm("static")
        self._arm("coordinator", COORDINATORS)
        try:
            created = self._new()
        finally:  # before any retry: only the first coordinator carries the plan
            self._arm("coordinator", COORDINATORS, disarm=True)
        deadline = time.monotonic() + self.config.deadline / 4
        while not created and time.monotonic() < deadline:
            time.sleep(0.2)  # back-off between a client's retries (not a synchronisation)
            created = self._new()
        self._arm_runtimes()
        self._send()
        self._steer()
        if self.config.suspend:
            self._suspend_and_resume()
        if self.config.cancel:
            self._cancel()
        self._follow()
        self._until_ledger_reaped()

    def _new(self) -> bool:
        """Create the session; after a failure (its coordinator died starting), True if it exists anyway."""
        try:
            with self.api() as sessions:
                sessions.new(self.sid, self.session_config)
            return True
        except OuroactorsError as exc:
            self._error("new", exc)
        try:
            with self.api() as sessions:
                sessions.show(self.sid)
            return True
        except OuroactorsError as exc:
            self._error("show", exc)
            return False

    def _send(self) -> None:
        deadline = time.monotonic() + self.config.deadline / 2
        while True:
            try:
                with self.api() as sessions:
                    sessions.send(self.sid, TEXT, event_id=EVENT_ID, last=True, expected_version=0)
                self.sent.append((EVENT_ID, "done"))
                return
            except SessionRejected as exc:  # a retry of an accepted event: refused and recorded, as it must be
                self.sent.append((EVENT_ID, f"rejected:{exc.code}"))
                self._error("send", exc)
                return
            except OuroactorsError as exc:
                self.sent.append((EVENT_ID, "error"))
                self._error("send", exc)
            if time.monotonic() > deadline:
                return
            time.sleep(0.2)  # back-off between a client's retries (not a synchronisation)

    def _steer(self) -> None:
        """Steer the turn the message started, once, right after it is sent. Refused or lost (no turn yet, a crashed
        runtime or coordinator) is what a user may meet, not a violation; an answered one must reach the turn
        (``steer-dropped``), and where it lands must not change how the session ends (the script, :func:`script`)."""
        try:
            with self.api() as sessions:
                sessions.steer(self.sid, STEER)
        except OuroactorsError as exc:
            self._error("steer", exc)

    def _suspend_and_resume(self) -> None:
        """Suspend the turn, retried until answered (a suspend is idempotent: one taken by a coordinator that died
        before answering is done already when retried) or refused because the session is not running (the turn
        went on: an approval wait, a recovery), then, once the session is suspended, resume it (retried until
        answered: a resume runs the message again as the next turn, so it must be taken once). The interrupted
        turn's end is published before its runtime goes, and an interrupted turn never completes a session: the
        crash-free run completes with the resumed turn."""
        deadline = time.monotonic() + self.config.deadline / 4
        while time.monotonic() < deadline:
            try:
                with self.api() as sessions:
                    sessions.suspend(self.sid)
                break
            except OuroactorsError as exc:
                self._error("suspend", exc)
                if "only a running one is suspended" in str(exc):
                    break
            time.sleep(0.2)  # back-off between a client's retries (not a synchronisation)
        deadline = time.monotonic() + self.config.deadline / 2
        while time.monotonic() < deadline:
            try:
                with self.api() as sessions:
                    state = sessions.show(self.sid).state
                    if state == "suspended":
                        # counted when asked: a resume taken by a coordinator that died before answering started
                        # its turn all the same (and is not asked again: the session is no longer suspended)
                        self.resumed += 1
                        sessions.resume(self.sid)
                        return
            except OuroactorsError as exc:  # a coordinator restarting, or it resumed and died before answering
                self._error("resume", exc)
                time.sleep(0.2)  # back-off between a client's retries (not a synchronisation)
                continue
            if state != "running":  # an approval wait, an end, a park: the turn went on without the suspend
                return
            time.sleep(0.1)  # a suspend cut short by a crash: its recovery may still suspend (polled, deadline)

    def _cancel(self) -> None:
        """Cancel the session, retried until answered: a cancel is idempotent (one that was taken, its answer lost
        with a dying coordinator, is done already when retried). The operator answers no approval before it, so
        every run ends cancelled, the crash-free one too, wherever the cancel lands — the running turn (interrupted,
        its end published first), an approval wait, a recovery, a park. The cursor of the record it was answered
        with is where the log must end (``published-after-cancel``)."""
        deadline = time.monotonic() + self.config.deadline / 2
        while time.monotonic() < deadline:
            try:
                with self.api() as sessions:
                    done = sessions.cancel(self.sid)
                self.cancelled_at = done.view.committed_cursor
                return
            except OuroactorsError as exc:  # a coordinator restarting, or one that died taking it: asked again
                self._error("cancel", exc)
            time.sleep(0.2)  # back-off between a client's retries (not a synchronisation)

    def _follow(self) -> None:
        deadline = time.monotonic() + self.config.deadline
        asked = time.monotonic()
        while time.monotonic() < deadline:
            try:
                with self.api() as sessions:
                    batch = sessions.read(self.sid, self.cursor, 256, self.config.read_wait)
            except OuroactorsError as exc:  # the directory restarting: reconnect from where we were
                self._error("read", exc)
                time.sleep(0.1)  # back-off before reconnecting
                continue
            seen = tuple(Seen.of(e) for e in batch.events)
            self.reads.append(Read("follower", self.cursor, seen, int(batch.committed), str(batch.state)))
            if seen:
                self.cursor = max(self.cursor, seen[-1].cursor)
            if any(e.kind == "approval_needed" for e in seen) or time.monotonic() - asked > 1.0:
                asked = time.monotonic()
                self._approve()
            self._view()
            if not seen and (batch.state in TERMINAL or batch.state == PARKED):
                return
        self.errors.append(f"{self.sid}: not terminal nor parked within {self.config.deadline}s")

    def _until_ledger_reaped(self) -> None:
        """Wait until the ledger watches no direct writer: the session's runtimes end with it, and the ledger reaps
        a dead one on a timer. The reap is the ledger's only commit in this scenario, so without this wait whether a
        run reaches it is a race: a recording that did would name a site its crash runs miss (``not reached``)."""
        deadline, gone = time.monotonic() + REAP_WITHIN_S, 0
        while time.monotonic() < deadline:
            try:
                with isolated(self.system) as view:
                    status = view.ask("agent/ledger", "status", timeout=self.config.ask_timeout)
                if status["watched_writers"] == 0:
                    return
                gone = status["gone_writers"]
            except OuroactorsError as exc:  # the ledger restarting (a fault at the reap's commit)
                self._error("ledger status", exc)
            time.sleep(0.05)  # the ledger reaps every RUNNER_PING_S: bounded poll
        if gone:  # a writer still running at the end is no fault; a dead one the ledger never reaped is
            self.errors.append(f"{self.sid}: the ledger kept {gone} dead writer(s) unreaped for {REAP_WITHIN_S}s")

    def _view(self) -> None:
        try:
            with self.api() as sessions:
                view = sessions.show(self.sid)
        except OuroactorsError as exc:
            self._error("show", exc)
            return
        self.views.append(View(view.committed_cursor, view.state_version, view.revision, view.state))

    def _approve(self) -> None:
        try:
            with self.api() as sessions:
                pending = sessions.approvals(self.sid)
            if pending:
                self._wait_for_a_spare()
            for approval in pending:
                with self.api() as sessions:
                    sessions.approve(self.sid, approval.approval_id, "session workload: the edit is asked for")
                self.approvals += 1
        except OuroactorsError as exc:  # grants restarting, or the approval was answered/expired meanwhile
            self._error("approve", exc)


__all__ = ["COORDINATORS", "EVENT_ID", "EXECUTION", "ROLES", "STATIC", "STEER", "TEXT", "Arming", "Driver",
           "SessionWorkload", "incarnation_of", "spares_of"]
