"""An observable external world: a small HTTP service the workload's effects call.

Effects create items by idempotency key; the service counts **every delivery** per key and
answers look-ups by key, so a duplicated effect is visible (``deliveries > 1``) and a reconciler
can settle an ambiguous ledger entry by asking whether the world saw its key.

::

    with World() as world:                       # its own process on 127.0.0.1, a free port
        client = world.client()
        client.create("k1", {"n": 1})            # {"created": True, "deliveries": 1}
        client.lookup("k1")                      # {"key": "k1", "deliveries": 1, ...}
        client.log(prefix="k")                   # every delivery, in order

The server runs in a separate process (``_world_server.py``, stdlib only), so a SIGKILL inside an
actor system never touches it; the context manager stops it, and the server also exits by itself
when the process that started it goes away — it never outlives its owner.

**Reconciler.** :func:`reconcile` is a ledger reconciler (``reconcilers={"http_request":
"ouroactors.faults.world:reconcile"}``). It runs inside the ledger's process and finds the world
through the environment variable :data:`WORLD_URL_ENV`, which must be set before the actor
system starts (actors inherit the environment of the process that started the system; see
:meth:`World.environ`). Found → ``ok`` with the world's record as evidence. Not found → ``None``
(the entry stays ambiguous, for an operator): absence is not proof, since a request still in
flight when the ledger restarted may land later.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx

from ..authorities.ledger.actor import Verdict
from ..authorities.ledger.domain import Entry

WORLD_URL_ENV = "OUROACTORS_WORLD_URL"
_SERVER_SCRIPT = Path(__file__).with_name("_world_server.py")


class WorldError(Exception):
    """The world service could not be started or answered something unexpected."""


_tls: ssl.SSLContext | None = None


def _tls_context() -> ssl.SSLContext:
    """httpx's default TLS context, made once per process. ``httpx.Client()`` builds a new one (loading the CA
    bundle) for every client, ~35 ms even for this plain-http loopback service; a crash enumeration makes a client
    for every site's bench and the ledger's reconciler one in every ledger process it runs in."""
    global _tls
    if _tls is None:
        _tls = httpx.create_ssl_context()
    return _tls


class WorldClient:
    """A client of the world service (httpx, one keep-alive connection)."""

    def __init__(self, url: str, timeout: float = 5.0) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.Client(base_url=self.url, timeout=timeout, verify=_tls_context())

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> WorldClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def create(self, key: str, payload: Any = None, timeout: float | None = None) -> dict[str, Any]:
        """Deliver the effect for ``key``: ``{"created", "deliveries"}``, or ``{"refused": True, …}``.

        Raises ``httpx.TimeoutException`` / ``httpx.TransportError`` when no answer came: the
        effect may or may not have happened.
        """
        response = self._http.post("/items", json={"key": key, "payload": payload},
                                   timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT)
        if response.status_code not in (200, 201, 409):
            raise WorldError(f"POST /items answered {response.status_code}: {response.text[:200]}")
        return dict(response.json())

    def lookup(self, key: str) -> dict[str, Any] | None:
        """The world's record of ``key``, or None if it never saw it."""
        response = self._http.get(f"/items/{quote(key, safe='')}")
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise WorldError(f"GET /items/{key} answered {response.status_code}: {response.text[:200]}")
        return dict(response.json())

    def log(self, prefix: str = "") -> list[dict[str, Any]]:
        """Every delivery and refusal of keys starting with ``prefix``, in arrival order."""
        response = self._http.get("/log", params={"prefix": prefix})
        if response.status_code != 200:
            raise WorldError(f"GET /log answered {response.status_code}: {response.text[:200]}")
        return list(response.json()["log"])


class World:
    """The world service in its own process; a context manager that never leaves it behind."""

    def __init__(self, host: str = "127.0.0.1", start_timeout: float = 10.0) -> None:
        self.host = host
        self.start_timeout = start_timeout
        self.port: int | None = None
        self.pid: int | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise WorldError("the world is not running")
        return f"http://{self.host}:{self.port}"

    def start(self) -> World:
        if self._process is not None:
            raise WorldError("the world is already running")
        process = subprocess.Popen(
            [sys.executable, str(_SERVER_SCRIPT), self.host],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True,
        )
        self._process = process
        try:
            line = self._first_line(process)
            info = json.loads(line)
            self.port, self.pid = int(info["port"]), int(info["pid"])
        except BaseException:
            self.stop()
            raise
        return self

    def _first_line(self, process: subprocess.Popen[bytes]) -> bytes:
        assert process.stdout is not None
        deadline = time.monotonic() + self.start_timeout
        buffer = b""
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while b"\n" not in buffer:
                left = deadline - time.monotonic()
                if left <= 0 or process.poll() is not None:
                    raise WorldError(f"the world service did not start within {self.start_timeout}s "
                                     f"(exit code {process.poll()})")
                if selector.select(timeout=left):
                    chunk = os.read(process.stdout.fileno(), 4096)
                    if not chunk:
                        continue
                    buffer += chunk
        return buffer.split(b"\n", 1)[0]

    def stop(self, timeout: float = 5.0) -> None:
        """Terminate the service and reap it (SIGKILL if it does not stop within ``timeout``)."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout)
        if process.stdout is not None:
            process.stdout.close()
        self.port = None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def client(self, timeout: float = 5.0) -> WorldClient:
        return WorldClient(self.url, timeout)

    @contextlib.contextmanager
    def environ(self) -> Iterator[None]:
        """Set :data:`WORLD_URL_ENV` for systems started inside the block (their actors inherit it)."""
        previous = os.environ.get(WORLD_URL_ENV)
        os.environ[WORLD_URL_ENV] = self.url
        try:
            yield
        finally:
            if previous is None:
                os.environ.pop(WORLD_URL_ENV, None)
            else:
                os.environ[WORLD_URL_ENV] = previous

    def __enter__(self) -> World:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


_clients: dict[str, WorldClient] = {}


def reconcile(entry: Entry) -> Verdict | None:
    """Ledger reconciler for effects on the world: settle ``ok`` when the world saw the key.

    Runs in the ledger's process; the world's URL comes from :data:`WORLD_URL_ENV`. Absence is
    not proof the effect never happened (a request may still be in flight), so it answers None
    and the entry stays ambiguous, visibly.
    """
    url = os.environ.get(WORLD_URL_ENV)
    if not url:
        return None
    client = _clients.get(url)
    if client is None:
        client = _clients[url] = WorldClient(url, timeout=2.0)
    found = client.lookup(entry.idempotency_key)
    if found is None or not found.get("deliveries"):
        return None
    return Verdict("ok", {"world": url, "key": entry.idempotency_key, "deliveries": int(found["deliveries"]),
                          "reconciled": True})
