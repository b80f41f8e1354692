"""Model stream benchmark: from the server's last chunk to the ``openai`` provider yielding ``Finished``.

    python -m benchmarks.bench_model_stream [--quick] [--json FILE]

The issue's goal is "time from the server's last chunk to the turn's event in the output batch ≤ 2 ms"; the
output batch belongs to the runtime, so this measures the part the provider owns: last chunk → ``Finished``.

The server is a small stdlib HTTP/1.1 server in a **separate process** (so it does not share our GIL), written
here so it can timestamp the moment it writes the last chunk: it streams a Chat Completions answer as chunked
SSE (TCP_NODELAY), pauses 2 ms before the finish chunk and again before ``[DONE]`` (so the client is idle and
waiting, as it is between tokens of a real model), reads ``time.monotonic_ns()`` immediately before the last
write and prints it on its stdout. CLOCK_MONOTONIC is system-wide on Linux, so the client's reading when it
gets ``Finished`` is comparable. Rows, sampled interleaved so drift hits both sides alike:

* last chunk → ``Finished``, a text answer (40 deltas), vs the **baseline**: a raw ``httpx`` stream read under
  trio (a new client per call like the provider) noticing ``[DONE]`` in its bytes (goal ≤ 2 ms);
* the same with two parallel tool calls streamed as 12-character argument deltas (the calls are assembled and
  parsed at the end, so this is where the provider's end-of-stream work shows);
* a whole call of 400 deltas sent without pauses, request to ``Finished``, vs the raw read (reported: the
  per-chunk cost of SSE parsing and chunk validation);
* **last chunk → the turn's event in the output batch** (the issue's own measure): the runtime's turn loop
  (:class:`~ouroactors.runtime.execution.loop.SessionLoop`, with the runtime's flush settings) on this provider,
  its journal on real LMDB in a temp dir, its output an :class:`~ouroactors.runtime.execution.live.OutputChannel`
  over the runtime's bounded buffer; the clock stops when the buffer appends the event the model call led to —
  ``turn_settled`` after a text answer (its journal commit, synced, is on that path) and the first ``tool_call``
  after a tool-call answer (the model result recorded first). Tools answer at once (an in-process stub: the tools
  are not what is measured). Baseline: the raw read, as above; goal ≤ 2 ms.
* **a message through the agent tree** (reported, measured first): a multiproc system on ``agent.toml``'s tree
  (``bench_peers.Ours``), a new session per sample on this provider, ``send`` until a live follower in its own
  process has ``turn_settled`` — resume event, runtime (a new process per message), lease, open, the model call,
  the journal and publication — against the raw whole call (request → ``[DONE]``, a TLS context made once, as the
  provider's). It runs before anything in this process imports httpx or makes a TLS context, because thespian forks
  the system from here: its processes must inherit what they would from ``ouroactors run``. This row is what showed
  a runtime paying httpx's import and a CA bundle on every message (~150 ms, before ``tls.preload``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import aclosing
from typing import IO, Any

import trio

from ouroactors.runtime.execution.model import Finished, Message, ModelRequest
from ouroactors.runtime.execution.providers import OpenAIConfig, OpenAIProvider

from ._common import Row, Stat, bench_main, progress

_SERVER = r'''
import json, socket, sys, time
PAUSE = 0.002

def sse(obj):
    data = ("data: " + (obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"))) + "\n\n").encode()
    return b"%x\r\n%s\r\n" % (len(data), data)

def chunk(delta=None, finish=None, usage=None):
    out = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
           "choices": [] if delta is None and finish is None else
                      [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}
    if usage is not None:
        out["usage"] = usage
    return sse(out)

def answer(kind):
    body = [chunk({"role": "assistant", "content": ""})]
    if kind == "tools":
        for index, (name, args) in enumerate((("read", {"path": "docs/some/longer/path/notes.txt"}),
                                              ("shell", {"command": "grep -c 'x' notes.txt && echo done"}))):
            body.append(chunk({"tool_calls": [{"index": index, "id": "call_%d" % index, "type": "function",
                                               "function": {"name": name, "arguments": ""}}]}))
            text = json.dumps(args)
            body += [chunk({"tool_calls": [{"index": index, "function": {"arguments": text[i:i + 12]}}]})
                     for i in range(0, len(text), 12)]
        finish = "tool_calls"
    else:
        body += [chunk({"content": "word%d " % i}) for i in range(400 if kind == "burst" else 40)]
        finish = "stop"
    return body, chunk(finish=finish), chunk(usage={"prompt_tokens": 10, "completion_tokens": 40})

listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", 0))
listener.listen(16)
print(listener.getsockname()[1], flush=True)
while True:
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    raw = b""
    while b"\r\n\r\n" not in raw:
        raw += conn.recv(65536)
    head, _, rest = raw.partition(b"\r\n\r\n")
    length = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0])
    while len(rest) < length:
        rest += conn.recv(65536)
    request = json.loads(rest)
    kind = request["model"]
    if kind == "tools" and any(m.get("role") == "tool" for m in request["messages"]):
        kind = "text"  # the turn's second model call, after its tools ran: a text answer ends the turn
    body, finish, usage = answer(kind)
    conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
                 b"connection: close\r\n\r\n" + b"".join(body))
    if kind != "burst":
        time.sleep(PAUSE)
    conn.sendall(finish + usage)
    if kind != "burst":
        time.sleep(PAUSE)
    last = sse("[DONE]") + b"0\r\n\r\n"
    stamp = time.monotonic_ns()
    conn.sendall(last)
    print(stamp, flush=True)
    try:
        conn.shutdown(socket.SHUT_WR)
        conn.recv(1)
    except OSError:
        pass
    conn.close()
'''


def _request(kind: str) -> ModelRequest:
    return ModelRequest(model=kind, messages=(Message(role="user", content="hello"),))


async def _ours(provider: OpenAIProvider, kind: str) -> tuple[int, int]:
    started = time.monotonic_ns()
    async with aclosing(provider.stream(_request(kind))) as stream:  # type: ignore[type-var]
        async for event in stream:
            if isinstance(event, Finished):
                return started, time.monotonic_ns()
    raise RuntimeError("the stream ended without Finished")


async def _raw(url: str, kind: str, context: Any = True) -> tuple[int, int]:
    import httpx  # imported where used: see _measure_message

    started = time.monotonic_ns()
    body = {"model": kind, "messages": [{"role": "user", "content": "hello"}], "stream": True}
    async with httpx.AsyncClient(trust_env=False, verify=context) as client, \
            client.stream("POST", url, json=body) as response:
        tail = b""
        async for piece in response.aiter_bytes():
            tail = (tail + piece)[-64:]
            if b"[DONE]" in tail:
                return started, time.monotonic_ns()
    raise RuntimeError("the raw stream ended without [DONE]")


def _measure(url: str, stamps: IO[str], kind: str, samples: int) -> tuple[Stat, Stat, Stat, Stat]:
    """Interleaved samples: (ours last→Finished, raw last→[DONE], ours whole call, raw whole call), in ms."""
    config = OpenAIConfig(kind="openai", base_url=url.removesuffix("/chat/completions"), model=kind)
    provider = OpenAIProvider(config)
    tail_ours, tail_raw, whole_ours, whole_raw = Stat(), Stat(), Stat(), Stat()

    async def main() -> None:
        for index in range(samples + 3):
            for side in ((0, 1) if index % 2 else (1, 0)):
                started, done = await (_ours(provider, kind) if side == 0 else _raw(url, kind))
                last = int(stamps.readline())
                if index < 3:
                    continue  # warm-up
                tail, whole = (tail_ours, whole_ours) if side == 0 else (tail_raw, whole_raw)
                tail.samples.append((done - last) / 1e6)
                whole.samples.append((done - started) / 1e6)

    trio.run(main)
    return tail_ours, tail_raw, whole_ours, whole_raw


class _Stamped:
    """The output channel's notify: the monotonic time each event reached the batch, by kind (first only)."""

    def __init__(self) -> None:
        self.at: dict[str, int] = {}

    def __call__(self, event: Any, rides: bool = False) -> None:
        self.at.setdefault(event.kind, time.monotonic_ns())


class _InstantTools:
    """The loop's effect port answering every call ``ok`` at once (the tools are not what is measured)."""

    async def run(self, call: Any, ctx: Any) -> Any:
        from ouroactors.runtime.execution.loop import ToolResult

        return ToolResult(call.call.id, call.call.name, "ok", output="ok", evidence={})


def _measure_loop(url: str, stamps: IO[str], kind: str, samples: int, data_dir: str) -> tuple[Stat, Stat]:
    """Interleaved samples: (ours last chunk → event in the output batch, raw last → [DONE]), in ms."""
    from ouroactors.authorities.storage.env import StorageConfig, close_env, open_env
    from ouroactors.runtime.execution.config import parse_session_config
    from ouroactors.runtime.execution.journal import Journal
    from ouroactors.runtime.execution.live import OutputChannel
    from ouroactors.runtime.execution.loop import Ports, SessionLoop
    from ouroactors.runtime.execution.output import OutputBuffer
    from ouroactors.runtime.execution.ports import (
        JournalWriter,
        ProviderModel,
        SteeringQueue,
        SystemClock,
        ToolsCatalog,
    )

    base = url.removesuffix("/chat/completions")
    config = parse_session_config(f'[model]\nkind = "openai"\nbase_url = "{base}"\nmodel = "{kind}"\n'
                                  '[sandbox]\nmode = "none"\n[tools]\nenabled = ["read", "shell"]\n'
                                  f'[limits]\nmax_turns = {samples + 10}\n', "bench session")
    storage = StorageConfig.under(data_dir)
    env = open_env(storage)
    ours, raw = Stat(), Stat()
    event = "tool_call" if kind == "tools" else "turn_settled"
    try:
        provider = OpenAIProvider(OpenAIConfig(kind="openai", base_url=base, model=kind))

        async def main() -> None:
            for index in range(samples + 3):
                for side in ((0, 1) if index % 2 else (1, 0)):
                    if side == 1:
                        await _raw(url, kind)
                        last = int(stamps.readline())
                        if index >= 3:
                            raw.samples.append((time.monotonic_ns() - last) / 1e6)
                        continue
                    stamped = _Stamped()
                    ports = Ports(model=ProviderModel(provider), effects=_InstantTools(),
                                  journal=JournalWriter(Journal(env, f"s{index}")), clock=SystemClock(),
                                  control=SteeringQueue(), sink=OutputChannel(OutputBuffer(), stamped),
                                  catalog=ToolsCatalog(config.tools.enabled))
                    loop = SessionLoop(f"s{index}", config, ports, flush_before_tools=False, flush_before_model=False)
                    loop.open(runtime={})
                    await loop.run_turn("hello")
                    last = int(stamps.readline())
                    if kind == "tools":
                        stamps.readline()  # the turn's second call (text, after the tools): not this row's
                    if index >= 3:
                        ours.samples.append((stamped.at[event] - last) / 1e6)

        trio.run(main)
    finally:
        close_env(storage)
    return ours, raw


def _measure_message(url: str, stamps: IO[str], samples: int) -> tuple[Stat, Stat]:
    """A text message to a new session on this provider, through the agent tree (``bench_peers.Ours``: multiproc,
    the session directory, a live follower in its own process): ``send`` until the follower has ``turn_settled``,
    against the raw httpx whole call, interleaved. Each message runs in a runtime process of its own — what every
    message of a user's session pays, its first model call in that process included."""
    from pathlib import Path

    from .bench_peers import Ours

    base_url = url.removesuffix("/chat/completions")
    ours_stat, raw_stat = Stat(), Stat()
    with tempfile.TemporaryDirectory(prefix="bench-model-message-") as work:
        # Started before this process imports httpx or makes a TLS context (this row runs first, and the module
        # imports httpx where it uses it): thespian forks the system from here, and what the processes inherit from
        # this one must be what they would inherit from `ouroactors run`, nothing more.
        assert "httpx" not in sys.modules, "the message row must run before anything here imports httpx"
        ours = Ours(Path(work))
        import httpx

        context = httpx.create_ssl_context(trust_env=False)  # made once, as the provider's (not in the baseline's time)
        try:
            for index in range(samples + 1):
                took = ours.session(model={"kind": "openai", "base_url": base_url, "model": "text"})
                stamps.readline()  # the server's stamp of that model call
                raw_started, raw_done = trio.run(_raw, url, "text", context)
                stamps.readline()
                if index == 0:
                    continue  # warm-up: the system's first session
                ours_stat.samples.append(took)
                raw_stat.samples.append((raw_done - raw_started) / 1e6)
        finally:
            ours.close_follower()
            ours.system.shutdown()
    return ours_stat, raw_stat


def run(quick: bool) -> list[Row]:
    samples = 60 if quick else 300
    server = subprocess.Popen([sys.executable, "-c", _SERVER], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        url = f"http://127.0.0.1:{int(server.stdout.readline())}/v1/chat/completions"
        rows: list[Row] = []
        progress(f"message: {max(samples // 8, 6)} sessions, each a new runtime process")
        ours, raw = _measure_message(url, server.stdout, max(samples // 8, 6))
        rows.append(Row("model stream", "a message through the agent tree: send → subscriber has turn_settled, text "
                        "answer, vs the raw httpx whole call", "ms", ours, raw, "report", None,
                        note="multiproc agent tree, a new session (and runtime process) per message, live follower"))
        goal: Callable[[float, float], bool] = lambda ours, _ratio: ours <= 2.0  # noqa: E731
        for kind, label in (("text", "text answer, 40 deltas"), ("tools", "2 parallel tool calls, argument deltas")):
            progress(f"{kind}: {samples} samples per side")
            ours, raw, _, _ = _measure(url, server.stdout, kind, samples)
            rows.append(Row("model stream", f"last chunk → Finished, {label}, vs raw httpx read", "ms", ours, raw,
                            "≤ 2 ms", goal, note="server process stamps CLOCK_MONOTONIC just before its last write"))
        with tempfile.TemporaryDirectory(prefix="bench-model-stream-") as data_dir:
            for kind, label in (("text", "text answer → turn_settled (its journal commit included)"),
                                ("tools", "tool-call answer → first tool_call")):
                progress(f"loop, {kind}: {samples // 2} samples per side")
                ours, raw = _measure_loop(url, server.stdout, kind, samples // 2, data_dir)
                rows.append(Row("model stream", f"last chunk → output batch, {label}, vs raw httpx read", "ms",
                                ours, raw, "≤ 2 ms", goal,
                                note="the runtime's turn loop, journal on LMDB, its bounded output buffer"))
        progress(f"burst: {samples // 2} samples per side")
        _, _, whole_ours, whole_raw = _measure(url, server.stdout, "burst", samples // 2)
        rows.append(Row("model stream", "whole call, 400 deltas without pauses, vs raw httpx read", "ms",
                        whole_ours, whole_raw, "report", None,
                        note="request → Finished; includes connect (a new client per call on both sides)"))
        return rows
    finally:
        server.kill()  # ours, by its Popen handle
        server.wait(timeout=5)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    bench_main(run, "model stream: openai provider vs raw httpx stream read (one run)", __doc__)
