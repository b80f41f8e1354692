"""Publication latency: a runtime emits an event → a subscriber in another process receives it.

    python -m benchmarks.bench_publication [--quick] [--push | --poll] [--via-directory | --sse] [--json FILE]

A real multiproc system runs ``supervision_trees/agent.toml``'s tree (storage, ledger, grants, workspace,
execution, coordinator, sessions). Each round creates one session on the scripted model whose single turn
makes N model calls, each asking for one ``shell`` call of ``true`` (sandbox ``none``), then answers with text.
A subscriber process (``ActorSystem.connect`` + :meth:`ouroactors.sessions.Sessions.events` with
``follow=True``, exactly what ``ouroactors session events --follow`` does) follows the session from cursor 0.

**Where the clock starts and stops.** Start: the ``at`` (wall-clock ns) that the runtime's loop puts on the
journal record it writes immediately before it emits the output event into its batch — the ``tool_call``
record (matched to the event by call id) and the ``turn_started`` record (one per session). Between that
record and the emit there is no I/O (the journal is flushed later, inside the ledger's commits). Stop:
``time.time_ns()`` in the subscriber process when the iterator yields that event. Both clocks are the same
machine's wall clock. The time in between, for a tool call's event (carried: see
:mod:`ouroactors.runtime.execution.carried`): the runtime's ledger start, which commits the event, the session
record's cursor and the call's start in one synced LMDB transaction; a byte on the session's wake-up FIFO
(:mod:`ouroactors.runtime.coordinator.wake`); and the coordinator sending the events, read back from its store, to
the subscriber's stream (the follow request the directory lent it; the directory answers itself only as a safety
net). For an event the runtime does not carry, the runtime's push (``OutputReady`` carries it; with ``--poll`` the
coordinator drains every ``actor.POLL_S`` instead) and the coordinator's checkpoint commit replace the first two.
Acks to the runtime are lazy and off the path. The published event's ``committed_ns`` (taken inside the committing
transaction, before its sync) splits the total in two rows: emit → committed, committed → subscriber.

**Diagnosis.** ``OUROACTORS_PUBTRACE=FILE`` makes the runtime's buffer, the coordinator and this subscriber
append ``perf_counter_ns`` marks (emit, outbox_take, outbox_sent, ready_rx, commit_tx, committed, carried_commit,
wake_rx, carried, lent_rx, held_tx, acked, sub_rx; see :mod:`ouroactors.runtime.coordinator.trace`) to FILE; off by
default.

**Baseline**, same run, measured between the rounds in this process: one raw thespian ask to a raw echo actor
(``multiprocTCPBase``, its own system on a free loopback port) plus one synced LMDB put of 400 bytes in its
own transaction. Goal (issue 14): ≤ 1.3×.

**Polled or pushed.** By default the code runs as it stands (``runtimes.PUSH`` and ``actor.POLL_S`` as
committed; the row label says which). ``--push`` / ``--poll`` set ``runtimes.PUSH`` True / False in this
process before the system forks its actors (multiproc forks, so every coordinator inherits it); with
``--poll`` the coordinator drains only every ``POLL_S``. Each wait has a deadline; a failure is a FAILED row.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lmdb
from thespian.actors import ActorSystem as ThespianSystem

from ouroactors import ActorSystem
from ouroactors.system import _patches

from ._actors import RawEcho
from ._common import Row, Stat, free_port, percentile, print_table, progress

FOLLOW_DEADLINE_S = 120.0
VALUE = b"x" * 400


def agent_tree(workspace: Path) -> Any:
    """agent.toml's tree with ``workspace`` leasable and ``Bash(true)`` allowed to users."""
    from ouroactors.cli.demo_agent import AGENT_TOML
    from ouroactors.system.config import load_tree

    tree = load_tree(AGENT_TOML).tree
    children = []
    for child in tree.children or ():
        if child.id == "grants":
            node = dict(child.kwargs.get("rules", {})).get("node", [])
            child = child.model_copy(update={"kwargs": {**child.kwargs,
                                                        "rules": {"node": list(node), "user": ["allow:Bash(true)"]}}})
        elif child.id == "workspace":
            child = child.model_copy(update={"kwargs": {**child.kwargs, "allowed_roots": [str(workspace)]}})
        children.append(child)
    return tree.model_copy(update={"children": tuple(children)})


def script_for(path: Path, tag: str, steps: int) -> Path:
    """``steps`` model calls of one ``shell true`` each (call ids ``<tag>c<i>``), then a text answer."""
    turns: list[dict[str, Any]] = [{"events": [{"kind": "tool_call", "id": f"{tag}c{i}", "name": "shell",
                                                "arguments": {"command": "true"}}]} for i in range(steps)]
    turns.append({"events": [{"kind": "text", "text": "done"}]})
    path.write_text(json.dumps({"name": f"bench {tag}", "turns": turns}))
    return path


# -- the subscriber (its own process) -------------------------------------------------------------------------


PERIODIC_READ_S = 0.05  # a reader that refreshes now and then (a UI), as bench_runtime's


def follow_sse(data_dir: str) -> None:
    """:func:`follow_main` for an SSE client: this process serves the data dir (``session serve``'s server, in a
    thread) and follows each session over HTTP on loopback, parsing the frames as an ``EventSource`` does."""
    import secrets

    import httpx

    from ouroactors.runtime.coordinator.sse_server import SessionEventServer

    token = secrets.token_urlsafe(32)
    server = SessionEventServer(data_dir, "127.0.0.1", 0, token)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=FOLLOW_DEADLINE_S)
    base = f"http://127.0.0.1:{server.server_port}/sessions"
    try:
        for line in sys.stdin:
            sid = line.strip()
            if not sid:
                continue
            client.get(f"{base}/nobody/events")  # warm: a connection made, a request served (404)
            print("ready", flush=True)
            with client.stream("GET", f"{base}/{sid}/events?until=turn_settled") as response:
                for raw in response.iter_lines():
                    if not raw.startswith("data: "):
                        continue
                    got = time.time_ns()
                    event = json.loads(raw[len("data: "):])
                    if "cursor" not in event:
                        break  # the end frame
                    print(json.dumps({"t": got, "cursor": event["cursor"], "kind": event["kind"],
                                      "call_id": event["data"].get("call_id"),
                                      "committed_ns": event["committed_ns"]}), flush=True)
            print("end", flush=True)
    finally:
        client.close()
        server.close()


def follow_main(data_dir: str, direct: bool) -> None:
    """Read session ids on stdin; for each: one plain read (warm), ``ready``, then follow to ``turn_settled``,
    printing one JSON line per event with the time it was received, then ``end``. ``direct``: as the CLI follows
    (the log read in this process, :mod:`ouroactors.runtime.coordinator.direct_follow`); else through the
    directory and the coordinator's stream. A line ``periodic <id>`` reads that session every
    :data:`PERIODIC_READ_S` instead, printing only ``end`` once ``turn_settled`` is committed: no subscriber is woken
    by the session's commits (the peers of ``bench_peers`` have none)."""
    from ouroactors.runtime.coordinator.trace import mark
    from ouroactors.sessions import Sessions

    sessions = Sessions(ActorSystem.connect(data_dir), follow_direct=direct)
    for line in sys.stdin:
        sid = line.strip()
        if not sid:
            continue
        periodic = sid.startswith("periodic ")
        sid = sid.removeprefix("periodic ")
        sessions.read(sid, 0)
        print("ready", flush=True)
        if periodic:
            _read_periodically(sessions, sid)
            continue
        for event in sessions.events(sid, 0, follow=True, idle_timeout=FOLLOW_DEADLINE_S, until="turn_settled"):
            got = time.time_ns()
            mark("sub_rx", event.cursor)
            print(json.dumps({"t": got, "cursor": event.cursor, "kind": event.kind,
                              "call_id": event.data.get("call_id"), "committed_ns": event.committed_ns}), flush=True)
        print("end", flush=True)


def _read_periodically(sessions: Any, sid: str) -> None:
    cursor, deadline = 0, time.monotonic() + FOLLOW_DEADLINE_S
    while time.monotonic() < deadline:
        time.sleep(PERIODIC_READ_S)  # the reader's period, not a synchronisation
        batch = sessions.read(sid, cursor, limit=4096)
        if batch.events:
            cursor = batch.events[-1].cursor
        if any(event.kind == "turn_settled" for event in batch.events):
            break
    print("end", flush=True)


class Lines:
    """The subscriber's stdout, read by a thread (``select`` on a buffered text pipe misses buffered lines)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.queue: queue.Queue[str | None] = queue.Queue()
        self.proc = proc
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.queue.put(line.strip())
        self.queue.put(None)

    def next(self, deadline: float) -> str:
        try:
            line = self.queue.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise TimeoutError("the subscriber did not answer in time") from None
        if line is None:
            raise RuntimeError(f"the subscriber process ended (exit {self.proc.poll()})")
        return line


def journal_starts(data_dir: Path, sids: Sequence[str]) -> dict[str, dict[str, int]]:
    """Per session: call id → ``at`` of its journal ``tool_call`` record, and ``"<turn_started>"`` → its ``at``.
    Read in another process after shutdown (this one forked the system)."""
    code = ("import json, sys\n"
            "from ouroactors.authorities.storage.env import StorageConfig, open_env\n"
            "from ouroactors.runtime.execution.reading import records\n"
            f"env = open_env(StorageConfig.under({str(data_dir)!r}))\n"
            "out = {}\n"
            "for sid in sys.argv[1:]:\n"
            "    found = out[sid] = {}\n"
            "    for r in records(env, sid):\n"
            "        if r.kind == 'tool_call': found[r.fields['call_id']] = r.at\n"
            "        elif r.kind == 'turn_started': found.setdefault('<turn_started>', r.at)\n"
            "print(json.dumps(out))\n")
    done = subprocess.run([sys.executable, "-c", code, *sids], capture_output=True, text=True, timeout=120,
                          check=True)
    result: dict[str, dict[str, int]] = json.loads(done.stdout)
    return result


# -- the run --------------------------------------------------------------------------------------------------


def run(quick: bool, push: bool | None, direct: bool = True, sse: bool = False) -> list[Row]:
    from ouroactors.runtime.coordinator import actor, runtimes
    from ouroactors.sessions import Sessions

    rounds, steps, base_per_round = (3, 10, 20) if quick else (8, 20, 40)
    if push is not None:
        runtimes.PUSH = push  # before the system forks: every coordinator inherits it
    poll = f"{actor.POLL_S * 1000:.0f} ms"
    mode = f"pushed OutputReady, drain poll {poll} (PUSH=True)" if runtimes.PUSH else f"drain poll {poll} (PUSH=False)"
    mode += ", subscriber reads the log (as the CLI)" if direct else ", subscriber follows the directory's stream"
    if sse:
        mode = mode.split(", subscriber")[0] + ", subscriber over SSE (session serve's server, an HTTP client)"
    work = Path(tempfile.mkdtemp(prefix="bench-publication-"))
    ws = work / "ws"
    ws.mkdir()
    _patches.install()
    os.environ["OUROACTORS_BIND_HOST"] = os.environ["THESPIAN_BASE_IPADDR"] = "127.0.0.1"
    os.environ.setdefault("THESPLOG_FILE", str(work / "thespian.log"))
    raw = ThespianSystem("multiprocTCPBase", {"Admin Port": free_port()}, transientUnique=True)
    env = lmdb.open(str(work / "raw-lmdb"), map_size=1 << 26, sync=True, metasync=True)
    system = ActorSystem.start("multiproc", work / "data")
    follower: subprocess.Popen[str] | None = None
    received: dict[str, list[dict[str, Any]]] = {}
    base = Stat()
    error = ""
    try:
        echo = raw.createActor(RawEcho)
        raw.ask(echo, "warm", 10)
        system.start_tree(agent_tree(ws))
        sessions = Sessions(system)
        follower = subprocess.Popen([sys.executable, "-m", "benchmarks.bench_publication", "--follow",
                                     str(system.data_dir), *([] if direct else ["--via-directory"]),
                                     *(["--sse"] if sse else [])],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    text=True, cwd=Path(__file__).resolve().parents[1])
        assert follower.stdin is not None
        lines = Lines(follower)
        n = 0
        for r in range(rounds):
            sid = f"pub-{r}"
            progress(f"round {r + 1}/{rounds}: session {sid}, {steps} tool calls, {mode}")
            config = {"workspace": str(ws), "sandbox": {"mode": "none"},
                      "model": {"kind": "scripted", "script": str(script_for(work / f"{sid}.json", sid, steps))}}
            sessions.new(sid, config)
            follower.stdin.write(sid + "\n")
            follower.stdin.flush()
            deadline = time.monotonic() + FOLLOW_DEADLINE_S
            if lines.next(deadline) != "ready":
                raise RuntimeError("the subscriber did not get ready")
            sessions.send(sid, "go", last=True)
            got = received[sid] = []
            while (line := lines.next(deadline)) != "end":
                got.append(json.loads(line))
            for _ in range(base_per_round):  # the baseline, between the rounds: same load, same minutes
                start = time.perf_counter()
                raw.ask(echo, n, 10)
                with env.begin(write=True) as txn:
                    txn.put(b"raw-%d" % n, VALUE)
                base.samples.append((time.perf_counter() - start) * 1e3)
                n += 1
    except (RuntimeError, TimeoutError, OSError) as exc:
        error = f"{type(exc).__name__}: {exc}"
    finally:
        if follower is not None:
            if follower.stdin is not None:
                follower.stdin.close()
            try:
                follower.wait(10)
            except subprocess.TimeoutExpired:
                follower.kill()
                follower.wait(5)
        system.shutdown()
        raw.shutdown()
        env.close()
    try:
        starts = journal_starts(work / "data", list(received))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    total, to_commit, to_subscriber, first = Stat(), Stat(), Stat(), Stat()
    for sid, events in received.items():
        for event in events:
            key = event["call_id"] if event["kind"] == "tool_call" else (
                "<turn_started>" if event["kind"] == "turn_started" else None)
            at = starts.get(sid, {}).get(key) if key else None
            if at is None:
                continue
            total.samples.append((event["t"] - at) / 1e6)
            to_commit.samples.append((event["committed_ns"] - at) / 1e6)
            to_subscriber.samples.append((event["t"] - event["committed_ns"]) / 1e6)
            if event["kind"] == "turn_started":
                first.samples.append((event["t"] - at) / 1e6)
    note = "base: 1 raw thespian ask + 1 synced LMDB put (400 B), same run"
    rows = [
        Row("publication", f"emit → subscriber, {mode}", "ms", total, base, "≤ 1.3×", lambda _o, r: r <= 1.3,
            note + f"; {total.n} events (tool_call + turn_started) in {len(received)} sessions", error),
        Row("publication", "  of which emit → committed (drain + checkpoint)", "ms", to_commit, base, "report",
            None, "committed_ns of the published event"),
        Row("publication", "  of which committed → subscriber (stream)", "ms", to_subscriber, base, "report",
            None, "the coordinator reads the events back and sends them to the subscriber's stream"),
        Row("publication", "  turn_started events only", "ms", first, base, "report", None,
            "the first event of a turn"),
    ]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer rounds (about a minute)")
    parser.add_argument("--push", dest="push", action="store_const", const=True, default=None,
                        help="force runtimes.PUSH = True (the coordinator is the runtime's subscriber)")
    parser.add_argument("--poll", dest="push", action="store_const", const=False,
                        help="force runtimes.PUSH = False (drained every POLL_S only)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    parser.add_argument("--via-directory", action="store_true",
                        help="the subscriber follows through the directory and the coordinator's stream (the "
                             "default is as the CLI follows: the log read in the subscriber's process)")
    parser.add_argument("--sse", action="store_true",
                        help="the subscriber follows over HTTP as server-sent events (`session serve`'s server in "
                             "its process, an HTTP client reading the stream)")
    parser.add_argument("--follow", metavar="DATA_DIR", help=argparse.SUPPRESS)  # the subscriber process
    args = parser.parse_args()
    if args.follow:
        if args.sse:
            follow_sse(args.follow)
        else:
            follow_main(args.follow, not args.via_directory)
        return
    started = time.monotonic()
    rows = run(args.quick, args.push, not args.via_directory, args.sse)
    print_table(rows, "publication latency: runtime emit → subscriber vs a raw ask + a synced commit",
                footer=[f"run time {time.monotonic() - started:.0f} s; {os.cpu_count()} cores; the box is shared"]
                + [f"p90 {row.metric.strip()}: ours {percentile(row.ours.samples, 90):.2f} ms, base "
                   f"{percentile(row.base.samples, 90):.2f} ms" for row in rows[:1]
                   if isinstance(row.ours, Stat) and isinstance(row.base, Stat) and row.ours.samples])
    if args.json:
        args.json.write_text(json.dumps([row.to_json() for row in rows], indent=2))


if __name__ == "__main__":
    main()
