"""The observable external world's HTTP server (stdlib only; run as a script by :mod:`.world`).

It is started as ``python _world_server.py HOST`` in its own process, so a SIGKILL inside an actor
system never touches it. It prints one JSON line with the port it bound, then serves until it is
terminated or its parent process goes away (it watches its parent: it never outlives the process
that started it).

Endpoints (JSON in, JSON out):

* ``POST /items`` ``{"key": K, "payload": P}`` — the effect (without ``key``, the ``Idempotency-Key`` header
  names it, as the runtime's ``http`` tool sends it). The first delivery of ``K`` creates
  the item; every delivery is counted and logged. Answers ``{"created": bool, "deliveries": n}``.
  A payload with ``"refuse": true`` is refused (409, nothing created, not a delivery: the effect
  definitely did not happen). A payload with ``"reply_delay_s": x`` records the delivery first and
  answers only after ``x`` seconds (a slow reply the caller may give up on: the effect happened).
* ``GET /items/<key>`` — look an item up by its idempotency key: 200 with the item, 404 if the
  world never saw it.
* ``GET /log?prefix=P`` — every delivery and refusal (of keys starting with ``P``), in order.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

MAX_BODY = 64 * 1024
MAX_REPLY_DELAY_S = 30.0


class WorldState:
    """Items by key and the log of everything that reached the world."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: dict[str, dict[str, Any]] = {}
        self.log: list[dict[str, Any]] = []

    def deliver(self, key: str, payload: Any) -> dict[str, Any]:
        now = time.time_ns()
        with self.lock:
            item = self.items.get(key)
            created = item is None
            if item is None:
                item = self.items[key] = {"key": key, "payload": payload, "deliveries": 0, "first_ns": now}
            item["deliveries"] += 1
            item["last_ns"] = now
            self.log.append({"key": key, "event": "delivered", "created": created, "n": item["deliveries"],
                             "t_ns": now})
            return {"created": created, "deliveries": item["deliveries"]}

    def refuse(self, key: str) -> dict[str, Any]:
        with self.lock:
            self.log.append({"key": key, "event": "refused", "created": False, "n": 0, "t_ns": time.time_ns()})
            item = self.items.get(key)
            return {"created": False, "refused": True, "deliveries": item["deliveries"] if item else 0}

    def lookup(self, key: str) -> dict[str, Any] | None:
        with self.lock:
            item = self.items.get(key)
            return dict(item) if item is not None else None

    def entries(self, prefix: str) -> list[dict[str, Any]]:
        with self.lock:
            return [dict(e) for e in self.log if e["key"].startswith(prefix)]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: one connection per client
    disable_nagle_algorithm = True  # headers and body go out as separate writes: no 40 ms stalls
    server: WorldServer

    def _answer(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY:
            self.close_connection = True  # the body is not read: this connection cannot go on
            self._answer(400, {"error": f"bad request: body of {length} bytes (up to {MAX_BODY} accepted)"})
            return
        raw = self.rfile.read(length)  # read it whatever the path, so keep-alive stays in step
        if urlsplit(self.path).path != "/items":
            self._answer(404, {"error": f"no such endpoint: POST {self.path}"})
            return
        try:
            body = json.loads(raw)
            key = body["key"] if "key" in body else self.headers["Idempotency-Key"]  # the header, when no key
            payload = body.get("payload")
            if not isinstance(key, str) or not key:
                raise ValueError("key must be a non-empty string")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            self._answer(400, {"error": f"bad request: {exc}"})
            return
        state = self.server.state
        if isinstance(payload, dict) and payload.get("refuse") is True:
            self._answer(409, state.refuse(key))
            return
        answer = state.deliver(key, payload)
        delay = payload.get("reply_delay_s") if isinstance(payload, dict) else None
        if isinstance(delay, int | float) and not isinstance(delay, bool) and delay > 0:
            time.sleep(min(float(delay), MAX_REPLY_DELAY_S))  # the effect happened; the reply is late
        self._answer(201 if answer["created"] else 200, answer)

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        if parts.path.startswith("/items/"):
            key = unquote(parts.path[len("/items/"):])
            item = self.server.state.lookup(key)
            if item is None:
                self._answer(404, {"key": key, "deliveries": 0, "found": False})
            else:
                self._answer(200, {**item, "found": True})
            return
        if parts.path == "/log":
            prefix = parse_qs(parts.query).get("prefix", [""])[0]
            self._answer(200, {"log": self.server.state.entries(prefix)})
            return
        self._answer(404, {"error": f"no such endpoint: GET {self.path}"})

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the log endpoint is the record
        pass


class WorldServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str) -> None:
        super().__init__((host, 0), Handler)
        self.state = WorldState()


def _watch_parent(server: WorldServer, parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.2)  # a watchdog's poll, not synchronisation
    os._exit(0)  # the process that started us is gone: never outlive it


def main(argv: list[str]) -> int:
    host = argv[1] if len(argv) > 1 else "127.0.0.1"
    server = WorldServer(host)
    threading.Thread(target=_watch_parent, args=(server, os.getppid()), daemon=True).start()
    sys.stdout.write(json.dumps({"port": server.server_address[1], "pid": os.getpid()}) + "\n")
    sys.stdout.flush()
    server.serve_forever(poll_interval=0.1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
