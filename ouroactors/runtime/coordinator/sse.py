"""A session's committed events as server-sent events: what an HTTP request asks, who may ask, and the bytes sent.

The third kind of subscriber (beside ``session events --follow`` and :meth:`ouroactors.sessions.Sessions.events`):
a browser's ``EventSource`` or any SSE client follows ``GET /sessions/<id>/events`` on ``ouroactors session serve``
(:mod:`.sse_server`). It reads the same committed log by cursor, so it has the same guarantees — nothing before its
commit, resumed from any cursor with no gap and no duplicate across restarts — and each event's SSE ``id`` is its
cursor: a client that reconnects sends it back as ``Last-Event-ID`` and goes on after it (the standard's own resume).

**Who may read.** The server runs as the data dir's owner and reads what only that owner may; over TCP, any local
user could ask. So every request carries the server's token — a random secret it writes to a 0600 file — as
``Authorization: Bearer <token>`` or, for ``EventSource`` (which cannot set headers), ``?access_token=<token>``;
compared in constant time. No token, a wrong one: 401, nothing read.

**What a request is.** ``after`` (a cursor, default 0) and ``until`` (an event kind that ends the stream) in the
query; ``Last-Event-ID``, when given, wins over ``after``. Every field is checked here and refused with a 400
naming it (the session id against the same pattern the runtime's door uses); a cursor beyond the session's committed
one is refused with a 400 naming the committed cursor by the server, which reads the record (:mod:`.sse_server`:
from there, the events committed next would never be sent). A finished stream (the session is
terminal and everything was sent) is answered 204 on reconnection, which tells ``EventSource`` to stop trying.

Pure: no sockets, no LMDB.
"""

from __future__ import annotations

import hmac
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

__all__ = ["KEEPALIVE", "Refusal", "StreamRequest", "end_frame", "event_frame", "parse"]

KEEPALIVE = b": keep-alive\n\n"  # a comment line: keeps proxies from closing an idle stream; clients ignore it
_PATH = re.compile(r"/sessions/([^/]+)/events")
_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")  # execution.messages.SessionId
_KIND = re.compile(r"[a-z][a-z0-9_]{0,63}")
_CURSOR_DIGITS = 19  # below 2**62, as the runtime's cursors are


@dataclass(frozen=True)
class StreamRequest:
    """A checked request to follow ``session_id`` after ``after`` (until an event of kind ``until``, if given)."""

    session_id: str
    after: int
    until: str | None = None
    resumed: bool = False  # ``after`` is the Last-Event-ID a reconnecting client sent (not the query's)


@dataclass(frozen=True)
class Refusal:
    """An HTTP error: its status and the reason sent as the body (plain text, one line)."""

    status: int
    reason: str


def _cursor(raw: str, what: str) -> int | Refusal:
    if not raw.isascii() or not raw.isdigit() or len(raw) > _CURSOR_DIGITS:
        return Refusal(400, f"{what} must be a cursor (0 or a positive integer), got {raw[:40]!r}")
    return int(raw)


def _one(query: dict[str, list[str]], name: str) -> str | Refusal | None:
    values = query.get(name)
    if values is None:
        return None
    if len(values) != 1:
        return Refusal(400, f"query parameter {name!r} given {len(values)} times")
    return values[0]


def parse(method: str, target: str, headers: Mapping[str, str], token: str) -> StreamRequest | Refusal:
    """The request ``method target`` with ``headers`` (names lower-cased), for a server whose token is ``token``."""
    if method != "GET":
        return Refusal(405, f"{method[:20]!r}: only GET is served")
    parts = urlsplit(target)
    try:
        query = parse_qs(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query), max_num_fields=8)
    except ValueError as exc:
        return Refusal(400, f"the query does not parse: {exc}")
    given = _one(query, "access_token")
    if isinstance(given, Refusal):
        return given
    bearer = headers.get("authorization", "")
    if bearer.startswith("Bearer "):
        given = bearer[len("Bearer "):]
    if given is None or not hmac.compare_digest(given.encode("utf-8", "replace"), token.encode()):
        return Refusal(401, "a token is required: Authorization: Bearer <token> or ?access_token=<token> (the "
                            "token is in the file `ouroactors session serve` printed)")
    found = _PATH.fullmatch(parts.path)
    if found is None:
        return Refusal(404, "not found: the events of a session are at /sessions/<session id>/events")
    session_id = unquote(found.group(1))
    if not _SESSION_ID.fullmatch(session_id):
        return Refusal(400, f"session id {session_id[:60]!r} is not a session id: 1 to 128 of [A-Za-z0-9._:@-], "
                            "starting with a letter or digit")
    raw_after = _one(query, "after")
    if isinstance(raw_after, Refusal):
        return raw_after
    after: int | Refusal = 0 if raw_after is None else _cursor(raw_after, "after")
    last = headers.get("last-event-id")
    resumed = False
    if last is not None and last != "":
        resumed, after = True, _cursor(last.strip(), "Last-Event-ID")
    if isinstance(after, Refusal):
        return after
    until = _one(query, "until")
    if isinstance(until, Refusal):
        return until
    if until is not None and not _KIND.fullmatch(until):
        return Refusal(400, f"until must be an event kind (e.g. turn_settled), got {until[:40]!r}")
    return StreamRequest(session_id, after, until, resumed)


def event_frame(cursor: int, kind: str, turn: int, data: dict[str, Any], generation: int = 0,
                committed_ns: int = 0) -> bytes:
    """One event as SSE: its cursor as ``id``, its kind as ``event`` (kept to ``[a-z0-9_]``: a field that held a
    line break would end the frame early), the event as one line of JSON (``json`` escapes line breaks): what
    ``session events --json`` prints, and when it was committed (wall-clock ns)."""
    name = kind if _KIND.fullmatch(kind) else re.sub(r"[^a-z0-9_]", "_", kind.lower())[:64] or "event"
    body = json.dumps({"cursor": cursor, "kind": kind, "turn": turn, "data": data, "generation": generation,
                       "committed_ns": committed_ns}, ensure_ascii=False, separators=(",", ":"), default=repr)
    return f"id: {cursor}\nevent: {name}\ndata: {body}\n\n".encode()


def end_frame(reason: str) -> bytes:
    """The stream's last frame: why it ends (an ``until`` event came, or the session is over)."""
    return f"event: end\ndata: {json.dumps({'reason': reason})}\n\n".encode()
