"""The http tool and its reconciler against real servers on 127.0.0.1: the world service and a tiny stdlib one."""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from ouroactors.authorities.ledger.domain import Entry
from ouroactors.core.serving import QuietHTTPServer
from ouroactors.faults.world import World
from ouroactors.runtime.execution.model import ToolCall
from ouroactors.runtime.execution.tools import (
    ToolContext,
    check_key,
    check_key_async,
    judge_lookup,
    parse_call,
    reconcile,
)
from ouroactors.runtime.execution.tools.http import RECONCILE_URL_ENV, STATUS_PATH_ENV, WORLD_URL_ENV
from ouroactors.system.handle import free_port
from ouroactors.testing.leaks import port_listening

from .tools_support import call, context

LOCAL = ("127.0.0.1",)


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with World() as running:
        yield running
    assert not running.running


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[dict[str, Any]]

    def _answer(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        type(self).seen.append({"path": self.path, "headers": dict(self.headers)})
        if self.path == "/big":
            self._answer(200, b"x" * 100_000)
        elif self.path == "/redirect":
            self._answer(302, b"", {"Location": "http://example.com/"})
        elif self.path.startswith("/status/failed-"):
            self._answer(200, json.dumps({"status": "failed"}).encode())
        elif self.path.startswith("/status/"):
            self._answer(200, json.dumps({"status": "pending"}).encode())
        else:
            self._answer(200, json.dumps({"headers": dict(self.headers)}).encode())

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def echo() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A stdlib server in a thread of this process: echoes headers, serves a big body, a redirect, statuses."""
    seen: list[dict[str, Any]] = []
    handler = type("Handler", (_Handler,), {"seen": seen})
    server = QuietHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert not port_listening(server.server_address[1])


def ctx_for(tmp_path: Path, **overrides: Any) -> ToolContext:
    root = tmp_path / "lease"
    root.mkdir(exist_ok=True)
    fields = {"network_domains": LOCAL, "network_private": ("127.0.0.1/32",), **overrides}
    return context(os.path.realpath(root), **fields)


def test_the_effect_carries_the_ledger_key_and_the_world_counts_it(tmp_path: Path, world: World) -> None:
    ctx = ctx_for(tmp_path, idempotency_key="eff-1/k")
    out = call("http", ctx, method="POST", url=f"{world.url}/items", json_body={"payload": {"n": 1}})
    assert out.status == "ok" and out.evidence["http_status"] == 201 and out.evidence["sent"] is True
    assert out.evidence["idempotency_key"] == "eff-1/k" and out.output.startswith("HTTP 201\n")
    with world.client() as client:
        assert client.lookup("eff-1/k")["deliveries"] == 1
        again = call("http", ctx, method="POST", url=f"{world.url}/items", json_body={"payload": {"n": 1}})
        assert again.evidence["http_status"] == 200  # the same key again: the world saw a duplicate delivery
        assert client.lookup("eff-1/k")["deliveries"] == 2


def test_headers_are_sent_and_redirects_are_not_followed(tmp_path: Path,
                                                         echo: tuple[str, list[dict[str, Any]]]) -> None:
    url, seen = echo
    out = call("http", ctx_for(tmp_path, effect_id="e9"), url=f"{url}/echo", headers={"X-Trace": "t1"})
    assert out.status == "ok"
    assert seen[-1]["headers"]["Idempotency-Key"] == "e9" and seen[-1]["headers"]["X-Trace"] == "t1"
    moved = call("http", ctx_for(tmp_path, effect_id="e10"), url=f"{url}/redirect")
    assert moved.status == "ok" and moved.evidence["http_status"] == 302
    assert [s["path"] for s in seen] == ["/echo", "/redirect"]  # example.com was never asked


def test_response_cap_is_reported(tmp_path: Path, echo: tuple[str, list[dict[str, Any]]]) -> None:
    url, _ = echo
    out = call("http", ctx_for(tmp_path, output_cap_bytes=500), url=f"{url}/big")
    assert out.truncated and out.output_cap_bytes == 500 and out.output == "HTTP 200\n" + "x" * 500
    assert out.evidence["response_bytes"] == 100_000


def test_a_refusal_is_failed_and_nothing_happened(tmp_path: Path, world: World) -> None:
    out = call("http", ctx_for(tmp_path, idempotency_key="refused-1"), method="POST", url=f"{world.url}/items",
               json_body={"payload": {"refuse": True}})
    assert out.status == "failed" and out.error_kind == "http_status" and out.evidence["http_status"] == 409
    assert check_key(world.url, "refused-1").outcome == "unknown"


def test_nothing_listening_is_failed_not_sent(tmp_path: Path) -> None:
    out = call("http", ctx_for(tmp_path), method="POST", url=f"http://127.0.0.1:{free_port()}/items")
    assert out.status == "failed" and out.error_kind == "connect_failed" and out.evidence["sent"] is False


def test_a_host_outside_the_granted_domains_is_never_contacted(tmp_path: Path, world: World) -> None:
    ctx = ctx_for(tmp_path, network_domains=("example.com",), idempotency_key="not-granted-1")
    tool, args = parse_call(ToolCall(id="c", name="http", arguments={"method": "POST", "url": f"{world.url}/items"}))
    assert tool.grant_request(args, ctx).domains == ("127.0.0.1",)
    out = trio.run(tool.run, args, ctx)
    assert out.status == "failed" and out.error_kind == "destination_refused" and out.evidence["sent"] is False
    assert "not in the granted domains" in (out.error or "")
    with world.client() as client:
        assert client.log(prefix="not-granted-1") == []


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_granted_name_resolving_to_loopback_is_refused_without_a_private_rule(tmp_path: Path, world: World,
                                                                                 host: str) -> None:
    """The tool runs next to the runtime's actor ports: granting a name is not granting the host's loopback."""
    ctx = ctx_for(tmp_path, network_domains=(host,), network_private=(), idempotency_key=f"loopback-{host}")
    out = call("http", ctx, method="POST", url=f"http://{host}:{world.port}/items")
    assert out.status == "failed" and out.error_kind == "destination_refused" and "loopback" in (out.error or "")
    with world.client() as client:
        assert client.log(prefix=f"loopback-{host}") == []


def test_the_connection_goes_to_the_checked_address_with_the_name_kept(
        tmp_path: Path, echo: tuple[str, list[dict[str, Any]]]) -> None:
    url, seen = echo
    out = call("http", ctx_for(tmp_path), url=f"{url}/echo")
    assert out.evidence["address"] == "127.0.0.1" and seen[-1]["headers"]["Host"] == url.removeprefix("http://")


def test_calls_share_one_tls_context_per_process(tmp_path: Path, echo: tuple[str, list[dict[str, Any]]],
                                                 world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """httpx builds (and loads the CA bundle into) a new TLS context for every client unless given one: 20-140 ms
    per call. The tool and its reconciler make it once per process, with httpx's own default settings."""
    from ouroactors.runtime.execution import tls

    made: list[object] = []
    real = httpx.create_ssl_context

    def counting(*args: Any, **kwargs: Any) -> Any:
        made.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(tls, "_contexts", {})
    monkeypatch.setattr(httpx, "create_ssl_context", counting)
    url, _ = echo
    for _ in range(3):
        assert call("http", ctx_for(tmp_path), url=f"{url}/x").status == "ok"
    assert check_key(world.url, "never-sent").outcome == "unknown"
    assert made == [{"trust_env": False}]  # one context for every client of this process, verification on
    assert tls.context().verify_mode.name == "CERT_REQUIRED"


def test_a_huge_response_is_not_held(tmp_path: Path, echo: tuple[str, list[dict[str, Any]]],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    url, _ = echo
    monkeypatch.setattr("ouroactors.runtime.execution.tools.http.MAX_RESPONSE_BYTES", 10_000)
    out = call("http", ctx_for(tmp_path, output_cap_bytes=100), url=f"{url}/big")
    assert out.status == "ok" and out.truncated and out.evidence["response_complete"] is False
    assert 10_000 < out.evidence["response_bytes"] < 100_000 and len(out.output) == len("HTTP 200\n") + 100


def test_a_late_reply_is_unknown_and_the_reconciler_settles_it(tmp_path: Path, world: World,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = ctx_for(tmp_path, idempotency_key="late-1", timeout_s=0.3)
    out = call("http", ctx, method="POST", url=f"{world.url}/items", json_body={"payload": {"reply_delay_s": 2}})
    assert out.status == "unknown" and out.error_kind == "timeout" and "may have been applied" in (out.error or "")
    # the ledger's side: it runs the reconciler named by the tool, which asks the world by key
    monkeypatch.setenv(RECONCILE_URL_ENV, world.url)
    verdict = reconcile(Entry.model_construct(kind="http_request", idempotency_key="late-1"))
    assert verdict is not None and verdict.status == "ok"
    assert verdict.evidence["deliveries"] == 1 and verdict.evidence["key"] == "late-1"


def test_reconciler_answers_unknown_for_a_key_never_seen(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    found = check_key(world.url, "never-sent")
    assert found.outcome == "unknown" and found.evidence["http_status"] == 404
    monkeypatch.delenv(RECONCILE_URL_ENV, raising=False)
    monkeypatch.setenv(WORLD_URL_ENV, world.url)  # the world's own variable is enough
    assert reconcile(Entry.model_construct(kind="http_request", idempotency_key="never-sent")) is None
    monkeypatch.delenv(WORLD_URL_ENV)
    assert reconcile(Entry.model_construct(kind="http_request", idempotency_key="x")) is None  # nowhere to ask


def test_reconciler_status_path_and_failed_answers(echo: tuple[str, list[dict[str, Any]]],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    url, seen = echo
    monkeypatch.setenv(RECONCILE_URL_ENV, url)
    monkeypatch.setenv(STATUS_PATH_ENV, "/status/{key}")
    verdict = reconcile(Entry.model_construct(kind="http_request", idempotency_key="failed-a/b"))
    assert verdict is not None and verdict.status == "failed"
    assert seen[-1]["path"] == "/status/failed-a%2Fb" and seen[-1]["headers"]["Idempotency-Key"] == "failed-a/b"
    assert reconcile(Entry.model_construct(kind="http_request", idempotency_key="other")) is None  # "pending"
    assert trio.run(lambda: check_key_async(url, "failed-z", status_path="/status/{key}")).outcome == "failed"


def test_reconciler_unreachable_target_is_unknown() -> None:
    found = check_key(f"http://127.0.0.1:{free_port()}", "k", timeout=1.0)
    assert found.outcome == "unknown" and "ConnectError" in found.evidence["error"]


@pytest.mark.parametrize(("status", "body", "outcome"), [
    (200, {"found": True, "deliveries": 1}, "ok"),
    (200, {"deliveries": 2}, "ok"),
    (200, {"status": "applied"}, "ok"),
    (200, {"status": "REFUSED"}, "failed"),
    (200, {"deliveries": True}, "unknown"),
    (200, {"found": False, "deliveries": 0}, "unknown"),
    (200, ["found"], "unknown"),
    (404, {"found": False}, "unknown"),
    (500, {"status": "ok"}, "unknown"),
])
def test_judge_lookup(status: int, body: Any, outcome: str) -> None:
    assert judge_lookup(status, body) == outcome


def test_transport_error_after_sending_is_unknown(tmp_path: Path) -> None:
    """A server that reads the request and hangs up without answering: the effect may have happened."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.close()

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        out = call("http", ctx_for(tmp_path), method="POST", url=f"http://127.0.0.1:{port}/x", body="payload")
    finally:
        thread.join()
        listener.close()
    assert out.status == "unknown" and out.error_kind == "transport" and out.evidence["sent"] is True
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/", timeout=1)


def test_a_request_in_flight_is_cancelled_within_100ms(tmp_path: Path, world: World) -> None:
    ctx = ctx_for(tmp_path, idempotency_key="cancel-1", timeout_s=30)
    tool, args = parse_call(ToolCall(id="c", name="http", arguments={
        "method": "POST", "url": f"{world.url}/items", "json_body": {"payload": {"reply_delay_s": 5}}}))

    async def main() -> float:
        latency = -1.0
        async with trio.open_nursery() as nursery:
            scope = trio.CancelScope()

            async def runner() -> None:
                with scope:
                    await tool.run(args, ctx)

            nursery.start_soon(runner)
            with world.client() as client:
                deadline = trio.current_time() + 10
                while not client.log(prefix="cancel-1"):  # the world has the request: it is in flight
                    assert trio.current_time() < deadline
                    await trio.sleep(0.005)
            t0 = trio.current_time()
            scope.cancel()
        latency = trio.current_time() - t0
        assert scope.cancelled_caught
        return latency

    assert trio.run(main) < 0.1
    assert check_key(world.url, "cancel-1").outcome == "ok"  # it happened: only the reconciler can say so


class _AnyMethod(BaseHTTPRequestHandler):
    """Counts every request it is sent, whatever the method (what reached the world)."""

    protocol_version = "HTTP/1.1"
    seen: list[str]

    def _any(self) -> None:
        type(self).seen.append(self.command)
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        body = b"" if self.command == "HEAD" else b"ok"
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _any

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.mark.parametrize("rule", ["allow:WebFetch(domain:127.0.0.1)", "allow:Tool(http)"])
def test_plan_mode_lets_reads_reach_the_world_and_no_write(tmp_path: Path, rule: str) -> None:
    """Seed 000: a planning session keeps read and network actions and refuses writes. The loop's order — the
    tool's grant request, then the posture and rules, then run only what was allowed — against a real server:
    only GET and HEAD reach it, whatever rule would admit the tool."""
    from ouroactors.authorities.grants.posture import PLAN_MODE, evaluate
    from ouroactors.authorities.grants.rules import Decision, Verdict, parse_rules

    seen: list[str] = []
    server = QuietHTTPServer(("127.0.0.1", 0), type("Handler", (_AnyMethod,), {"seen": seen}))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    rules = parse_rules([rule], "user")
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/repos/x/pulls"
        for method in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"):
            tool, args = parse_call(ToolCall(id="c", name="http", arguments={"method": method, "url": url}))
            ctx = ctx_for(tmp_path, idempotency_key=f"plan-{method}")
            verdict = evaluate(tool.grant_request(args, ctx), "plan", rules, root=ctx.root)
            if method in ("GET", "HEAD"):
                assert verdict.decision is Decision.ALLOW, (method, verdict)
                assert trio.run(tool.run, args, ctx).status == "ok"
            else:
                assert verdict == Verdict(Decision.DENY, PLAN_MODE, None), (method, verdict)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert seen == ["GET", "HEAD"]
