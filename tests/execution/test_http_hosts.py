"""``http`` calls to an IPv6 literal or a trailing-dot host name, through the live effect port.

Before: the effect port added the raw host of the grant request to the call's network policy, which refused it
(``bad domain pattern '::1' …``) — after an operator had approved an IPv6 literal, and for ``LOCALHOST.`` without
asking anyone. Now the host is normalised once (:func:`~ouroactors.runtime.sandbox_netpolicy.policy_name`): a
trailing-dot name is judged and admitted as the name it is, and a host no network grant can name (an IPv6 literal)
is refused with a clear reason before grants are asked, so no operator is asked an approval that can only fail.
Real server on 127.0.0.1, the real effect port, ledger and grants on LMDB.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
import trio

from benchmarks.bench_effect_path import prepared
from ouroactors.authorities.storage.env import close_env
from ouroactors.core.serving import QuietHTTPServer
from ouroactors.runtime import sandbox_netpolicy as netpolicy
from ouroactors.runtime.execution.loop import ParsedCall, ToolResult
from ouroactors.runtime.execution.model import ToolCall
from ouroactors.runtime.execution.tools import HttpTool, ToolRefused, parse_call
from ouroactors.testing.leaks import port_listening

from .tools_support import context, lease

AUTHORITY = {"storage": 3, "ledger": 5, "grants": 7}


class _Hello(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[dict[str, str]]

    def do_GET(self) -> None:
        type(self).seen.append({"path": self.path, "host": self.headers.get("Host", "")})
        self.send_response(200)
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"hello")

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[int, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []
    httpd = QuietHTTPServer(("127.0.0.1", 0), type("Handler", (_Hello,), {"seen": seen}))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    port = httpd.server_address[1]
    try:
        yield port, seen
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
    assert not port_listening(port)


class Approver:
    """The grants authority's approval side: counts what it is asked, answers yes (an operator who approves)."""

    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []

    async def decide(self, request: Any, root: str | None) -> Any:
        raise AssertionError("decided inline")

    async def approve(self, session: str, tool: str, arguments: dict[str, Any], call_id: str) -> tuple[bool, str]:
        self.asked.append(arguments)
        return True, "approval approval-0123456789ab approved by op"


class Ctx:
    session = "s1"
    turn = 1
    output_cap_bytes = 4096
    timeout_s = 10.0
    alone = True

    def __init__(self, call: ToolCall) -> None:
        self.call = call

    def record_result(self, result: ToolResult) -> None:
        pass

    def record_approval(self, fields: dict[str, Any]) -> None:
        pass

    async def emit(self, kind: str, data: dict[str, Any]) -> None:
        pass

    async def result_ready(self) -> None:
        pass

    def cancel_cause(self) -> str:
        return "interrupted"


@pytest.fixture
def port_with(tmp_path: Path) -> Iterator[Any]:
    """``open(rules, private)``: the live effect port of session s1 with those user rules and private networks."""
    opened: list[Any] = []

    def open_(rules: tuple[str, ...], private: tuple[str, ...] = ()) -> tuple[Any, Approver, Any]:
        root = tmp_path / "ws"
        root.mkdir()
        ready = prepared(tmp_path / "data", root, session="s1", authority=AUTHORITY, rules=rules, watch=False)
        opened.append(ready)
        approver = Approver()
        ready.effects.grants = approver
        ready.effects.settings.network_private = private
        return ready.effects, approver, ready.store

    yield open_
    for ready in opened:
        close_env(ready.config)


def _get(effects: Any, url: str, call_id: str = "c1") -> ToolResult:
    call = ToolCall(id=call_id, name="http", arguments={"url": url})
    tool, args = parse_call(call)
    return trio.run(effects.run, ParsedCall(call, (tool, args)), Ctx(call))


@pytest.mark.parametrize("host", ["[::1]", "[::ffff:127.0.0.1]", "[0:0:0:0:0:ffff:7f00:1]"])
def test_an_ipv6_literal_is_refused_before_anyone_is_asked(port_with, server, host: str) -> None:
    port, seen = server
    effects, approver, store = port_with(("allow:WebFetch(domain:*)",), ("127.0.0.1/32", "::1/128"))
    result = _get(effects, f"http://{host}:{port}/")
    assert result.status == "failed" and result.error_kind == "destination_refused", result
    assert "IPv6 address literal" in (result.error or "") and "host name" in (result.error or "")
    assert "bad domain pattern" not in (result.error or "")
    assert approver.asked == []  # no approval that could only fail
    assert store.list(session="s1", kind="http_request") == []  # nothing started
    assert seen == []  # nothing sent


def test_an_approved_ipv6_literal_never_gets_an_approval_that_can_only_fail(port_with, server) -> None:
    """Under rules that would ask about it (no rule names it), the literal is still refused before the ask."""
    port, seen = server
    effects, approver, store = port_with(("allow:WebFetch(domain:example.com)",), ("127.0.0.1/32",))
    result = _get(effects, f"http://[::ffff:127.0.0.1]:{port}/")
    assert result.status == "failed" and result.error_kind == "destination_refused"
    assert approver.asked == [] and seen == [] and store.list(session="s1", kind="http_request") == []


@pytest.mark.parametrize("host", ["LOCALHOST.", "localhost.", "127.0.0.1."])
def test_a_trailing_dot_host_is_judged_and_reached_as_its_name(port_with, server, host: str) -> None:
    port, seen = server
    effects, approver, store = port_with(("allow:WebFetch(domain:*)",), ("127.0.0.1/32",))
    result = _get(effects, f"http://{host}:{port}/hello")
    assert result.status == "ok", result
    assert result.output.endswith("hello") and approver.asked == []
    assert seen == [{"path": "/hello", "host": f"{host.lower()}:{port}"}]  # the Host header names it as the URL does
    [entry] = store.list(session="s1", kind="http_request")
    assert entry.status.value == "ok"


def test_a_trailing_dot_host_matches_a_rule_naming_it_without_the_dot(port_with, server) -> None:
    port, seen = server
    effects, approver, _ = port_with(("allow:WebFetch(domain:localhost)",), ("127.0.0.1/32",))
    assert _get(effects, f"http://LocalHost.:{port}/").status == "ok"
    assert approver.asked == [] and len(seen) == 1


def test_the_grant_request_names_the_normalised_host(tmp_path: Path) -> None:
    root, _ = lease(tmp_path)
    ctx = context(root)
    tool = HttpTool()
    for url, host in [("https://Example.COM./x", "example.com"), ("http://localhost.:8080/", "localhost"),
                      ("http://127.0.0.1./", "127.0.0.1")]:
        args = tool.Args.model_validate({"url": url})
        assert tool.grant_request(args, ctx).domains == (host,)
    for url in ("http://[::1]/", "http://[::ffff:127.0.0.1]:80/", "http://[fe80::1%25eth0]/"):
        with pytest.raises(ToolRefused) as refused:
            tool.grant_request(tool.Args.model_validate({"url": url}), ctx)
        assert refused.value.kind == "destination_refused"


def test_policy_name_and_the_policy_agree() -> None:
    assert netpolicy.policy_name("Example.COM.") == "example.com"
    with pytest.raises(netpolicy.NetworkPolicyError, match="IPv6 address literal"):
        netpolicy.policy_name("[::1]")
    with pytest.raises(netpolicy.NetworkPolicyError, match="not a host name"):
        netpolicy.policy_name("exa mple.com")
    # a pattern spelled with the root's dot is the name without it; a pattern no name matches is still refused
    assert netpolicy.NetworkPolicy(domains=("example.com.", "*.example.org."), private=("db.internal.",)).domains \
        == ("example.com", "*.example.org")
    for bad in ("::1", "*.", ".", "exa mple.com"):
        with pytest.raises(netpolicy.NetworkPolicyError):
            netpolicy.NetworkPolicy(domains=(bad,))
    policy = netpolicy.NetworkPolicy(domains=("example.com.",))
    assert netpolicy.check_name("EXAMPLE.com.", 443, policy).allowed
