"""The ``http`` tool (httpx on trio) and its reconciler: effects on a remote service, made settle-able by key.

**Idempotency.** Every request carries ``Idempotency-Key: <key>``, the key the ledger's start recorded for the
call (:meth:`ToolContext.key`: the context's ``idempotency_key``, else the effect id, else session/call id).
A retry of the same effect sends the same key, so a service that honours the header applies it once.

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
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote, urlsplit

import httpx
from pydantic import Field, field_validator

from ....authorities.grants.rules import Effect, Request
from ....authorities.ledger.domain import Entry
from ....authorities.ledger.messages import Verdict
from .base import Tool, ToolArgs, ToolContext, ToolOutcome, ToolRefused, cap_bytes

IDEMPOTENCY_HEADER = "Idempotency-Key"
RECONCILE_URL_ENV = "OUROACTORS_HTTP_RECONCILE_URL"
STATUS_PATH_ENV = "OUROACTORS_HTTP_STATUS_PATH"
WORLD_URL_ENV = "OUROACTORS_WORLD_URL"  # the chaos workload's world service (ouroactors.faults.world)
DEFAULT_STATUS_PATH = "/items/{key}"
MAX_BODY_BYTES = 1024 * 1024
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


def domain_granted(host: str, domains: tuple[str, ...]) -> bool:
    """``host`` is covered by a granted domain: exact, ``*.example.com`` (subdomains only) or ``*``."""
    for pattern in domains:
        pattern = pattern.lower()
        if pattern == "*" or pattern == host:
            return True
        if pattern.startswith("*.") and host.endswith(pattern[1:]):
            return True
    return False


class HttpTool(Tool[HttpArgs]):
    name = "http"
    description = ("Send one HTTP request (no redirects followed). The request carries an Idempotency-Key; the "
                   "status and the (capped) response body are returned.")
    effect = Effect.NETWORK
    Args = HttpArgs
    fingerprint_fields = ("method", "url", "headers", "body", "json_body")
    ledger_kind = "http_request"
    reconciler = "ouroactors.runtime.execution.tools.http:reconcile"

    def __init__(self, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._transport = transport

    def grant_request(self, args: HttpArgs, ctx: ToolContext) -> Request:
        return Request(principal=ctx.session_id, tool=self.name, effect=self.effect, domains=(host_of(args.url),))

    async def run(self, args: HttpArgs, ctx: ToolContext) -> ToolOutcome:
        started = time.monotonic()
        host = host_of(args.url)
        base = {"method": args.method, "url": args.url}
        try:
            key = ctx.key()
        except ToolRefused as exc:
            return ToolOutcome(status="failed", error=exc.detail, error_kind=exc.kind, evidence={**base, "sent": False})
        base["idempotency_key"] = key
        if not domain_granted(host, ctx.network_domains):
            return ToolOutcome(status="failed", error=f"host {host!r} is not among the session's granted domains",
                               error_kind="domain_not_granted", evidence={**base, "sent": False},
                               output_cap_bytes=ctx.output_cap_bytes)
        headers = {**args.headers, IDEMPOTENCY_HEADER: key}
        content = args.body.encode() if args.body is not None else None
        try:
            async with httpx.AsyncClient(timeout=ctx.timeout_s, follow_redirects=False, trust_env=False,
                                         transport=self._transport) as client:
                response = await client.request(args.method, args.url, headers=headers, content=content,
                                                json=args.json_body if content is None else None)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            return self._transport_failure("failed", "connect_failed", exc, base, ctx, started)
        except httpx.TimeoutException as exc:
            return self._transport_failure("unknown", "timeout", exc, base, ctx, started)
        except httpx.HTTPError as exc:
            return self._transport_failure("unknown", "transport", exc, base, ctx, started)
        raw = response.content
        text, cut = cap_bytes(raw, ctx.output_cap_bytes)
        ok = response.status_code < 400
        evidence = {**base, "sent": True, "http_status": response.status_code, "response_bytes": len(raw),
                    "response_sha256": hashlib.sha256(raw).hexdigest()}
        return ToolOutcome(status="ok" if ok else "failed", output=f"HTTP {response.status_code}\n{text}",
                           truncated=cut, output_cap_bytes=ctx.output_cap_bytes,
                           error=None if ok else f"HTTP {response.status_code} {response.reason_phrase}",
                           error_kind=None if ok else "http_status", evidence=evidence, duration_ms=_ms(started))

    @staticmethod
    def _transport_failure(status: Literal["failed", "unknown"], kind: str, exc: Exception, base: dict[str, Any],
                           ctx: ToolContext, started: float) -> ToolOutcome:
        why = "nothing was sent" if status == "failed" else "the request may have been applied"
        return ToolOutcome(status=status, error=f"{type(exc).__name__}: {exc or 'no detail'} ({why})",
                           error_kind=kind, evidence={**base, "sent": status == "unknown"},
                           output_cap_bytes=ctx.output_cap_bytes, duration_ms=_ms(started))


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
    url = lookup_url(base_url, key, status_path)
    try:
        if client is not None:
            response = client.get(url, headers={IDEMPOTENCY_HEADER: key}, timeout=timeout)
        else:
            with httpx.Client(trust_env=False, timeout=timeout) as own:
                response = own.get(url, headers={IDEMPOTENCY_HEADER: key})
    except httpx.HTTPError as exc:
        return Reconciled("unknown", {"lookup": url, "key": key, "error": f"{type(exc).__name__}: {exc}"})
    return _judged(url, key, response)


async def check_key_async(base_url: str, key: str, *, status_path: str = DEFAULT_STATUS_PATH,
                          timeout: float = 5.0) -> Reconciled:
    """:func:`check_key` under trio, for a runtime that reconciles its own unsettled calls on resume."""
    url = lookup_url(base_url, key, status_path)
    try:
        async with httpx.AsyncClient(trust_env=False, timeout=timeout) as client:
            response = await client.get(url, headers={IDEMPOTENCY_HEADER: key})
    except httpx.HTTPError as exc:
        return Reconciled("unknown", {"lookup": url, "key": key, "error": f"{type(exc).__name__}: {exc}"})
    return _judged(url, key, response)


def reconcile(entry: Entry) -> Verdict | None:
    """Ledger reconciler for ``http_request`` entries: ``ok``/``failed`` with evidence, or None (stays ambiguous)."""
    base = os.environ.get(RECONCILE_URL_ENV) or os.environ.get(WORLD_URL_ENV)
    if not base:
        return None
    found = check_key(base, entry.idempotency_key, status_path=os.environ.get(STATUS_PATH_ENV, DEFAULT_STATUS_PATH),
                      timeout=2.0)
    if found.outcome == "unknown":
        return None
    return Verdict(found.outcome, found.evidence)
