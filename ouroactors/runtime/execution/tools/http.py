"""The ``http`` tool (httpx on trio) and its reconciler: effects on a remote service, made settle-able by key.

**Idempotency.** Every request carries ``Idempotency-Key: <key>``, the key the ledger's start recorded for the
call (:meth:`ToolContext.key`: the context's ``idempotency_key``, else the effect id, else session/call id).
A retry of the same effect sends the same key, so a service that honours the header applies it once.

**What grants judge.** The host and the method (:meth:`HttpTool.grant_request`): GET and HEAD are network
reads; any other method changes the world and is judged a **write** to its host — refused in plan mode, and
admitted by ``allow:WebWrite(domain:…)``, not by ``allow:WebFetch(domain:…)``. The host is judged as the network
policy names it (:func:`~ouroactors.runtime.sandbox_netpolicy.policy_name`: lower case, no trailing dot), and that
name is what the effect port adds to the call's policy once grants admitted it; a host no policy can name (an IPv6
literal) is refused by the grant request itself (``destination_refused``), so no operator is asked to approve a
call that could only fail.

**Where it may connect.** This tool runs in the runtime's process, next to its actor ports, so it applies the
sandbox proxy's policy itself (:func:`pinned_destination`, :mod:`ouroactors.runtime.sandbox_netpolicy`): the
host must match a granted domain (``ToolContext.network_domains``) and every address it resolves to must be
public unless ``ToolContext.network_private`` names it; the connection goes to the checked address, with the
name kept in ``Host`` and for TLS (SNI and certificate check), so DNS rebinding cannot move it. Refused →
``failed`` / ``destination_refused``, nothing sent. Response bodies are read up to 64 MiB (hashed; the output
capped).

**Honest status.** 2xx/3xx → ``ok``; 4xx/5xx → ``failed`` (the service answered: it refused or erred);
nothing connected (connect error or connect timeout) → ``failed`` (nothing was sent); any transport error after
the request may have left (write/read error or timeout, a broken reply) → ``unknown``: the effect may have
happened, so the loop must leave the ledger entry started for the reconciler. Redirects are not followed (a
redirect to another host would be a request grants never judged); the 3xx is reported as is.

**Reconciler convention.** ``GET <base><status_path>`` with ``status_path`` a template containing ``{key}``
(URL-quoted; default ``/items/{key}``, what :mod:`ouroactors.faults.world` serves) and the key repeated in an
``Idempotency-Key`` header. The answer is judged by :func:`judge_lookup` (pure): 200 with ``found: true``, a
positive ``deliveries`` or ``status`` in (``applied``, ``ok``, ``done``) → settled ``ok``; 200 with ``status``
in (``failed``, ``refused``, ``rejected``) → ``failed``; anything else (404 included: absence is not proof, a
request in flight may still land) → ``unknown``. :func:`reconcile` is the ledger-side entry point
(``reconcilers={"http_request": "ouroactors.runtime.execution.tools.http:reconcile"}``): it runs in the
ledger's process, finds the service through :data:`RECONCILE_URL_ENV` (falling back to the world service's
variable) and answers a ledger :class:`~ouroactors.authorities.ledger.messages.Verdict` or None (unknown).
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote, urlsplit

import trio
from pydantic import Field, field_validator

from ....authorities.grants.rules import Effect, Request, method_effect
from ....authorities.ledger.domain import Entry
from ....authorities.ledger.messages import Verdict
from ... import sandbox_netpolicy as netpolicy
from .. import tls
from .base import Tool, ToolArgs, ToolContext, ToolOutcome, ToolRefused, cap_bytes

if TYPE_CHECKING:
    import httpx

log = logging.getLogger("ouroactors.ledger")

IDEMPOTENCY_HEADER = "Idempotency-Key"
RECONCILE_URL_ENV = "OUROACTORS_HTTP_RECONCILE_URL"
STATUS_PATH_ENV = "OUROACTORS_HTTP_STATUS_PATH"
WORLD_URL_ENV = "OUROACTORS_WORLD_URL"  # the chaos workload's world service (ouroactors.faults.world)
DEFAULT_STATUS_PATH = "/items/{key}"
MAX_BODY_BYTES = 1024 * 1024
MAX_RESPONSE_BYTES = 64 * 1024 * 1024  # read no further: the rest is not kept, hashed or waited for
_RESERVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection", "idempotency-key"})


class HttpArgs(ToolArgs):
    method: Literal["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"] = "GET"
    url: str = Field(min_length=1, max_length=8192, description="absolute http:// or https:// URL")
    headers: dict[str, str] = Field(default_factory=dict, description="extra request headers")
    body: str | None = Field(None, max_length=MAX_BODY_BYTES, description="raw request body")
    json_body: Any = Field(None, description="a JSON request body (instead of body)")

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"scheme must be http or https, not {parts.scheme or '(none)'!r}")
        if not parts.hostname:
            raise ValueError("the URL has no host")
        if parts.username or parts.password:
            raise ValueError("credentials in the URL are refused")
        return value

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            if name.lower() in _RESERVED_HEADERS:
                raise ValueError(f"header {name!r} is set by the tool")
            if not name or any(c in name for c in " :\r\n\0") or any(c in text for c in "\r\n\0"):
                raise ValueError(f"header {name!r} is not a valid header")
        return value


def host_of(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()


class _Refused(Exception):
    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind, self.detail = kind, detail


async def pinned_destination(url: httpx.URL, ctx: ToolContext) -> tuple[httpx.URL, str]:
    """Resolve the URL's host once and check it with the sandbox proxy's own policy; the URL to connect to.

    The same two gates as :mod:`ouroactors.runtime.sandbox_netpolicy` (a granted domain, and every resolved
    address public unless ``ctx.network_private`` names it), because this tool runs in the runtime's process,
    next to its actor ports: a granted name that resolves to loopback must not reach them. The connection then
    goes to the checked address (the name is kept in ``Host`` and for TLS), so a name that resolves elsewhere a
    moment later (DNS rebinding) cannot move it.
    """
    host = netpolicy.normalise_host(url.host or "") or (url.host or "").lower()  # resolved as the proxy does
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        policy = netpolicy.NetworkPolicy(domains=ctx.network_domains, private=ctx.network_private)
    except netpolicy.NetworkPolicyError as exc:
        raise _Refused("destination_refused", str(exc)) from None
    named = netpolicy.check_name(host, port, policy)
    if not named.allowed:
        raise _Refused("destination_refused", named.reason)
    try:
        infos = await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise _Refused("connect_failed", f"cannot resolve {host}: {exc}") from None
    verdict = netpolicy.decide(host, port, list(dict.fromkeys(str(info[4][0]) for info in infos)), policy)
    if not verdict.allowed or verdict.address is None:
        raise _Refused("destination_refused", verdict.reason)
    return url.copy_with(host=verdict.address), verdict.address


class HttpTool(Tool[HttpArgs]):
    name = "http"
    description = ("Send one HTTP request (no redirects followed). The request carries an Idempotency-Key; the "
                   "status and the (capped) response body are returned.")
    effect = Effect.NETWORK  # for a safe method (GET, HEAD); any other is judged a write (see grant_request)
    Args = HttpArgs
    fingerprint_fields = ("method", "url", "headers", "body", "json_body")
    ledger_kind = "http_request"
    reconciler = "ouroactors.runtime.execution.tools.http:reconcile"

    def grant_request(self, args: HttpArgs, ctx: ToolContext) -> Request:
        """The host and the method: a GET or HEAD reads the world (network); a POST, PUT, PATCH or DELETE changes
        it — a write, refused in plan mode and admitted only by a ``WebWrite(domain:…)`` rule (or a tool rule)."""
        try:
            host = netpolicy.policy_name(host_of(args.url))
        except netpolicy.NetworkPolicyError as exc:
            raise ToolRefused(self.name, str(exc), kind="destination_refused") from None
        return Request(principal=ctx.session_id, tool=self.name, effect=method_effect(args.method, self.effect),
                       domains=(host,), method=args.method)

    async def run(self, args: HttpArgs, ctx: ToolContext) -> ToolOutcome:
        import httpx  # imported where used (about 0.1 s): see ..tls
        started = time.monotonic()
        base: dict[str, Any] = {"method": args.method, "url": args.url, "sent": False}
        try:
            key = ctx.key()
            base["idempotency_key"] = key
            url = httpx.URL(args.url)
            target, address = await pinned_destination(url, ctx)
        except (ToolRefused, _Refused) as exc:
            return ToolOutcome(status="failed", error=getattr(exc, "detail", str(exc)), error_kind=exc.kind,
                               evidence=base, output_cap_bytes=ctx.output_cap_bytes, duration_ms=_ms(started))
        base["address"] = address
        headers = {**args.headers, "Host": url.netloc.decode("ascii"), IDEMPOTENCY_HEADER: key}
        content = args.body.encode() if args.body is not None else None
        # the name the certificate is checked against: without a trailing dot (``example.com.`` is example.com)
        extensions = {"sni_hostname": netpolicy.normalise_host(url.host) or url.host} if url.scheme == "https" else {}
        try:
            async with httpx.AsyncClient(timeout=ctx.timeout_s, follow_redirects=False, trust_env=False,
                                         verify=tls.context()) as client, \
                    client.stream(args.method, target, headers=headers, content=content,
                                  json=args.json_body if content is None else None, extensions=extensions) as response:
                body = await _read_capped(response, ctx.output_cap_bytes)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            return self._transport_failure("failed", "connect_failed", exc, base, ctx, started)
        except httpx.TimeoutException as exc:
            return self._transport_failure("unknown", "timeout", exc, base, ctx, started)
        except httpx.HTTPError as exc:
            return self._transport_failure("unknown", "transport", exc, base, ctx, started)
        text, cut = cap_bytes(body.kept, ctx.output_cap_bytes)
        ok = response.status_code < 400
        evidence = {**base, "sent": True, "http_status": response.status_code, "response_bytes": body.total,
                    "response_sha256": body.digest, "response_complete": body.complete}
        if body.error:
            evidence["response_error"] = body.error
        return ToolOutcome(status="ok" if ok else "failed", output=f"HTTP {response.status_code}\n{text}",
                           truncated=cut or body.total > len(body.kept) or not body.complete,
                           output_cap_bytes=ctx.output_cap_bytes,
                           error=None if ok else f"HTTP {response.status_code} {response.reason_phrase}",
                           error_kind=None if ok else "http_status", evidence=evidence, duration_ms=_ms(started))

    @staticmethod
    def _transport_failure(status: Literal["failed", "unknown"], kind: str, exc: Exception, base: dict[str, Any],
                           ctx: ToolContext, started: float) -> ToolOutcome:
        why = "nothing was sent" if status == "failed" else "the request may have been applied"
        return ToolOutcome(status=status, error=f"{type(exc).__name__}: {exc or 'no detail'} ({why})",
                           error_kind=kind, evidence={**base, "sent": status == "unknown"},
                           output_cap_bytes=ctx.output_cap_bytes, duration_ms=_ms(started))


@dataclass
class _Body:
    kept: bytes
    total: int
    digest: str
    complete: bool
    error: str | None = None


async def _read_capped(response: httpx.Response, cap: int) -> _Body:
    """Read the body keeping ``cap`` (+ one character) bytes, hashing all of it, at most MAX_RESPONSE_BYTES.

    A hostile server cannot make the runtime hold a huge body. A break *after* the status line does not make the
    effect unknown (the server answered); it is reported as an incomplete body.
    """
    import httpx  # imported where used (about 0.1 s): see ..tls
    kept, total, digest = bytearray(), 0, hashlib.sha256()
    try:
        async for chunk in response.aiter_bytes():
            total += len(chunk)
            digest.update(chunk)
            if len(kept) < cap + 4:
                kept += chunk[: cap + 4 - len(kept)]
            if total > MAX_RESPONSE_BYTES:
                return _Body(bytes(kept), total, digest.hexdigest(), False, f"over {MAX_RESPONSE_BYTES} bytes")
    except httpx.HTTPError as exc:
        return _Body(bytes(kept), total, digest.hexdigest(), False, f"{type(exc).__name__}: {exc}")
    return _Body(bytes(kept), total, digest.hexdigest(), True)


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


# -- reconciliation ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reconciled:
    """What the target said about a key: settled ``ok`` | ``failed``, or ``unknown`` (leave it ambiguous)."""

    outcome: Literal["ok", "failed", "unknown"]
    evidence: dict[str, Any] = field(default_factory=dict)


_APPLIED = frozenset({"applied", "ok", "done", "succeeded"})
_REFUSED = frozenset({"failed", "refused", "rejected"})


def judge_lookup(status: int, body: Any) -> Literal["ok", "failed", "unknown"]:
    """Pure: the outcome a status lookup proves (see the module docstring for the convention)."""
    if status != 200 or not isinstance(body, Mapping):
        return "unknown"
    said = body.get("status")
    deliveries = body.get("deliveries")
    if body.get("found") is True or (isinstance(said, str) and said.lower() in _APPLIED) or (
            isinstance(deliveries, int) and not isinstance(deliveries, bool) and deliveries > 0):
        return "ok"
    if isinstance(said, str) and said.lower() in _REFUSED:
        return "failed"
    return "unknown"


def lookup_url(base_url: str, key: str, status_path: str = DEFAULT_STATUS_PATH) -> str:
    if "{key}" not in status_path:
        raise ValueError(f"status path {status_path!r} must contain {{key}}")
    return base_url.rstrip("/") + status_path.replace("{key}", quote(key, safe=""))


def _judged(url: str, key: str, response: httpx.Response) -> Reconciled:
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    outcome = judge_lookup(response.status_code, body)
    evidence: dict[str, Any] = {"lookup": url, "key": key, "http_status": response.status_code, "reconciled": True}
    if isinstance(body, Mapping) and isinstance(body.get("deliveries"), int):
        evidence["deliveries"] = int(body["deliveries"])
    return Reconciled(outcome, evidence)


def check_key(base_url: str, key: str, *, status_path: str = DEFAULT_STATUS_PATH, timeout: float = 5.0,
              client: httpx.Client | None = None) -> Reconciled:
    """Ask the target (synchronously: reconcilers run in the ledger's thread) whether ``key`` was applied."""
    import httpx  # imported where used (about 0.1 s): see ..tls
    url = lookup_url(base_url, key, status_path)
    try:
        if client is not None:
            response = client.get(url, headers={IDEMPOTENCY_HEADER: key}, timeout=timeout)
        else:
            with httpx.Client(trust_env=False, timeout=timeout, verify=tls.context()) as own:
                response = own.get(url, headers={IDEMPOTENCY_HEADER: key})
    except httpx.HTTPError as exc:
        return Reconciled("unknown", {"lookup": url, "key": key, "error": f"{type(exc).__name__}: {exc}"})
    return _judged(url, key, response)


async def check_key_async(base_url: str, key: str, *, status_path: str = DEFAULT_STATUS_PATH,
                          timeout: float = 5.0) -> Reconciled:
    """:func:`check_key` under trio, for a runtime that reconciles its own unsettled calls on resume."""
    import httpx  # imported where used (about 0.1 s): see ..tls
    url = lookup_url(base_url, key, status_path)
    try:
        async with httpx.AsyncClient(trust_env=False, timeout=timeout, verify=tls.context()) as client:
            response = await client.get(url, headers={IDEMPOTENCY_HEADER: key})
    except httpx.HTTPError as exc:
        return Reconciled("unknown", {"lookup": url, "key": key, "error": f"{type(exc).__name__}: {exc}"})
    return _judged(url, key, response)


def reconcile(entry: Entry) -> Verdict | None:
    """Ledger reconciler for ``http_request`` entries: ``ok``/``failed`` with evidence, or None (stays ambiguous)."""
    base = os.environ.get(RECONCILE_URL_ENV) or os.environ.get(WORLD_URL_ENV)
    if not base:  # said, not silent: an operator must know why the effect stays ambiguous
        log.warning("http reconciler: key %s stays ambiguous: neither %s nor %s is set in the ledger's environment",
                    entry.idempotency_key, RECONCILE_URL_ENV, WORLD_URL_ENV)
        return None
    found = check_key(base, entry.idempotency_key, status_path=os.environ.get(STATUS_PATH_ENV, DEFAULT_STATUS_PATH),
                      timeout=2.0)
    if found.outcome == "unknown":
        log.warning("http reconciler: key %s stays ambiguous: the lookup proved nothing (%s)", entry.idempotency_key,
                    found.evidence)
        return None
    return Verdict(found.outcome, found.evidence)
