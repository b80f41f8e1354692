"""The runtime's proxy on its UNIX socket: real sockets, a real HTTP server on 127.0.0.1, a scripted resolver."""

from __future__ import annotations

import http.server
import os
import socket
import stat
import threading
from collections.abc import Iterator

import pytest

from ouroactors.core.serving import QuietHTTPServer
from ouroactors.runtime.netproxy import NetProxy
from ouroactors.runtime.sandbox_netpolicy import NetworkPolicy

from .helpers import wait_until


class _Echo(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, str, dict[str, str]]] = []

    def _reply(self, body: bytes) -> None:
        self.seen.append((self.command, self.path, dict(self.headers.items())))
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._reply(f"got {self.path}".encode())

    def do_POST(self) -> None:
        self._reply(b"posted " + self.rfile.read(int(self.headers["Content-Length"])))

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def origin() -> Iterator[tuple[int, list[tuple[str, str, dict[str, str]]]]]:
    seen: list[tuple[str, str, dict[str, str]]] = []
    server = QuietHTTPServer(("127.0.0.1", 0), type("Echo", (_Echo,), {"seen": seen}))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


class Resolver:
    """A scripted DNS: what each name resolves to, and which names were asked."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers, self.asked = answers, []  # type: ignore[var-annotated]

    def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        return self.answers.get(host, [])


def exchange(proxy: NetProxy, data: bytes, *, then: bytes = b"") -> bytes:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(proxy.path)
        sock.sendall(data)
        if then:
            first = sock.recv(4096)
            sock.sendall(then)
            sock.shutdown(socket.SHUT_WR)
            rest = b""
            while chunk := sock.recv(4096):
                rest += chunk
            return first + b"||" + rest
        out = b""
        while chunk := sock.recv(4096):
            out += chunk
        return out


LOCAL = NetworkPolicy(("app.test", "*.svc.test"), ("127.0.0.1/32",))


def test_forwards_plain_http_to_the_checked_address(origin: tuple[int, list]) -> None:
    port, seen = origin
    dns = Resolver({"app.test": ["127.0.0.1"]})
    with NetProxy(LOCAL, resolver=dns) as proxy:
        reply = exchange(proxy, f"GET http://app.test:{port}/a?b=1 HTTP/1.1\r\nHost: app.test\r\n"
                                f"Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n\r\n".encode())
        assert reply.startswith(b"HTTP/1.0 200") or reply.startswith(b"HTTP/1.1 200"), reply
        assert reply.endswith(b"got /a?b=1")
        assert proxy.refusals == [] and proxy.allowed == [f"app.test:{port} -> 127.0.0.1"]
    method, path, headers = seen[0]
    assert (method, path) == ("GET", "/a?b=1")
    assert headers["Connection"] == "close" and "Proxy-Authorization" not in headers
    assert "Proxy-Connection" not in headers
    assert dns.asked == ["app.test"]


def test_forwards_a_request_body(origin: tuple[int, list]) -> None:
    port, _ = origin
    with NetProxy(LOCAL, resolver=Resolver({"app.test": ["127.0.0.1"]})) as proxy:
        reply = exchange(proxy, f"POST http://app.test:{port}/p HTTP/1.1\r\nHost: app.test\r\n"
                                f"Content-Length: 5\r\n\r\nhello".encode())
    assert reply.endswith(b"posted hello"), reply


def test_connect_tunnels_bytes_both_ways(origin: tuple[int, list]) -> None:
    port, seen = origin
    with NetProxy(LOCAL, resolver=Resolver({"api.svc.test": ["127.0.0.1"]})) as proxy:
        reply = exchange(proxy, f"CONNECT api.svc.test:{port} HTTP/1.1\r\nHost: api.svc.test\r\n\r\n".encode(),
                         then=b"GET /inside HTTP/1.0\r\n\r\n")
    head, _, rest = reply.partition(b"||")
    assert head == b"HTTP/1.1 200 Connection established\r\n\r\n"
    assert rest.endswith(b"got /inside") and seen[0][1] == "/inside"


@pytest.mark.parametrize("request_line,reason", [
    ("GET http://evil.test/ HTTP/1.1", "evil.test is not in the granted domains"),
    ("CONNECT evil.test:443 HTTP/1.1", "evil.test is not in the granted domains"),
    ("GET http://app.test@127.0.0.1:{port}/ HTTP/1.1", "127.0.0.1 is not in the granted domains"),
    ("CONNECT [::1]:{port} HTTP/1.1", "::1 is not in the granted domains"),
    ("CONNECT [::ffff:127.0.0.1]:{port} HTTP/1.1", "::ffff:127.0.0.1 is not in the granted domains"),
    ("GET http://rebind.svc.test:{port}/ HTTP/1.1", "rebind.svc.test resolves to 127.0.0.2 (loopback)"),
    ("GET http://mixed.svc.test:{port}/ HTTP/1.1", "mixed.svc.test resolves to 10.0.0.1 (private)"),
    ("GET http://meta.svc.test/latest HTTP/1.1", "meta.svc.test resolves to 169.254.169.254 (link-local)"),
    ("GET http://gone.svc.test/ HTTP/1.1", "gone.svc.test did not resolve to any address"),
])
def test_refusals_are_403_named_and_recorded(origin: tuple[int, list], request_line: str, reason: str) -> None:
    port, seen = origin
    dns = Resolver({"rebind.svc.test": ["127.0.0.2"], "mixed.svc.test": ["93.184.216.34", "10.0.0.1"],
                    "meta.svc.test": ["169.254.169.254"]})
    with NetProxy(LOCAL, resolver=dns) as proxy:
        reply = exchange(proxy, request_line.format(port=port).encode() + b"\r\nHost: x\r\n\r\n")
        assert reply.startswith(b"HTTP/1.1 403 Forbidden\r\n"), reply
        assert b"X-Ouroactors-Proxy: refused" in reply and reason.encode() in reply
        assert len(proxy.refusals) == 1 and reason in proxy.refusals[0]
    assert seen == []
    if "not in the granted domains" in reason:
        assert dns.asked == []  # a name outside the grant is never even resolved


@pytest.mark.parametrize("data,status", [
    (b"NONSENSE\r\n\r\n", b"400"),
    (b"GET /relative HTTP/1.1\r\nHost: app.test\r\n\r\n", b"400"),
    (b"GET ftp://app.test/x HTTP/1.1\r\n\r\n", b"400"),
    (b"CONNECT app.test HTTP/1.1\r\n\r\n", b"400"),
    (b"CONNECT app.test:https HTTP/1.1\r\n\r\n", b"400"),
    (b"GET http://app.test/ HTTP/1.1\r\nX: " + b"a" * 70000 + b"\r\n\r\n", b"431"),
])
def test_malformed_requests_are_answered_not_forwarded(data: bytes, status: bytes) -> None:
    dns = Resolver({"app.test": ["127.0.0.1"]})
    with NetProxy(LOCAL, resolver=dns) as proxy:
        reply = exchange(proxy, data)
        assert reply.split(b" ")[1] == status, reply
        assert proxy.refusals == []
    assert dns.asked == []


def test_unreachable_upstream_is_502() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    with NetProxy(LOCAL, resolver=Resolver({"app.test": ["127.0.0.1"]})) as proxy:
        reply = exchange(proxy, f"GET http://app.test:{port}/ HTTP/1.1\r\n\r\n".encode())
    assert reply.startswith(b"HTTP/1.1 502 Bad Gateway"), reply


def test_socket_directory_is_private_and_removed_on_close(origin: tuple[int, list]) -> None:
    port, _ = origin
    proxy = NetProxy(LOCAL, resolver=Resolver({"app.test": ["127.0.0.1"]}))
    assert stat.S_IMODE(os.stat(proxy.directory).st_mode) == 0o700
    assert stat.S_ISSOCK(os.stat(proxy.path).st_mode)
    # a tunnel still open at close is cut, and its handler thread ends
    held = socket.socket(socket.AF_UNIX)
    held.connect(proxy.path)
    held.sendall(f"CONNECT app.test:{port} HTTP/1.1\r\n\r\n".encode())
    assert held.recv(100).startswith(b"HTTP/1.1 200")
    before = {t for t in threading.enumerate() if t.name.startswith("netproxy")}
    assert before
    proxy.close()
    proxy.close()  # idempotent
    assert not os.path.exists(proxy.directory)
    wait_until(lambda: not any(t.is_alive() for t in before), "the proxy's threads to end")
    held.settimeout(5)
    assert held.recv(100) == b""
    held.close()


def test_concurrent_connections_are_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    from ouroactors.runtime import netproxy

    monkeypatch.setattr(netproxy, "MAX_CONNECTIONS", 2)
    with NetProxy(LOCAL, resolver=Resolver({})) as proxy:
        idle = []
        for _ in range(2):  # two connections that never finish their request head
            sock = socket.socket(socket.AF_UNIX)
            sock.connect(proxy.path)
            idle.append(sock)
        wait_until(lambda: sum(t.name == "netproxy-conn" and t.is_alive() for t in threading.enumerate()) >= 2,
                   "two handlers to be busy")
        assert exchange(proxy, b"GET http://app.test/ HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 503 ")
        for sock in idle:
            sock.close()
