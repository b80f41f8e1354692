"""``ouroactors session serve``: the committed events of sessions over HTTP as server-sent events.

The shell around :mod:`.sse` (which decides what a request asks and who may ask it): a threading HTTP server bound
to a loopback address, one thread per stream, each following the session's committed log from this process as
``session events --follow`` does (:func:`.direct_follow.follow`: read from LMDB, woken through a FIFO by whoever
commits). It needs the data dir, not the actor system: a stopped node's history streams too, and ends at once.

A stream sends every committed event after the asked cursor, a keep-alive comment after :data:`KEEPALIVE_S`
without one, and ends with an ``end`` event when an ``until`` event came or the session is over; a client that
reconnects to a stream with nothing more to send (the session is over) is answered 204, which ends
``EventSource``'s retries. At most :data:`MAX_STREAMS` streams at once (503 beyond: each holds a thread and a FIFO).
:meth:`SessionEventServer.close` ends every stream within :data:`~.direct_follow.POLL_S` and waits for them.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ...core.errors import OuroactorsError
from ...core.serving import QuietDisconnects
from . import direct_follow
from .errors import CursorAhead
from .sse import KEEPALIVE, Refusal, StreamRequest, end_frame, event_frame, parse
from .workflow import TERMINAL

__all__ = ["KEEPALIVE_S", "MAX_STREAMS", "REQUEST_TIMEOUT_S", "SessionEventServer", "loopback", "redacted"]

log = logging.getLogger("ouroactors.sse")
KEEPALIVE_S = 15.0
REQUEST_TIMEOUT_S = 30.0  # for the request to arrive, and for each write of a stream to be taken
MAX_STREAMS = 64
_TERMINAL = frozenset(state.value for state in TERMINAL)
_TOKEN_IN_QUERY = re.compile(r"([?&]access_token=)[^&\s]*")


def redacted(line: str) -> str:
    """A request line fit for a log: the token a query carries is not written anywhere."""
    return _TOKEN_IN_QUERY.sub(r"\1<redacted>", line)


def loopback(host: str) -> bool:
    """Is ``host`` a loopback address (or ``localhost``)? The server binds nothing else."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Handler(BaseHTTPRequestHandler):
    server: SessionEventServer
    protocol_version = "HTTP/1.0"  # a stream ends with its connection: no chunked framing for clients to undo
    timeout = REQUEST_TIMEOUT_S  # a client that sends no request, or reads nothing of its stream, is let go

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        headers = {name.lower(): value for name, value in self.headers.items()}
        asked = parse(method, self.path, headers, self.server.token)
        if isinstance(asked, Refusal):
            self._refuse(asked)
            return
        if not self.server.streams.acquire(blocking=False):
            self._refuse(Refusal(503, f"{self.server.max_streams} streams are open already: try again later"))
            return
        self._streaming = False
        try:
            self._stream(asked)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went: its follow ends with it
        except OuroactorsError as exc:  # a record that does not decode (quarantined by the store): said, not hidden
            log.warning("session %s: its stream ends: %s", asked.session_id, exc)
            if self._streaming:
                self.wfile.write(end_frame(f"error: {exc}"))
            else:
                self._refuse(Refusal(500, f"the log of session {asked.session_id!r} cannot be read: {exc}"))
        finally:
            self.server.streams.release()

    def _refuse(self, refusal: Refusal) -> None:
        body = (refusal.reason + "\n").encode()
        self.send_response(refusal.status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        if refusal.status == 401:
            self.send_header("WWW-Authenticate", 'Bearer realm="ouroactors"')
        self.end_headers()
        self.wfile.write(body)

    def _stream(self, asked: StreamRequest) -> None:
        data_dir, stop = self.server.data_dir, self.server.stopping
        try:
            state, more = direct_follow.state_of(data_dir, asked.session_id, asked.after)
        except CursorAhead as exc:  # the events between would never be sent: bad input, as a cursor that is no number
            self._refuse(Refusal(400, f"{'Last-Event-ID' if asked.resumed else 'after'}: {exc}"))
            return
        if state is None:
            self._refuse(Refusal(404, f"no session {asked.session_id!r} in this data dir"))
            return
        if state in _TERMINAL and not more:
            self.send_response(204)  # over, and everything was sent: EventSource stops reconnecting
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Accel-Buffering", "no")
        self.end_headers()
        self._streaming = True
        cursor = asked.after
        while not stop.is_set():
            ended = None
            for event in direct_follow.follow(data_dir, asked.session_id, cursor, follow=True,
                                              idle_timeout=KEEPALIVE_S, until=asked.until, stop=stop):
                self.wfile.write(event_frame(event.cursor, event.kind, event.turn, event.data, event.generation,
                                             event.committed_ns))
                self.wfile.flush()
                cursor = event.cursor
                if asked.until is not None and event.kind == asked.until:
                    ended = f"an event of kind {asked.until}"
            if ended is None:
                state, more = direct_follow.state_of(data_dir, asked.session_id, cursor)
                if state in _TERMINAL and not more:
                    ended = f"the session is {state}"
            if ended is not None:
                self.wfile.write(end_frame(ended))
                return
            self.wfile.write(KEEPALIVE)
            self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        log.info("%s %s", self.address_string(), redacted(format % args))


class SessionEventServer(QuietDisconnects, ThreadingHTTPServer):
    """The server of ``data_dir``'s sessions on ``(host, port)`` (port 0: any free one; see :attr:`server_port`)."""

    daemon_threads = True

    def __init__(self, data_dir: str | Path, host: str, port: int, token: str, *,
                 max_streams: int = MAX_STREAMS) -> None:
        if not loopback(host):
            raise ValueError(f"{host!r} is not a loopback address: the server binds 127.0.0.1, ::1 or localhost only")
        if len(token) < 16:
            raise ValueError("the token must be at least 16 characters")
        self.data_dir, self.token = Path(data_dir), token
        self.stopping = threading.Event()
        self.max_streams = max_streams
        self.streams = threading.BoundedSemaphore(max_streams)
        self._workers: list[threading.Thread] = []
        if ":" in host:
            self.address_family = socket.AF_INET6
        super().__init__((host, port), _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        worker = threading.Thread(target=self.process_request_thread, args=(request, client_address), daemon=True)
        self._workers = [w for w in self._workers if w.is_alive()] + [worker]
        worker.start()

    def close(self, timeout: float = 5.0) -> None:
        """Stop serving: no new request, every stream ended (each within the follow's poll), the socket closed."""
        self.stopping.set()
        self.shutdown()
        for worker in list(self._workers):
            worker.join(timeout)
        self.server_close()
