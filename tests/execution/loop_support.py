"""What the loop, replay and journal-corpus tests share: a session on real LMDB with the real scripted provider,
the real tool catalog, the real journal — and a fake effect port (the runtime's real one is not the loop's)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import lmdb
import trio

from ouroactors.authorities.storage.env import db
from ouroactors.runtime.execution.config import SessionConfig, parse_session_config
from ouroactors.runtime.execution.journal import JOURNAL_DB, Journal, record_key
from ouroactors.runtime.execution.loop import CallContext, ParsedCall, Ports, SessionLoop, ToolResult
from ouroactors.runtime.execution.ports import JournalWriter, ProviderModel, SteeringQueue, ToolsCatalog
from ouroactors.runtime.execution.providers import ScriptedProvider, parse_script
from ouroactors.runtime.execution.replay import ReplayReport, replay_session


class StepClock:
    """Deterministic time: every reading advances by ``step`` ns (``jump`` moves it by hand)."""

    def __init__(self, start: int = 1_700_000_000_000_000_000, step: int = 1_000_000) -> None:
        self.now = start
        self.step = step

    def now_ns(self) -> int:
        self.now += self.step
        return self.now

    def jump(self, seconds: float) -> None:
        self.now += int(seconds * 1e9)


@dataclass
class FakeEffects:
    """Answers each tool call from ``answers`` (by tool name) without running anything.

    ``barrier``: each call waits until that many calls have started (proves they run concurrently); ``block``:
    calls of these tools wait forever (until cancelled); ``in_port_record``: record the result from inside the
    port, as the runtime does before its settling commit.
    """

    answers: dict[str, str] = field(default_factory=dict)
    barrier: int = 0
    block: frozenset[str] = frozenset()
    in_port_record: bool = False
    calls: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    alone: list[bool] = field(default_factory=list)  # what each call's context said (its turn's only call?)
    started: int = 0
    causes: list[str] = field(default_factory=list)  # ctx.cancel_cause() of each blocked call when cancelled
    _all_started: trio.Event | None = None

    async def run(self, call: ParsedCall, ctx: CallContext) -> ToolResult:
        self.calls.append(call.call.id)
        self.alone.append(getattr(ctx, "alone", None))
        self.started += 1
        if self.barrier:
            if self._all_started is None:
                self._all_started = trio.Event()
            if self.started >= self.barrier:
                self._all_started.set()
            with trio.fail_after(5):
                await self._all_started.wait()
        if call.call.name in self.block:
            try:
                await trio.sleep_forever()
            except trio.Cancelled:
                self.causes.append(ctx.cancel_cause())  # what the runtime's port writes in the ledger's reason
                raise
        await trio.lowlevel.checkpoint()
        result = ToolResult(call.call.id, call.call.name, "ok",
                            output=self.answers.get(call.call.name, f"{call.call.name} done"),
                            evidence={"fake": True})
        if self.in_port_record:
            ctx.record_result(result)
        self.finished.append(call.call.id)
        return result


class ListSink:
    def __init__(self) -> None:
        self.events: list[tuple[str, int, dict[str, Any]]] = []

    async def emit(self, kind: str, turn: int, data: dict[str, Any], *, rides: bool = False) -> None:
        self.events.append((kind, turn, data))

    def kinds(self) -> list[str]:
        return [k for k, _, _ in self.events]


def flip_last_byte(env: lmdb.Environment, session: str, seq: int) -> None:
    """Tamper with the journal record at ``seq`` of ``session``: its last byte flipped (its hash no longer matches)."""
    with env.begin(write=True, db=db(env, JOURNAL_DB)) as txn:
        key = record_key(session.encode(), seq)
        value = bytes(txn.get(key))
        txn.put(key, value[:-1] + bytes([value[-1] ^ 1]))


def text(t: str) -> dict[str, Any]:
    return {"kind": "text", "text": t}


def call(cid: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"kind": "tool_call", "id": cid, "name": name, "arguments": arguments}


def usage(i: int, o: int) -> dict[str, Any]:
    return {"kind": "usage", "input_tokens": i, "output_tokens": o}


@dataclass
class Harness:
    loop: SessionLoop
    journal: Journal
    effects: FakeEffects
    sink: ListSink
    clock: StepClock
    steering: SteeringQueue
    restored: ReplayReport | None = None  # with restore: the replay the loop continued from


def make_session(env: lmdb.Environment, session: str, turns: list[list[dict[str, Any]]], *,
                 config: SessionConfig | str = "", effects: FakeEffects | None = None,
                 pace_ms: int = 0, hook: Callable[[Ports], None] | None = None, restore: bool = False) -> Harness:
    """A session's loop on ``env``; with ``restore``, as a later runtime opens it: continued from the journal's
    replay (its last verified turn), then opened (a second session_opened)."""
    if isinstance(config, str):
        config = parse_session_config(config or '[sandbox]\nmode = "none"\n[tools]\nenabled = ["read", "list", '
                                                '"write"]')
    script = parse_script({"turns": [{"events": events, "pace_ms": pace_ms} for events in turns]})
    journal = Journal(env, session)
    effects = effects or FakeEffects()
    sink, clock, steering = ListSink(), StepClock(), SteeringQueue()
    ports = Ports(model=ProviderModel(ScriptedProvider(script)), effects=effects, journal=JournalWriter(journal),
                  clock=clock, control=steering, sink=sink, catalog=ToolsCatalog(config.tools.enabled))
    if hook is not None:
        hook(ports)
    loop = SessionLoop(session, config, ports)
    restored = trio.run(replay_session, env, session) if restore else None
    if restored is not None and restored.state is not None:
        loop.restore(restored.state)
    loop.open(runtime={"runtime_id": "test", "generation": 2 if restore else 1})
    return Harness(loop, journal, effects, sink, clock, steering, restored)
