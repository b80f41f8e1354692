"""The runtime workload: real sessions of the real session runtime, under chaos, checked by the invariants.

:class:`~.workload.Driver` plays the runtime's part against the bare authorities. This driver does not: every
effect is a tool call the **real** :class:`~ouroactors.runtime.execution.runtime.Runtime` runs — grants → ledger
start → the ``http`` tool → settlement, by :mod:`ouroactors.runtime.execution.honesty`'s table — so chaos and the
invariant checkers test the code users run. Per session:

1. a workspace lease (acquired with the session's lease-owner actor as owner, fenced and reclaimed like the
   synthetic driver's: the lease survives a runtime's death, as a coordinator's would);
2. a ``Runtime`` child started on the execution supervisor (``start_child``) and ``OpenSession`` with a scripted
   model whose file is written for the run: turn *k* calls ``http`` ``POST <world>/items`` (call id ``e<k-1>``;
   the tool sends the effect id ``<session>/t<k>/e<k-1>`` as ``Idempotency-Key``, which the world keys on), then
   says it is done;
3. each turn: ``SendText`` then ``DrainOutput``/``AckOutput`` until ``turn_settled``.

**A runtime that died** (killed, or gone with its supervisor when the ledger restarted under rest_for_one) is
replaced: a new child and ``OpenSession`` again. The new runtime continues the session from its journal (the
turns it verified; :class:`~ouroactors.runtime.execution.messages.RuntimeStatus` says how many), and the driver
sends the turns after those again. The scripted model answers by conversation length, so a re-sent turn makes the
same call under the same turn number, hence the same effect id: the ledger holds it and the runtime does not run it
again (the table's ``NOT_AGAIN``). A start committed before a
death and never settled stays ``started``; recovery makes it ``ambiguous`` and the world's reconciler settles what
the world proves. That is exactly what the checkers look at: the ledger and the world afterwards.

**Kills** are the driver's own (:class:`Kill`): a SIGKILL of the session's runtime or of the ledger process, by
pid, at a named moment of a turn: right after ``SendText`` was accepted, after the first output was drained, or
after the call's result was drained (the scripted model then waits :data:`RESULT_PACE_MS` before its closing
words, so the kill lands while the call is settled in the ledger and its turn is not yet journaled: the case a
replacement runtime must not run again).
A seed's plan (:meth:`~.runner.Bench.run`'s ``plan``) applies too: armed in the static workers and in the execution
supervisor, whose runtimes forked during the run inherit it (each counting its own hits).
:func:`kills_for_seed` draws a schedule from a seed.

Multiproc only: the runtime runs its turns in a thread beside the actor, which the simulated simple base has not.
"""

from __future__ import annotations

import json
import os
import random
import signal
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from thespian.actors import ActorSystemFailure

from ..core import clock
from ..core.errors import OuroactorsError
from ..core.procs import pid_alive
from ..runtime.execution.errors import Busy
from ..runtime.execution.messages import (
    AckOutput,
    CloseSession,
    DrainOutput,
    InterruptTurn,
    OpenSession,
    RuntimeStatus,
    RuntimeStatusRequest,
    SendText,
)
from ..runtime.execution.output import Batch
from ..system.handle import ActorSystem
from ._asking import WrongAnswer, expect_answer, isolated
from .runtime_checks import (
    RuntimeObservation,
    call_delivered_once,
    check_runtime_run,
    run_prefix,
    stale_generation_direct,
)
from .workload import (
    _WAIT,
    DENIED_HOST,
    Driver,
    EffectRecord,
    EffectSpec,
    LeaseRecord,
    Targets,
    WorkloadConfig,
)
from .world import WorldClient

RUNTIME_ACTOR = "ouroactors.runtime.execution.runtime:Runtime"
KILL_TARGETS = ("runtime", "ledger")
RESULT_PACE_MS = 300
# What an ask may end with when its target just died: ours, or thespian's own transport failure.
ASK_FAILURES: tuple[type[BaseException], ...] = (OuroactorsError, ActorSystemFailure)
KILL_MOMENTS = ("sent", "drained", "result")  # after SendText; after the first output; after the call's result


class RuntimeWorkloadError(OuroactorsError):
    """The runtime workload cannot run here (wrong base, no execution supervisor, no grants)."""


@dataclass(frozen=True)
class Kill:
    """SIGKILL ``target`` (the session's runtime, or the ledger) during turn ``turn`` of session ``session``."""

    session: int
    turn: int  # 1-based
    target: Literal["runtime", "ledger"]
    moment: Literal["sent", "drained", "result"] = "sent"

    def __post_init__(self) -> None:
        if self.target not in KILL_TARGETS:
            raise ValueError(f"kill target: {self.target!r}; allowed: {', '.join(KILL_TARGETS)}")
        if self.moment not in KILL_MOMENTS:
            raise ValueError(f"kill moment: {self.moment!r}; allowed: {', '.join(KILL_MOMENTS)}")
        if self.session < 0 or self.turn < 1:
            raise ValueError(f"kill: session >= 0 and turn >= 1, got session={self.session}, turn={self.turn}")


def kills_for_seed(seed: int | str, config: WorkloadConfig, *, count: int = 2) -> tuple[Kill, ...]:
    """``count`` kills drawn from ``seed`` alone over the workload's sessions and turns (same seed, same kills)."""
    rng = random.Random(f"runtime-kills:{seed}")
    return tuple(Kill(rng.randrange(config.sessions), rng.randrange(config.effects) + 1,
                      rng.choice(KILL_TARGETS), rng.choice(KILL_MOMENTS))  # type: ignore[arg-type]
                 for _ in range(count))


def runtime_session_id(run_id: str, session: int) -> str:
    """A runtime session's id: ``<run>:s<i>`` (a session id is one journal key: no ``/``)."""
    return f"{run_id}:s{session}"


def runtime_effect_id(sid: str, index: int) -> str:
    """The effect id the runtime gives effect ``index`` of session ``sid`` (turn index+1, call ``e<index>``)."""
    return f"{sid}/t{index + 1}/e{index}"


@dataclass
class _Session:
    index: int
    sid: str
    config: dict[str, Any]
    path: str | None = None  # the runtime child serving it
    turns: int = 0  # turns settled on the current runtime
    cursor: int = 0
    opened: int = 0  # runtimes opened for it
    fired: set[Kill] = field(default_factory=set)


class RuntimeDriver(Driver):
    """Drives ``config.sessions`` real sessions of the runtime (see the module docstring)."""

    def __init__(self, system: ActorSystem, targets: Targets, world: WorldClient, config: WorkloadConfig, *,
                 execution: str, workspace_root: str, script_dir: str | Path, kills: Sequence[Kill] = (),
                 heal: Any = None) -> None:
        if system.context.base != "multiproc":
            raise RuntimeWorkloadError(f"the runtime workload needs the multiproc base (the runtime runs turns in a "
                                       f"thread beside the actor); this system is {system.context.base!r}")
        if targets.grants is None or targets.workspace is None:
            raise RuntimeWorkloadError("the runtime workload needs a grants and a workspace authority in the tree")
        super().__init__(system, targets, world, config, workspace_root=workspace_root, heal=heal)
        self.execution = execution
        self.script_dir = Path(script_dir)
        self.kills = tuple(kills)
        self.world_url = str(world.url).rstrip("/")

    # -- one session ----------------------------------------------------------------------------------------

    def _session(self, run_id: str, index: int, leases: bool) -> Generator[str, None, None]:
        specs = self.config.effect_specs(run_id, index)
        sid = runtime_session_id(run_id, index)
        for k, spec in enumerate(specs):
            eid = runtime_effect_id(sid, k)
            self.record.effects[eid] = EffectRecord(eid, eid, sid, self._expected(spec))
        assert self.workspace_root is not None
        root = self.config.root_of(self.workspace_root, index)
        lease = self.record.leases[sid] = LeaseRecord(sid, root, "exclusive")
        holder: dict[str, Any] = {"request_id": self.request_id(sid, attempt=0)}
        if not (yield from self._acquire(lease, index, holder)):
            for k in range(len(specs)):
                self.record.effects[runtime_effect_id(sid, k)].outcome = f"abandoned: no lease ({lease.outcome})"
            return
        script = self._write_script(sid, specs)
        state = _Session(index, sid, {
            "workspace": root, "sandbox": {"mode": "none"}, "tools": {"enabled": ["http"]},
            "model": {"kind": "scripted", "script": str(script)},
            "limits": {"tool_deadline_s": self.config.effect_timeout}})
        for k in range(len(specs)):
            if not (yield from self._reach(state, k + 1, lease, holder)):
                for rest in range(k, len(specs)):
                    record = self.record.effects[runtime_effect_id(sid, rest)]
                    if record.outcome == "pending":
                        record.outcome = "abandoned: the session could not reach this turn"
                break
        for k in range(len(specs)):
            record = self.record.effects[runtime_effect_id(sid, k)]
            if record.outcome == "pending":  # a runtime settled its turn (journaled) and died before we drained it
                record.outcome = "unseen: its turn was settled by a runtime that died (continued from the journal)"
        yield from self._close(state)
        if holder:
            yield from self._release(lease, index, holder)

    def _write_script(self, sid: str, specs: list[EffectSpec]) -> Path:
        turns: list[dict[str, Any]] = []
        for k, spec in enumerate(specs):
            base = f"http://{DENIED_HOST}" if spec.forbidden else self.world_url
            payload = spec.payload(self.config.effect_timeout * 2)
            turns.append({"events": [{"kind": "tool_call", "id": f"e{k}", "name": "http", "arguments": {
                "method": "POST", "url": f"{base}/items", "json_body": {"payload": payload}}}]})
            done: dict[str, Any] = {"events": [{"kind": "text", "text": f"effect {k} done"}]}
            if any(kill.moment == "result" and kill.turn == k + 1 and runtime_session_id(self.record.run_id,
                                                                                          kill.session) == sid
                   for kill in self.kills):
                done["pace_ms"] = RESULT_PACE_MS  # the turn stays open after the call's result: the kill lands there
            turns.append(done)
        path = self.script_dir / f"{sid.replace('/', '_')}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"name": sid, "turns": turns}))
        return path

    def _reach(self, state: _Session, turn: int, lease: LeaseRecord, holder: dict[str, Any]
               ) -> Generator[str, None, bool]:
        """Bring the session through ``turn``: on a replaced runtime, every turn from the first again."""
        deadline = clock.monotonic() + self.config.op_deadline
        while True:
            if state.path is None and not (yield from self._open(state, lease, holder)):
                return False
            while state.path is not None and state.turns < turn:
                if not (yield from self._turn(state, state.turns + 1, replay=state.turns + 1 < turn)):
                    state.path = None  # the runtime is gone or not open: replace it
            if state.path is not None:
                return True
            if clock.monotonic() > deadline:
                self.record.errors.append(f"{state.sid}: turn {turn} not reached within {self.config.op_deadline}s")
                return False
            yield _WAIT

    def _open(self, state: _Session, lease: LeaseRecord, holder: dict[str, Any]) -> Generator[str, None, bool]:
        if not (yield from self._fence(lease, state.index, holder)):
            return False
        try:
            with isolated(self.system) as system:
                child = system.start_child(self.execution, ())
                path = f"{self.execution}/{child.id}"
                system.ask(path, OpenSession(state.sid, state.config, holder["lease_id"]),
                           timeout=max(self.config.ask_timeout, 10.0))
                # A new runtime continues the session from its journal: the turns it verified are done.
                answer = system.ask(path, RuntimeStatusRequest(), timeout=self.config.ask_timeout)
                status = expect_answer(answer, RuntimeStatus, path)
                if status.session_id != state.sid:
                    raise WrongAnswer(f"{path} answered as the runtime of {status.session_id!r}, not {state.sid!r}")
        except ASK_FAILURES as exc:
            self.record.errors.append(f"{state.sid}: open: {type(exc).__name__}: {exc}"[:300])
            yield _WAIT
            return True  # asked again by _reach until its deadline
        state.path, state.turns, state.cursor = path, int(status.turn), 0
        state.opened += 1
        yield "step"
        return True

    def _turn(self, state: _Session, turn: int, *, replay: bool) -> Generator[str, None, bool]:
        """Send turn ``turn`` and drain its output until it settles; False: the runtime is gone."""
        assert state.path is not None
        path = state.path
        try:
            with isolated(self.system) as system:
                system.ask(path, SendText(f"do effect {turn - 1}"), timeout=self.config.ask_timeout)
        except Busy:
            pass  # an earlier send was taken, its answer lost: the turn runs
        except ASK_FAILURES:
            return False
        self._maybe_kill(state, turn, "sent", replay)
        deadline = clock.monotonic() + self.config.op_deadline
        drained = observed = asked = False
        while True:
            try:
                with isolated(self.system) as system:
                    answer = system.ask(path, DrainOutput(after=state.cursor), timeout=self.config.ask_timeout)
                    batch = expect_answer(answer, Batch, path)
                    if batch.events:
                        state.cursor = batch.events[-1].cursor
                        system.ask(path, AckOutput(state.cursor), timeout=self.config.ask_timeout)
            except ASK_FAILURES:
                return False
            settled = result = False
            for event in batch.events:
                if event.kind == "tool_result":
                    observed = result = True
                    if not replay:
                        self._observe(state, turn, event.data)
                elif event.kind == "approval_needed" and not asked:
                    # Nobody answers approvals in this workload: the call cannot run. Interrupt the parked turn
                    # (nothing was started) and go on; a replay of this turn asks, and is interrupted, again.
                    asked = True
                    self._note(state, turn, replay, "abandoned: asked for approval (nobody answers here)")
                    try:
                        with isolated(self.system) as system:
                            system.ask(path, InterruptTurn(), timeout=self.config.ask_timeout)
                    except ASK_FAILURES:
                        return False
                settled = settled or event.kind == "turn_settled"
            if batch.events and not drained:
                drained = True
                self._maybe_kill(state, turn, "drained", replay)
            if result:
                self._maybe_kill(state, turn, "result", replay)
            if settled:
                if not (observed or asked or replay):
                    # The turn settled without running its call (its runtime is failing: a stale stamp crashes
                    # it right after): the session goes on on a fresh runtime, as recovery would go on.
                    return False
                state.turns = turn
                return True
            if clock.monotonic() > deadline:
                return False
            yield _WAIT if not batch.events else "step"

    def _observe(self, state: _Session, turn: int, data: dict[str, Any]) -> None:
        record = self.record.effects.get(runtime_effect_id(state.sid, turn - 1))
        if record is None:
            return
        status, kind = data.get("status"), data.get("error_kind")
        record.start_answers.append(f"tool:{status}:{kind}" if kind else f"tool:{status}")
        record.outcome = {"ok": "settled-ok", "denied": "denied"}.get(str(status), f"tool-{status}:{kind}")

    def _note(self, state: _Session, turn: int, replay: bool, outcome: str) -> None:
        record = self.record.effects.get(runtime_effect_id(state.sid, turn - 1))
        if record is not None and not replay:
            record.outcome = outcome

    def _maybe_kill(self, state: _Session, turn: int, moment: str, replay: bool) -> None:
        if replay:
            return
        for kill in self.kills:
            if (kill.session, kill.turn, kill.moment) != (state.index, turn, moment) or kill in state.fired:
                continue
            state.fired.add(kill)
            path = state.path if kill.target == "runtime" else self.targets.ledger
            try:
                with isolated(self.system) as system:
                    pid = system.pid_of(path) if path else None
            except ASK_FAILURES:
                pid = None
            if pid and pid != os.getpid() and pid_alive(pid):
                os.kill(pid, signal.SIGKILL)  # a process of the system under test, by its pid
                self.record.kills.append(f"{kill.target}:{path}:pid{pid}:s{state.index}t{turn}:{moment}")

    def _close(self, state: _Session) -> Generator[str, None, None]:
        if state.path is None:
            return
        try:
            with isolated(self.system) as system:
                system.ask(state.path, CloseSession(), timeout=self.config.ask_timeout)
        except ASK_FAILURES:  # NotOpen included: gone already
            pass  # gone already: nothing to close
        yield "step"


def is_runtime(spec: Any) -> bool:
    """Is ``spec`` a worker whose actor is the session runtime (or a subclass: a planted bug, a variant)?"""
    if spec.is_supervisor or spec.actor is None:
        return False
    if spec.actor == RUNTIME_ACTOR:
        return True
    from ..runtime.execution.runtime import Runtime
    from ..supervision.specs import resolve_actor

    try:
        return issubclass(resolve_actor(spec.actor), Runtime)
    except ValueError:
        return False


def execution_path(tree: Any) -> str | None:
    """The path of the supervisor whose child template is a ``Runtime`` (the execution supervisor)."""

    def visit(node: Any, path: str) -> str | None:
        for child in node.children or ():
            here = f"{path}/{child.id}"
            if child.is_supervisor:
                if any(is_runtime(c) for c in child.children or ()):
                    return here
                found = visit(child, here)
                if found:
                    return found
        return None

    return visit(tree, tree.id)


__all__ = [
    "KILL_MOMENTS", "KILL_TARGETS", "RUNTIME_ACTOR", "Kill", "RuntimeDriver", "RuntimeObservation",
    "RuntimeWorkloadError", "call_delivered_once", "check_runtime_run", "execution_path", "is_runtime",
    "kills_for_seed", "run_prefix", "runtime_effect_id", "runtime_session_id", "stale_generation_direct",
]
