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
``runtime_rehearsed`` and the directory's ``spare_kept`` for it, no ``runtime_opened`` since) and the supervisor's
children, never asked of the runtimes.
``sandbox = none`` (the demo takes bwrap when it works): the run checks the coordinator, not the sandbox.

**Every ask goes through its own endpoint** (:func:`~._asking.isolated`): under crashes asks time out, and a
late answer must never be taken for the next ask's.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..runtime import demo_setup as demo_agent
from ..system.handle import ActorSystem
from .checks import Violation
from .session_checks import Read, Reference, Seen, SessionHistory, View, check_session
from .session_driver import (
    COORDINATORS,
    EVENT_ID,
    EXECUTION,
    ROLES,
    STATIC,
    TEXT,
    Arming,
    Driver,
    SessionWorkload,
    incarnation_of,
    spares_of,
)
from .session_read import read_durable

FIRST_CALL_PACE_MS = 100  # the scenario's first model call streams ~0.3 s: the window the steer lands in (see script)


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
        driver = Driver(system, config, f"sess-{uuid.uuid4().hex[:8]}", str(workspace.resolve()), armings, mark,
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
                          list(durable.get("journal", [])), list(reused or []), resumed, cancelled_at,
                          dict(durable.get("journal_check") or {}))


def crash_free(work: Path, config: SessionWorkload | None = None) -> SessionRun:
    """The reference: the scenario without a fault (its own invariants checked too, (c) against nothing)."""
    return run_session(work, "reference", config=config)


__all__ = ["COORDINATORS", "EVENT_ID", "EXECUTION", "ROLES", "STATIC", "TEXT", "Arming", "SessionRun",
           "SessionWorkload", "crash_free", "fault_firings", "history_of", "incarnation_of", "run_session", "spares_of"]
