"""The session workload: the demo's scenario, driven through real coordinators, then checked by the session invariants.

One run = a fresh multiproc system with ``supervision_trees/agent.toml``'s tree (the demo's workspace root and
permission rules, :func:`ouroactors.runtime.demo_setup.agent_tree`), a fresh workspace beside its data dir, and one
session driven through :class:`ouroactors.sessions.Sessions` — the path a user takes:

1. ``new`` (suspended, version 0), then ``send`` one message marked ``last`` under a fixed event id. The scripted
   model (the embedded default's turns, :func:`script`) reads NOTES.md, edits it (no rule covers the edit: grants
   asks for an approval), greps it in the shell and says it is done. A ``send`` that fails (its coordinator died
   mid-command, the ask timed out) is **sent again with the same event id**, as a client would: the coordinator
   must take it once. Right after it the turn is **steered** once (not retried): where the steer lands varies from
   run to run, and the checks must hold wherever it does — an answered steer reaches its turn. With
   ``SessionWorkload.suspend`` (``enumerate-sessions --suspend``) the turn is then suspended (its end published,
   ``interrupted``) and, once the session is suspended, resumed: the message runs again as turn 2, which completes
   the session (an interrupted turn never does). With ``SessionWorkload.cancel`` (``enumerate-sessions --cancel``)
   the session is cancelled instead, the cancel retried until answered: every run ends cancelled.
2. A subscriber follows the committed log with ``read(after=cursor)`` long polls, reconnecting after any error
   from where it was, and records every batch it got and the committed cursor the batch reported
   (:class:`~.session_checks.Read`); every ``show`` view is kept too.
3. The operator answers every pending approval of the session (the re-run of a turn after a recovery asks
   again: answered again).
4. The run ends when the session is terminal or parked and its log is drained, or at the deadline. Then the
   durable record, log, resume events and journal outline are read (in a child process, :mod:`.session_read`) and
   the invariants of :mod:`.session_checks` are checked against the crash-free run's terminal state.

**Where a fault plan is armed** (:class:`Arming`). Static workers (the authorities, the session directory) are
armed by path before the session exists. A session's coordinator and runtimes are children forked by their
supervisors, and a plan armed in a supervisor is inherited by what it forks, from the child's first instruction.
So the workload arms ``agent/coordinator`` just around ``new`` (the session's first coordinator carries the
plan), and ``agent/execution`` once, before ``send``, for the *k*-th runtime it forks from then on
(``agent/execution/runtime#k``: ``FaultPlan(skip_forks=k-1, forks=1)``, counted by the supervisor as it forks).
Incarnations forked after it do not carry the plan: a crash site is a crash of *that* process at the n-th time it
reaches the point, and what follows is recovery, not a crash loop. (A recording arms every runtime.)

**Spare runtimes** (``spare_runtimes``: None runs the tree file's, which keeps one). The directory forks a spare
0.2 s after the message it could offer none with, and offers it with the approval's answer. So in the crash-free
run runtime #1 is the one the coordinator started for the message, #2 the spare that resumes the turn after the
approval, #3 the next spare (never used). The operator here **answers an approval only once the spare exists**
(a person takes seconds; bounded by ``spare_wait``): answered sooner, which process resumes the turn — the spare
or one the coordinator starts itself — would turn on a race of milliseconds, and the recording's runtime numbers
would not name the same processes in the crash runs. "The spare exists" is read from the event log (a runtime's
``runtime_rehearsed`` and no ``runtime_opened`` since) and the supervisor's children, never asked of the runtimes.
``sandbox = none`` (the demo takes bwrap when it works): the run checks the coordinator, not the sandbox.

**Every ask goes through its own endpoint** (:func:`~._asking.isolated`): under crashes asks time out, and a
late answer must never be taken for the next ask's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import OuroactorsError
from ..core.faults import FaultPlan
from ..runtime import demo_setup as demo_agent
from ..sessions import SessionRejected, Sessions
from ..system.handle import ActorSystem
from ._asking import isolated
from .checks import Violation
from .session_checks import PARKED, TERMINAL, Read, Reference, Seen, SessionHistory, View, check_session
from .session_read import read_durable

TEXT = "please tick off 'try the demo' in NOTES.md"
STEER = "and leave the rest of NOTES.md as it is"
FIRST_CALL_PACE_MS = 100  # the scenario's first model call streams ~0.3 s: the window the steer lands in (see script)
EVENT_ID = "m-scenario-1"
COORDINATORS = "agent/coordinator"
EXECUTION = "agent/execution"
STATIC = ("agent/storage", "agent/ledger", "agent/grants", "agent/workspace", "agent/sessions")
ROLES = ("static", "coordinator", "runtime")


@dataclass(frozen=True)
class SessionWorkload:
    """Timing of one run (small on purpose: every crash site is a whole run)."""

    ask_timeout: float = 3.0  # a command whose coordinator died answers never: retried after this
    read_wait: float = 0.3  # the subscriber's long poll
    deadline: float = 30.0  # the session must be terminal or parked within this (after send; retries: half)
    sandbox: str = "none"
    spare_runtimes: int | None = None  # None: the tree file's (supervision_trees/agent.toml keeps one)
    spare_wait: float = 2.0  # the operator answers an approval once a spare exists, or after this
    suspend: bool = False  # suspend the turn right after the steer, then resume it (see _Driver._suspend_and_resume)
    cancel: bool = False  # cancel the session right after the steer, retried until answered (see _Driver._cancel)

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


@dataclass
class SessionRun:
    """What one run did and what the checks found."""

    name: str
    session_id: str
    history: SessionHistory
    violations: list[Violation]
    firings: list[dict[str, Any]] = field(default_factory=list)  # fault_fired events: path (the actor), point
    errors: list[str] = field(default_factory=list)  # asks that failed along the way (expected under crashes)
    approvals: int = 0
    duration_s: float = 0.0
    spares_seen: list[str] = field(default_factory=list)  # the spare each approval was answered beside

    @property
    def killed(self) -> list[str]:
        return [f"{f['path']}@{f['point']}#{f['hit']}" for f in self.firings if f.get("action") == "kill"]

    def reference(self) -> Reference:
        return Reference(self.history.state, self.history.last_settled())


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


def script(pace_ms: int = FIRST_CALL_PACE_MS) -> dict[str, Any]:
    """The scenario's model: the embedded default script's turns (read, edit, grep, done) without their ``expect``
    checks, which name the role of a request's last message — a steer delivered before a call makes it ``user`` —
    and one more text answer, for the model call a steer that arrives during the final answer adds (a coordinator's
    replacement may forward it late). Where the steer lands then changes the conversation, never how it ends. The
    first call streams its events :data:`FIRST_CALL_PACE_MS` apart: the steer, sent as soon as ``send`` returns,
    finds the turn running on a loaded machine too (before the approval wait detaches its runtime, which refuses
    a steer), and is taken before call 1."""
    from ..runtime.execution.providers.scripted import DEFAULT_SCRIPT_DATA

    turns = [{k: v for k, v in turn.items() if k != "expect"} for turn in DEFAULT_SCRIPT_DATA["turns"]]
    turns[0] = {**turns[0], "pace_ms": pace_ms}
    return {"name": "session workload", "turns": [*turns, {"events": [{"kind": "text", "text": "Noted."}]}]}


def run_session(work: Path, name: str, *, armings: Sequence[Arming] = (), reference: Reference | None = None,
                config: SessionWorkload | None = None) -> SessionRun:
    """One run on a fresh system under ``work/name`` (see the module docstring); the system is shut down after."""
    config = config or SessionWorkload()
    base = Path(work) / name
    data_dir, workspace = base / "data", base / "workspace"
    data_dir.mkdir(parents=True, exist_ok=True)
    demo_agent.prepare_workspace(workspace)
    began = time.monotonic()
    system = ActorSystem.start("multiproc", data_dir)
    try:
        system.start_tree(demo_agent.agent_tree(workspace.resolve(), spare_runtimes=config.spare_runtimes))
        mark = system.mark()
        script_file = base / "script.json"
        # a suspend or cancel follows the steer: the first call streams three times as long, so both find the turn
        # running
        paced = 3 if config.suspend or config.cancel else 1
        script_file.write_text(json.dumps(script(FIRST_CALL_PACE_MS * paced)))
        driver = _Driver(system, config, f"sess-{uuid.uuid4().hex[:8]}", str(workspace.resolve()), armings, mark,
                         str(script_file))
        driver.drive()
        firings = fault_firings(system, mark)
        reused = reused_calls(system, mark, driver.sid)
        durable = read_durable(str(data_dir), driver.sid)
    finally:
        system.shutdown()
    history = history_of(driver.sid, durable, driver.reads, driver.views, driver.sent, reference, reused,
                         driver.resumed, driver.cancelled_at)
    return SessionRun(name, driver.sid, history, check_session(history), firings, driver.errors, driver.approvals,
                      time.monotonic() - began, driver.spares_seen)


def fault_firings(system: ActorSystem, mark: int) -> list[dict[str, Any]]:
    """The ``fault_fired`` events since ``mark``, each named by the actor that reached the point."""
    system.events.poll()
    out = []
    for event in system.events.all()[mark:]:
        if event.kind == "fault_fired":
            fields = event.fields
            out.append({"path": fields.get("actor") or event.path, "armed_at": event.path, "point": fields["point"],
                        "action": fields.get("action"), "hit": fields.get("hit")})
    return out


def reused_calls(system: ActorSystem, mark: int, sid: str) -> list[tuple[int, int]]:
    """(turn, index) of each model call a re-run of ``sid``'s turns took from the journal since ``mark``."""
    system.events.poll()
    return [(int(e.fields["turn"]), int(e.fields["index"])) for e in system.events.all()[mark:]
            if e.kind == "model_call_reused" and e.fields.get("session") == sid]


def history_of(sid: str, durable: dict[str, Any], reads: list[Read], views: list[View], sent: list[tuple[str, str]],
               reference: Reference | None, reused: list[tuple[int, int]] | None = None,
               resumed: int = 0, cancelled_at: int | None = None) -> SessionHistory:
    record = durable.get("record") or {}
    return SessionHistory(sid, str(record.get("state", "missing")), int(record.get("committed_cursor", 0)),
                          record.get("reason"), [Seen.of(e) for e in durable.get("events", [])], reads, views,
                          list(durable.get("accepted", [])), list(durable.get("rejected", [])), sent, reference,
                          list(durable.get("journal", [])), list(reused or []), resumed, cancelled_at)


class _Driver:
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
        """The path of a running runtime that rehearsed its open and was not opened since (the directory's spare:
        nobody opened it within 50 ms of its start), or None. Read from the event log and the supervisor, never asked
        of the runtimes: a fresh endpoint asking every runtime every few milliseconds was load of the harness's own
        on the processes under test (and met a thespian transport failure in one)."""
        events = self.system.events
        events.poll()
        rehearsed: set[str] = set()
        opened: set[str] = set()
        for event in events.all()[self.mark:]:
            if event.kind == "runtime_rehearsed" and event.path:
                rehearsed.add(event.path)
            elif event.kind == "runtime_opened" and event.path:
                opened.add(event.path)
        waiting = rehearsed - opened
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


def crash_free(work: Path, config: SessionWorkload | None = None) -> SessionRun:
    """The reference: the scenario without a fault (its own invariants checked too, (c) against nothing)."""
    return run_session(work, "reference", config=config)


__all__ = ["EVENT_ID", "ROLES", "STATIC", "TEXT", "Arming", "SessionRun", "SessionWorkload", "crash_free",
           "fault_firings", "history_of", "incarnation_of", "run_session"]
