"""The runtime's HTTP/HTTPS proxy for sandboxed commands, listening on a UNIX socket (the imperative shell).

Why a UNIX socket: the sandbox keeps its own network namespace (``--unshare-net`` always), so no TCP address
of the host is reachable from inside — not the host's ``127.0.0.1``, not its actor ports. The only way out is
this socket's directory, bound into the sandbox; the in-sandbox bridge (:mod:`.sandbox_bridge`) turns it into
``127.0.0.1:<port>`` in the sandbox's *own* loopback so ordinary clients can use ``HTTP(S)_PROXY``.

Two request forms, both judged by :func:`.sandbox_netpolicy.decide` after this module resolved the name:

* ``CONNECT host:port`` (HTTPS and any other TLS): ``200`` then bytes are relayed both ways, uninspected;
* ``GET http://host:port/path`` (plain HTTP forward): the request line is rewritten to origin form, the
  ``Proxy-*`` and hop-by-hop headers dropped, ``Connection: close`` forced (so a second request on the same
  connection cannot ride an earlier decision), then relayed.

A refusal is ``403`` with the reason as body and ``X-Ouroactors-Proxy: refused``; it is also kept in
:attr:`NetProxy.refusals` so the command's result can say what was refused. The proxy connects to the
address it checked, never to the name again. Threads, one per connection: the load is one command's.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

from .sandbox_netpolicy import NetworkPolicy, Verdict, check_name, decide, normalise_host

SOCKET_NAME = "proxy.sock"
HEAD_LIMIT = 64 * 1024  # request line + headers
HEAD_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 10.0
IDLE_TIMEOUT_S = 300.0
MAX_REFUSALS = 200
MAX_CONNECTIONS = 64  # concurrent connections per command; more are answered 503 (one thread each)
_HOP = {b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive"}

Resolver = Callable[[str, int], Sequence[str]]


def resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to for TCP (the system resolver); an empty list when it does not."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class _Refused(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


def _split_hostport(text: str, default_port: int | None) -> tuple[str, int]:
    if text.startswith("["):
        end = text.find("]")
        host, rest = text[1:end], text[end + 1:]
        port_text = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port_text = text.rpartition(":") if text.count(":") == 1 else (text, "", "")
    if not port_text:
        if default_port is None:
            raise _Refused(400, f"{text!r}: no port")
        return host, default_port
    if not port_text.isdigit():
        raise _Refused(400, f"{text!r}: bad port")
    return host, int(port_text)


class NetProxy:
    """One proxy for one command: a private 0700 directory holding ``proxy.sock``; :meth:`close` removes it."""

    def __init__(self, policy: NetworkPolicy, *, resolver: Resolver = resolve) -> None:
        self.policy, self.resolver = policy, resolver
        self.refusals: list[str] = []
        self.allowed: list[str] = []
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._closed = threading.Event()
        self.directory = tempfile.mkdtemp(prefix="ouroactors-netproxy-")
        os.chmod(self.directory, 0o700)
        self.path = os.path.join(self.directory, SOCKET_NAME)
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._server.bind(self.path)
            self._server.listen(64)
        except OSError:
            self._server.close()
            shutil.rmtree(self.directory, ignore_errors=True)
            raise
        self._acceptor = threading.Thread(target=self._accept_loop, name="netproxy-accept", daemon=True)
        self._acceptor.start()

    def __enter__(self) -> NetProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop accepting, cut every relayed connection, wait for the handlers, remove the directory."""
        if self._closed.is_set():
            return
        self._closed.set()
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        self._acceptor.join(5)
        with self._lock:
            conns, threads = list(self._conns), list(self._threads)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for thread in threads:
            thread.join(5)
        shutil.rmtree(self.directory, ignore_errors=True)

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            with self._lock:
                busy = sum(t.is_alive() for t in self._threads) >= MAX_CONNECTIONS
            if busy:  # read what the client sent first: closing on unread bytes resets, losing the answer
                with contextlib.suppress(OSError):
                    conn.settimeout(1.0)
                    conn.recv(HEAD_LIMIT)
                _answer(conn, 503, f"more than {MAX_CONNECTIONS} concurrent connections")
                conn.close()
                continue
            thread = threading.Thread(target=self._handle, args=(conn,), name="netproxy-conn", daemon=True)
            with self._lock:
                self._conns.add(conn)
                self._threads = [t for t in self._threads if t.is_alive()] + [thread]
            thread.start()

    def _track(self, sock: socket.socket, add: bool) -> None:
        with self._lock:
            (self._conns.add if add else self._conns.discard)(sock)

    def _record(self, refused: bool, text: str) -> None:
        with self._lock:
            target = self.refusals if refused else self.allowed
            if len(target) < MAX_REFUSALS:
                target.append(text)

    def _handle(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            head, rest = _read_head(client)
            method, target, version, headers = _parse_head(head)
            if method == b"CONNECT":
                host, port = _split_hostport(target.decode("latin-1"), None)
                upstream = self._open(host, port)
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                if rest:
                    upstream.sendall(rest)
            else:
                url = urlsplit(target.decode("latin-1"))
                if url.scheme != "http" or not url.netloc:
                    raise _Refused(400, f"{target.decode('latin-1')!r}: only absolute http:// URLs or CONNECT")
                host, port = _split_hostport(url.netloc.rpartition("@")[2], 80)
                upstream = self._open(host, port)
                path = (url.path or "/") + (f"?{url.query}" if url.query else "")
                kept = [h for h in headers if h.split(b":", 1)[0].strip().lower() not in _HOP]
                upstream.sendall(b" ".join([method, path.encode("latin-1"), version]) + b"\r\n"
                                 + b"".join(h + b"\r\n" for h in kept) + b"Connection: close\r\n\r\n" + rest)
            _relay(client, upstream, self._closed)
        except _Refused as refusal:
            if refusal.status == 403:
                self._record(True, refusal.reason)
            _answer(client, refusal.status, refusal.reason)
        except OSError:
            pass
        finally:
            if upstream is not None:
                self._track(upstream, False)
                upstream.close()
            self._track(client, False)
            client.close()

    def check(self, host: str, port: int) -> Verdict:
        """Resolve ``host`` (unless it is an address) and ask the pure policy."""
        named = check_name(host, port, self.policy)
        if not named.allowed:  # the name is not granted: do not even resolve it (no DNS query leaks it)
            return named
        return decide(host, port, self.resolver(normalise_host(host) or host, port), self.policy)

    def _open(self, host: str, port: int) -> socket.socket:
        verdict = self.check(host, port)
        if not verdict.allowed or verdict.address is None:
            raise _Refused(403, verdict.reason)
        self._record(False, f"{host}:{port} -> {verdict.address}")
        try:
            sock = socket.create_connection((verdict.address, port), timeout=CONNECT_TIMEOUT_S)
        except OSError as exc:
            raise _Refused(502, f"{host}:{port} ({verdict.address}): {exc.strerror or exc}")
        sock.settimeout(None)
        self._track(sock, True)
        return sock


def _read_head(sock: socket.socket) -> tuple[bytes, bytes]:
    sock.settimeout(HEAD_TIMEOUT_S)
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > HEAD_LIMIT:
            raise _Refused(431, "request head too large")
        chunk = sock.recv(65536)
        if not chunk:
            raise OSError("client closed before the request head ended")
        data += chunk
    sock.settimeout(None)
    head, _, rest = data.partition(b"\r\n\r\n")
    if len(head) > HEAD_LIMIT:
        raise _Refused(431, "request head too large")
    return head, rest


def _parse_head(head: bytes) -> tuple[bytes, bytes, bytes, list[bytes]]:
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        raise _Refused(400, f"bad request line {lines[0][:200]!r}")
    return parts[0], parts[1], parts[2], [line for line in lines[1:] if line]


def _answer(sock: socket.socket, status: int, reason: str) -> None:
    phrase = {400: "Bad Request", 403: "Forbidden", 431: "Request Header Fields Too Large",
              502: "Bad Gateway", 503: "Service Unavailable"}.get(status, "Error")
    body = f"ouroactors proxy refused: {reason}\n".encode()
    with contextlib.suppress(OSError):
        sock.sendall(f"HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain; charset=utf-8\r\n"
                     f"Content-Length: {len(body)}\r\nConnection: close\r\nX-Ouroactors-Proxy: refused\r\n\r\n"
                     .encode() + body)


def _relay(a: socket.socket, b: socket.socket, closed: threading.Event) -> None:
    """Copy bytes both ways until both directions ended (half-closes are passed on), or idle/closed."""
    peer = {a.fileno(): b, b.fileno(): a}
    sel = selectors.DefaultSelector()
    try:
        sel.register(a, selectors.EVENT_READ)
        sel.register(b, selectors.EVENT_READ)
        while sel.get_map() and not closed.is_set():
            ready = sel.select(IDLE_TIMEOUT_S)
            if not ready:
                return
            for key, _ in ready:
                src = key.fileobj
                assert isinstance(src, socket.socket)
                chunk = src.recv(65536)
                if chunk:
                    peer[src.fileno()].sendall(chunk)
                else:
                    sel.unregister(src)
                    with contextlib.suppress(OSError):
                        peer[src.fileno()].shutdown(socket.SHUT_WR)
    finally:
        sel.close()
