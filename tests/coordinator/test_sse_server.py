"""Sessions followed over HTTP as server-sent events: a real agent tree, a real server on 127.0.0.1, httpx.

The server reads the committed log, so what a client receives is what ``session events`` prints: every event once,
resumed after ``Last-Event-ID`` with no gap and no duplicate, live events as they commit; and ``session serve`` is
a command a user runs (its token file, its exit)."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from ouroactors.runtime.coordinator.sse_server import SessionEventServer

from ..e2e.cli_helpers import CLI, ENV
from .actor_support import suspended_after_a_turn, wait_for

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]
TOKEN = "test-token-" + "x" * 32


def frames(response: httpx.Response, stop: str | None = None) -> list[dict[str, Any]]:
    """The frames of a streamed response as an SSE client parses them (until one whose event is ``stop``)."""
    out: list[dict[str, Any]] = []
    fields: dict[str, str] = {}
    for line in response.iter_lines():
        if line == "":
            if fields:
                out.append(fields)
                if fields.get("event") == stop:
                    break
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(": ")
            fields[name] = value
    return out


@pytest.fixture
def served(actor_system, tmp_path):
    sessions = suspended_after_a_turn(actor_system, tmp_path)
    server = SessionEventServer(actor_system.data_dir, "127.0.0.1", 0, TOKEN)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield sessions, f"http://127.0.0.1:{server.server_port}"
    finally:
        server.close()
        thread.join(10)


def test_a_client_gets_every_committed_event_once_and_resumes_after_the_last_id_it_saw(served):
    sessions, base = served
    logged = [(e.cursor, e.kind) for e in sessions.events("s1")]
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.stream("GET", f"{base}/sessions/s1/events?until=turn_settled", headers=auth, timeout=30) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        got = frames(r, stop="end")
    assert [(int(f["id"]), f["event"]) for f in got[:-1]] == logged and got[-1]["event"] == "end"
    assert json.loads(got[-1]["data"]) == {"reason": "an event of kind turn_settled"}
    first = json.loads(got[0]["data"])
    assert (first["cursor"], first["kind"], first["data"]) == (1, "turn_started", {"prompt": "hello"})

    # the live part: a stream opened now gets the next turn's events as they commit, after the id it resumes from
    seen: list[dict[str, Any]] = []

    def follow() -> None:
        headers = {**auth, "Last-Event-ID": str(logged[-1][0])}
        with httpx.stream("GET", f"{base}/sessions/s1/events?until=turn_settled", headers=headers, timeout=60) as r:
            seen.extend(frames(r, stop="end"))

    reader = threading.Thread(target=follow)
    reader.start()
    sessions.send("s1", "again")
    reader.join(60)
    cursors = [int(f["id"]) for f in seen[:-1]]
    assert cursors == list(range(logged[-1][0] + 1, cursors[-1] + 1))  # no gap, no duplicate, nothing before
    assert [f["event"] for f in seen][-2:] == ["turn_settled", "end"]
    assert json.loads(seen[0]["data"])["data"] == {"prompt": "again"}


def test_the_server_refuses_what_it_must_and_ends_a_finished_stream(served, actor_system):
    sessions, base = served
    assert httpx.get(f"{base}/sessions/s1/events", timeout=10).status_code == 401
    assert httpx.get(f"{base}/sessions/s1/events", headers={"Authorization": "Bearer nope"},
                     timeout=10).status_code == 401
    missing = httpx.get(f"{base}/sessions/nobody/events?access_token={TOKEN}", timeout=10)
    assert missing.status_code == 404 and "no session 'nobody'" in missing.text
    bad = httpx.get(f"{base}/sessions/s1/events?after=x&access_token={TOKEN}", timeout=10)
    assert bad.status_code == 400 and "after must be a cursor" in bad.text
    sessions.cancel("s1")
    last = max(e.cursor for e in sessions.events("s1"))
    # over: a stream from the start sends everything and ends; a reconnection after the end is told 204 (no retry)
    with httpx.stream("GET", f"{base}/sessions/s1/events?access_token={TOKEN}", timeout=30) as r:
        got = frames(r, stop="end")
    assert int(got[-2]["id"]) == last and json.loads(got[-1]["data"]) == {"reason": "the session is cancelled"}
    again = httpx.get(f"{base}/sessions/s1/events?access_token={TOKEN}", headers={"Last-Event-ID": str(last)},
                      timeout=10)
    assert again.status_code == 204


def test_streams_beyond_the_limit_are_refused_and_a_closing_server_ends_the_open_ones(actor_system, tmp_path):
    suspended_after_a_turn(actor_system, tmp_path)
    server = SessionEventServer(actor_system.data_dir, "127.0.0.1", 0, TOKEN, max_streams=1)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_port}/sessions/s1/events?access_token={TOKEN}"
    got: list[dict[str, Any]] = []
    opened = threading.Event()

    def hold() -> None:  # a suspended session's stream waits for the next turn: it stays open
        with httpx.stream("GET", url, timeout=30) as r:
            opened.set()
            got.extend(frames(r))

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert opened.wait(30)
        busy = httpx.get(url, timeout=10)
        assert busy.status_code == 503 and "1 streams are open already" in busy.text
    finally:
        server.close()  # ends the open stream (within the follow's poll) and waits for it
        thread.join(10)
        holder.join(30)
    assert not holder.is_alive() and got and got[-1]["event"] == "turn_settled"


def test_session_serve_is_a_command_with_a_private_token_and_a_clean_exit(actor_system, tmp_path):
    suspended_after_a_turn(actor_system, tmp_path)
    data = Path(actor_system.data_dir)
    actor_system.shutdown()  # the history streams with the node down too
    proc = subprocess.Popen([*CLI, "session", "serve", "--data-dir", str(data), "--port", "0"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+)/sessions/ID/events \(token in (.+)\)", line)
        assert found, line
        token_file = Path(found.group(2))
        assert token_file == data / "serve.token" and stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
        token = token_file.read_text().strip()
        url = f"http://127.0.0.1:{found.group(1)}/sessions/s1/events"
        # (suspended, not over: a stream would wait for the next turn; this one asks to end at the turn's end)
        with httpx.stream("GET", f"{url}?until=turn_settled", headers={"Authorization": f"Bearer {token}"},
                          timeout=30) as r:
            got = frames(r, stop="end")
        assert got[0]["event"] == "turn_started" and got[-2]["event"] == "turn_settled"
        assert httpx.get(url, headers={"Authorization": "Bearer " + token[::-1]}, timeout=10).status_code == 401
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        assert not token_file.exists()  # the token dies with the server
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    wait_for("the port free", lambda: _refused(url))


def _refused(url: str) -> bool:
    try:
        httpx.get(url, timeout=2)
    except httpx.ConnectError:
        return True
    return False
