"""What an HTTP server of this project (``session serve``, ``run --metrics-port``) does with a client that goes.

socketserver's default ``handle_error`` prints the whole traceback to stderr, also for a client that merely went
away mid-request — a closed browser tab, a killed ``curl``, a port scan resetting its connection. That is no error of
the server's: it is one debug line in the log. Anything else is logged with its traceback, as before (to the log, not
straight to stderr).
"""

from __future__ import annotations

import logging
import sys
from http.server import ThreadingHTTPServer
from typing import Any

log = logging.getLogger("ouroactors.serving")


class QuietDisconnects:
    """A mixin for a ``socketserver`` server class, before it in the bases (see the module docstring)."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError):  # reset, broken pipe, aborted: the client went away
            log.debug("%s went away: %s", client_address, error)
            return
        log.error("serving %s failed", client_address, exc_info=True)


class QuietHTTPServer(QuietDisconnects, ThreadingHTTPServer):
    """A threading HTTP server with :class:`QuietDisconnects`, its handler threads daemons (a client that never
    finishes its request must not keep the process alive)."""

    daemon_threads = True


__all__ = ["QuietDisconnects", "QuietHTTPServer"]
