"""A message's cost as its session grows: the first messages of one session vs its latest, through the agent tree.

    python -m benchmarks.bench_long_session [--quick] [--json FILE]

One session on a real multiproc system with ``supervision_trees/agent.toml``'s tree (as :mod:`.bench_peers`),
sent N messages one after another; each message's turn is one ``shell true`` (sandbox ``none``) and an answer on the
scripted model. Between messages the session is suspended and holds no runtime, so **every message starts a new
runtime process, whose open rebuilds the conversation from the journal** (``Runtime._restore``): replayed from the
first turn, that grew with the session (~0.6 ms a turn); from a conversation snapshot the journal attests
(:mod:`ouroactors.runtime.execution.snapshots`), it replays at most ~8 turns. Measured per message: ``send`` until the
subscriber (this process, following the committed log) has the turn's ``turn_settled``.

Rows: the median of the last 10 messages vs the median of the first 10 (ratio ~1: a message costs the same at
message N as at message 1), once with the subscriber reading the committed log itself (``Sessions`` on the data
dir's owner, the default) and once through the session directory's stream (``follow_direct=False``: a client that
may not open the data dir), where each message's follow is a stream that the client abandons at ``turn_settled``
(:class:`~ouroactors.runtime.coordinator.messages.StopReading` ends it; without it, each abandoned stream was
served at every commit for its ``wait_s`` and messages grew ~2× slower within 40). Also: how many turns the last
open took from a snapshot and how many it replayed (the event log's ``runtime_restored``).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from ._common import Row, Stat, bench_main, progress


def script(path: Path, messages: int) -> Path:
    """Per message, a model call asking for one ``shell true`` and one answering with text."""
    turns: list[dict[str, Any]] = []
    for i in range(messages):
        turns.append({"events": [{"kind": "tool_call", "id": f"m{i}", "name": "shell",
                                  "arguments": {"command": "true"}}]})
        turns.append({"events": [{"kind": "text", "text": f"answer {i}"}]})
    path.write_text(json.dumps({"name": "long session", "turns": turns}))
    return path


def run(quick: bool) -> list[Row]:
    import os

    from ouroactors import ActorSystem
    from ouroactors.sessions import Sessions
    from ouroactors.system import _patches

    from .bench_publication import agent_tree

    messages = 40 if quick else 120
    work = Path(tempfile.mkdtemp(prefix=".bench-long-", dir="."))
    rows: list[Row] = []
    try:
        ws = work / "ws"
        ws.mkdir()
        _patches.install()
        os.environ["OUROACTORS_BIND_HOST"] = os.environ["THESPIAN_BASE_IPADDR"] = "127.0.0.1"
        os.environ.setdefault("THESPLOG_FILE", str(work / "thespian.log"))
        system = ActorSystem.start("multiproc", work / "data")
        try:
            system.start_tree(agent_tree(ws))
            config = {"workspace": str(ws), "sandbox": {"mode": "none"},
                      "model": {"kind": "scripted", "script": str(script(work / "long.json", messages))}}
            for label, direct in (("reading the log itself", None), ("through the directory's stream", False)):
                sid = f"long-{len(rows)}"
                progress(f"{messages} messages on one session, the subscriber {label}")
                took = messages_of(Sessions(system, follow_direct=direct), sid, config, messages)
                rows.append(Row("message", f"send → turn_settled, messages {messages - 9}–{messages} vs 1–10; the "
                                f"subscriber {label}", "ms", Stat(took[-10:]), Stat(took[:10]), goal="report",
                                note="a new runtime per message; each message's follow ends at its turn_settled"))
        finally:
            system.shutdown()
        restored = [json.loads(line) for line in (work / "data" / "events.jsonl").read_text().splitlines()
                    if '"runtime_restored"' in line]
        last = restored[-1].get("fields", restored[-1]) if restored else {}
        rows[-1].note += f"; the last open: {last.get('from_snapshot')} turns from a snapshot, " \
                         f"{last.get('replayed')} replayed"
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return rows


def messages_of(sessions: Any, sid: str, config: dict[str, Any], messages: int) -> list[float]:
    """Send ``messages`` messages to a new session ``sid``, each once the last one's turn settled; ms each."""
    sessions.new(sid, config)
    took: list[float] = []
    after = 0
    for i in range(messages):
        started = time.perf_counter()
        sessions.send(sid, f"question {i}")
        for event in sessions.events(sid, after, follow=True, idle_timeout=60):
            after = event.cursor
            if event.kind == "turn_settled":
                break  # a subscriber done with this turn (it stops its stream: see StopReading)
        took.append((time.perf_counter() - started) * 1e3)
    return took


if __name__ == "__main__":
    bench_main(run, "a message's cost as its session grows", __doc__)
