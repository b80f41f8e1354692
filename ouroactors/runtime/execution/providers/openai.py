"""The ``openai`` provider: an OpenAI-compatible Chat Completions streaming client on httpx, run under trio.

It speaks only the public API — ``POST {base_url}/chat/completions`` with ``stream: true`` and
``stream_options.include_usage``, an ``Authorization: Bearer`` header when a key is configured, server-sent
events back — so it works unchanged against any server that implements that API. The decisions live in
:mod:`._wire` (pure); this module is the I/O shell around them.

**Retries** happen only before a stream has started: on 408/409/429/5xx statuses and on connection failures, at
most ``max_attempts`` attempts in all, waiting what ``Retry-After`` (or ``retry-after-ms``) asks or a jittered
exponential backoff. Each retry is reported to ``on_retry`` before the wait (the runtime turns it into a
``model_retry`` event). Once a 200 stream has begun, nothing is retried: text may already have been shown, and a
second answer is a different answer; the failure is returned as a typed error for the loop to record.

**Deadlines** are trio cancel scopes around each read, never around a ``yield`` (a cancel scope must not span
a yield in an async generator): ``first_token_timeout_s`` runs from sending the request to the first SSE event,
``stall_timeout_s`` bounds the silence between two reads after that. Cancellation from outside (an interrupt)
propagates as ``trio.Cancelled`` and is not turned into a ModelError.

Each call uses its own ``httpx.AsyncClient`` (httpx runs on trio through anyio), so no connection outlives the
trio run that opened it — the runtime may run each turn in a fresh ``trio.run``. Consumers should iterate under
``contextlib.aclosing`` so an abandoned stream closes its connection at once.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from .. import tls
from ..model import ModelError, ModelErrorKind, ModelEvent, ModelRequest
from ._wire import RETRYABLE_STATUSES, ChatStreamAssembler, SSEDecoder, chat_body, parse_retry_after, retry_delay
from .config import OpenAIConfig

if TYPE_CHECKING:
    import httpx

MAX_ERROR_BODY = 4096


@dataclass(frozen=True)
class RetryNotice:
    """One failed attempt that will be retried: what failed and how long the provider waits before the next."""

    attempt: int  # the attempt that failed, 1-based
    max_attempts: int
    status: int | None  # the HTTP status, or None for a connection failure
    reason: str
    delay_s: float
    retry_after_s: float | None  # what the server asked for, if anything


RetryHook = Callable[[RetryNotice], None]


class OpenAIProvider:
    """Streams one Chat Completions call per :meth:`stream`; see the module docstring for retries and deadlines."""

    name = "openai"

    def __init__(
        self,
        config: OpenAIConfig,
        *,
        on_retry: RetryHook | None = None,
        sleep: Callable[[float], Awaitable[None]] = trio.sleep,
        rng: random.Random | None = None,
        environ: Mapping[str, str] = os.environ,
    ) -> None:
        self.config = config
        self.on_retry = on_retry  # called synchronously before each retry's wait; it must not raise
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._environ = environ

    def _headers(self) -> dict[str, str]:
        headers = {"accept": "text/event-stream", "content-type": "application/json"}
        name = self.config.api_key_env
        if name is not None:
            key = self._environ.get(name)
            if not key:
                raise ModelError(ModelErrorKind.CONFIG, f"environment variable {name!r} (model.api_key_env) is "
                                 "not set or empty in the runtime's environment; it must hold the API key (a "
                                 "runtime inherits the environment of the system serving the data dir: set it "
                                 "where `ouroactors run` starts, then restart the system)")
            headers["authorization"] = f"Bearer {key}"
        return headers

    def _timeout(self) -> httpx.Timeout:
        import httpx  # imported where used (about 0.1 s): see ..tls
        connect = self.config.connect_timeout_s
        # Reads are bounded by the first-token and stall deadlines (trio scopes), not by httpx.
        return httpx.Timeout(connect=connect, read=None, write=connect, pool=connect)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        import httpx  # imported where used (about 0.1 s): see ..tls
        config = self.config
        body = chat_body(request, model=config.model, include_usage=config.include_usage,
                         temperature=config.temperature)
        headers = self._headers()
        async with httpx.AsyncClient(timeout=self._timeout(), trust_env=config.trust_env,
                                     verify=tls.context(trust_env=config.trust_env)) as client:
            response, deadline = await self._open(client, body, headers)
            try:
                async with aclosing(self._events(response, deadline)) as events:
                    async for event in events:
                        yield event
            finally:
                with trio.CancelScope(shield=True):
                    await response.aclose()

    async def _retry(self, attempt: int, status: int | None, reason: str, retry_after: float | None) -> None:
        config = self.config
        delay = retry_delay(attempt, retry_after, base=config.backoff_base_s, cap=config.backoff_max_s, rng=self._rng)
        if self.on_retry is not None:
            self.on_retry(RetryNotice(attempt, config.max_attempts, status, reason, delay, retry_after))
        await self._sleep(delay)

    async def _open(self, client: httpx.AsyncClient, body: dict[str, object],
                    headers: dict[str, str]) -> tuple[httpx.Response, float]:
        """Send the request until a 200 stream starts; return it with its first-token deadline."""
        import httpx  # imported where used (about 0.1 s): see ..tls
        config = self.config
        url = config.url
        for attempt in range(1, config.max_attempts + 1):
            last = attempt == config.max_attempts
            deadline = trio.current_time() + config.first_token_timeout_s
            try:
                with trio.move_on_at(deadline) as scope:
                    response = await client.send(client.build_request("POST", url, json=body, headers=headers),
                                                 stream=True)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                reason = f"cannot connect to {url}: {exc or type(exc).__name__}"
                if last:
                    raise ModelError(ModelErrorKind.CONNECT, reason, attempts=attempt) from exc
                await self._retry(attempt, None, reason, None)
                continue
            except httpx.TransportError as exc:  # the server hung up before answering
                reason = f"{url} closed the connection before answering: {exc or type(exc).__name__}"
                if last:
                    raise ModelError(ModelErrorKind.DISCONNECTED, reason, attempts=attempt) from exc
                await self._retry(attempt, None, reason, None)
                continue
            if scope.cancelled_caught:
                raise ModelError(ModelErrorKind.FIRST_TOKEN_TIMEOUT, f"no response from {url} within "
                                 f"{config.first_token_timeout_s:g} s (first_token_timeout_s)", attempts=attempt)
            status = response.status_code
            if status == 200:
                kind = response.headers.get("content-type", "")
                if not kind.startswith("text/event-stream"):
                    await response.aclose()
                    raise ModelError(ModelErrorKind.MALFORMED, f"{url} answered 200 with content-type {kind!r}, "
                                     "not a text/event-stream", status=status, attempts=attempt)
                return response, deadline
            detail = await self._error_detail(response)
            retry_after = parse_retry_after(response.headers)
            reason = f"{url} answered {status}: {detail}"
            if status in RETRYABLE_STATUSES and not last:
                if retry_after is not None and retry_after > config.max_retry_after_s:
                    raise ModelError(ModelErrorKind.HTTP_STATUS, f"{reason}; it asks to retry after "
                                     f"{retry_after:g} s, more than max_retry_after_s = {config.max_retry_after_s:g}",
                                     status=status, attempts=attempt)
                await self._retry(attempt, status, reason, retry_after)
                continue
            tried = f" (after {attempt} attempts)" if attempt > 1 else ""
            raise ModelError(ModelErrorKind.HTTP_STATUS, reason + tried, status=status, attempts=attempt)
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

    async def _error_detail(self, response: httpx.Response) -> str:
        """A short description of an error answer (its ``error.message`` when it has one), read with a bound."""
        import httpx  # imported where used (about 0.1 s): see ..tls
        raw = b""
        with trio.move_on_after(self.config.connect_timeout_s):
            try:
                async for piece in response.aiter_bytes():
                    raw += piece
                    if len(raw) >= MAX_ERROR_BODY:
                        break
            except httpx.TransportError:
                pass
        await response.aclose()
        text = raw[:MAX_ERROR_BODY].decode("utf-8", errors="replace").strip()
        try:
            error = json.loads(text).get("error")
            message = error.get("message") if isinstance(error, dict) else error
            if isinstance(message, str) and message:
                text = message
        except (ValueError, AttributeError):
            pass
        return repr(text[:200]) if text else "(empty body)"

    async def _events(self, response: httpx.Response, deadline: float) -> AsyncGenerator[ModelEvent, None]:
        import httpx  # imported where used (about 0.1 s): see ..tls
        config = self.config
        decoder = SSEDecoder()
        assembler = ChatStreamAssembler()
        raw = response.aiter_bytes()
        done = False
        while not done:
            first = assembler.chunks == 0
            with trio.move_on_at(deadline if first else trio.current_time() + config.stall_timeout_s) as scope:
                try:
                    piece: bytes | None = await raw.__anext__()
                except StopAsyncIteration:
                    piece = None
                except httpx.TransportError as exc:
                    raise ModelError(ModelErrorKind.DISCONNECTED, f"the stream from {config.url} broke after "
                                     f"{assembler.chunks} chunk(s): {exc or type(exc).__name__}") from exc
            if scope.cancelled_caught:
                if first:
                    raise ModelError(ModelErrorKind.FIRST_TOKEN_TIMEOUT, f"no chunk from {config.url} within "
                                     f"{config.first_token_timeout_s:g} s (first_token_timeout_s)")
                raise ModelError(ModelErrorKind.STALL_TIMEOUT, f"the stream from {config.url} was silent for "
                                 f"{config.stall_timeout_s:g} s after {assembler.chunks} chunk(s) (stall_timeout_s)")
            payloads = decoder.close() if piece is None else decoder.feed(piece)
            done = piece is None
            for payload in payloads:
                if payload.strip() == "[DONE]":
                    done = True
                    break
                for event in assembler.feed(payload):
                    yield event
        for event in assembler.finish():
            yield event
