"""A whole turn, run once in a runtime nobody has opened yet, on a scratch data dir of its own (then removed).

**Why.** Every message of a session runs on a fresh runtime process (a suspended session holds none), so every turn
is the first turn of its process — and a process's first turn is slower than its later ones: measured ~5.6 ms more
per 3-step turn (6.5 vs 4.6 ms a step, p50 of 4 sessions of 6 turns) on a runtime that had rehearsed its open
(:mod:`.warming`); with this rehearsal, 4.9 vs 4.8 ms. That first run is Python's, not the disk's: code the
interpreter has not specialised yet (3.11 quickens a function after its first calls), imports and caches made on
first use, the heap grown page by page. None of it depends on which session runs, so a spare pays it while idle.

**When.** :data:`REHEARSE_TURN_AFTER_S` after the runtime started, if nobody has opened it by then: 40-80 ms of CPU
that must not compete with the turns of a burst of messages (on two cores it did: a spare forked for the next
message rehearsed beside the current turn and slowed it as much as it saved), and an open that arrives meanwhile
waits for it. And once before that, in the **execution supervisor** (:func:`.warming.preload`, before it forks any
runtime): every runtime then starts from a process that has run a turn's code, which is what a runtime forked in a
burst — never idle long enough to rehearse on its own — keeps; its scratch environment is closed before the
supervisor forks (an LMDB handle must not cross a fork). Fault points are quiet and timing marks suspended while it
runs (:func:`ouroactors.core.faults.quiet`, :func:`.timing.suspended`): a fault plan armed in the runtime or its
supervisor aims at the session's work, not this.

**What it runs.** The real loop (:class:`~.loop.SessionLoop`) with the runtime's live ports — the scripted model,
the effect path (:class:`~.effects.LiveEffects`: the inline grants decision, the direct ledger writer's start and
settlement commits with the journal riding in them, the shell tool in the sandbox's ``none`` mode running ``true``),
the journal, the output channel — for one turn of :data:`STEPS` tool calls and a final answer. Everything it writes
goes to an LMDB environment in a temporary directory, opened and closed here (a second environment, never the
node's: nothing of the node's durable state is read or written), with the authorities' keys a tree would publish
written first. Nothing it computes is kept.

A failure here is nobody's: the rehearsal swallows it (the open that meets the same problem reports it).
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import trio

STEPS = 3
SESSION = "rehearsal"
REHEARSE_TURN_AFTER_S = 0.25  # a spare still unopened this long after its start is idle: it rehearses a turn
_AUTHORITY = {"storage": 1, "ledger": 1, "grants": 1}


class _NoRemoteGrants:
    """The rehearsal's calls are decided inline (the scratch policy allows ``true``): nothing asks the authority."""

    async def decide(self, request: Any, root: str | None) -> Any:
        raise RuntimeError("a rehearsal turn asked the grants authority")

    async def approve(self, session: str, tool: str, arguments: dict[str, Any], call_id: str) -> tuple[bool, str]:
        raise RuntimeError("a rehearsal turn asked for an approval")


def _script(steps: int) -> dict[str, Any]:
    calls = [{"events": [{"kind": "tool_call", "id": f"r{i}", "name": "shell", "arguments": {"command": "true"}}]}
             for i in range(steps)]
    return {"turns": [*calls, {"events": [{"kind": "text", "text": "rehearsed"}]}]}


def publish_authorities(env: Any, authority: dict[str, int], rules: tuple[str, ...], node: str = "rehearsal") -> Any:
    """Write into ``env`` what the agent tree's authorities would publish for a runtime to run on it: the storage
    generation, grants' policy with ``rules`` for ``user``, a recovered ledger and grants' generation. The ledger's
    :class:`~ouroactors.authorities.ledger.store.LedgerStore` is returned. For an environment no tree serves: a
    rehearsal's scratch, a benchmark's or a test's in-process effect path."""
    from ...authorities.grants.inline import POLICY_KEY, Policy, policy_record
    from ...authorities.ledger.domain import DEFAULT_KINDS
    from ...authorities.ledger.store import LedgerStore
    from ...authorities.storage.env import GENERATION_KEY, db, encode_u64, meta_db

    with env.begin(write=True) as txn:
        txn.put(GENERATION_KEY, encode_u64(authority["storage"]), db=meta_db(env))
        txn.put(POLICY_KEY, policy_record(Policy((), {"user": rules}, ())), db=db(env, b"grants"))
    store = LedgerStore(env, node=node, kinds=DEFAULT_KINDS, fence=authority["storage"])
    store.recover(authority["ledger"])
    store.publish_generation("grants", authority["grants"])
    return store


def rehearse_turn(steps: int = STEPS) -> str:
    """Run the turn on a scratch data dir; its status (``completed`` when every part ran), or why it did not run.
    Never raises: a failure here is nobody's."""
    from ...core import faults
    from . import timing

    try:
        with faults.quiet(), timing.suspended(), tempfile.TemporaryDirectory(prefix="ouroactors-rehearsal-") as scratch:
            return _run(scratch, steps)
    except Exception as exc:
        return f"not rehearsed: {type(exc).__name__}: {exc}"[:300]


def _run(scratch: str, steps: int) -> str:
    from ...authorities.grants.inline import InlineGrants
    from ...authorities.ledger.direct import LedgerWriter
    from ...authorities.storage.env import StorageConfig, close_env, open_env
    from ..sandbox import SandboxMode
    from .config import parse_session_config
    from .effects import EffectSettings, LiveEffects
    from .journal import Journal
    from .live import OutputChannel
    from .loop import Ports, SessionLoop
    from .output import OutputBuffer
    from .ports import JournalWriter, ProviderModel, SteeringQueue, SystemClock, ToolsCatalog
    from .providers.scripted import ScriptedProvider, parse_script

    data, root = os.path.join(scratch, "data"), os.path.join(scratch, "ws")
    os.mkdir(root)
    config = StorageConfig.under(data, map_size=64 << 20)
    env = open_env(config)
    try:
        publish_authorities(env, _AUTHORITY, ("allow:Bash(true)",))
        session = parse_session_config({"workspace": root, "sandbox": {"mode": "none"},
                                        "tools": {"enabled": ["shell"]}}, "rehearsal")
        journal = Journal(env, SESSION)
        settings = EffectSettings(session=SESSION, root=os.path.realpath(root), sandbox_mode=SandboxMode.NONE,
                                  data_dir=data, authority=dict(_AUTHORITY))
        writer = LedgerWriter(data, node="rehearsal", watch=False, map_size=config.map_size)
        effects = LiveEffects(settings, grants=_NoRemoteGrants(), ledger=writer,
                              journal=journal, inline=InlineGrants(env))
        ports = Ports(model=ProviderModel(ScriptedProvider(parse_script(_script(steps)))), effects=effects,
                      journal=JournalWriter(journal), clock=SystemClock(), control=SteeringQueue(),
                      sink=OutputChannel(OutputBuffer(), lambda event, rides: None),
                      catalog=ToolsCatalog(tuple(session.tools.enabled)))
        loop = SessionLoop(SESSION, session, ports, flush_before_tools=False, flush_before_model=False)
        loop.open(runtime={"runtime_id": "rehearsal", "generation": 0, "pid": os.getpid()}, flush=False)
        outcome = trio.run(loop.run_turn, "rehearse")
        return str(outcome.status)
    finally:
        close_env(config)


__all__ = ["REHEARSE_TURN_AFTER_S", "STEPS", "publish_authorities", "rehearse_turn"]
