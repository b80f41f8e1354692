"""One TLS context per process for the runtime's HTTP clients (the model provider, the ``http`` tool, its reconciler).

``httpx`` builds a new :class:`ssl.SSLContext` and loads its CA bundle into it for every client it is not given one
for: 20-140 ms measured here, paid on every model call and every ``http`` tool call, since each uses a client of its
own (no connection outlives its call). The context is httpx's default — verification on, its CA bundle — made once
per process and per ``trust_env`` (whether ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` from the environment apply), and
shared: an :class:`ssl.SSLContext` is meant to be shared by the connections that use it.

**httpx is imported where it is used**, here and in the modules that make HTTP calls (the ``openai`` provider, the
``http`` tool): importing it costs about 0.1 s here, most of it its command line, which it imports with rich and
pygments when they are installed (they are: our CLI uses rich). Every actor process that imports the runtime's
modules — the runtime, the coordinator, the session directory — paid it at start, though a session on the
scripted model never makes an HTTP call.
"""

from __future__ import annotations

import ssl
import threading

_contexts: dict[bool, ssl.SSLContext] = {}
_lock = threading.Lock()


def context(*, trust_env: bool = False) -> ssl.SSLContext:
    """The process's default client context for ``trust_env``."""
    import httpx  # imported where used (see the module docstring)
    found = _contexts.get(trust_env)
    if found is None:
        with _lock:
            found = _contexts.get(trust_env)
            if found is None:
                found = _contexts[trust_env] = httpx.create_ssl_context(trust_env=trust_env)
    return found


__all__ = ["context"]
