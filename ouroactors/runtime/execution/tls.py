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

**Preloaded before the fork.** A session's runtime is a process of its own, started per message: "once per process"
was once per message, and a runtime's first model call paid the import and the context (170-260 ms against a
local server, measured, where later calls took 6-7 ms). So the execution supervisor calls :func:`preload` before it
forks any runtime (:func:`.warming.preload`), once per system: every runtime inherits httpx imported and the
contexts built (an :class:`ssl.SSLContext` holds no thread, socket or file: a forked child uses its copy as its
own; OpenSSL reseeds its random generator in a child). ``trust_env=True`` gets a context of its own only when the
environment names a CA bundle (``SSL_CERT_FILE`` / ``SSL_CERT_DIR``); otherwise httpx builds the very same one.
"""

from __future__ import annotations

import importlib
import os
import ssl
import threading

_contexts: dict[bool, ssl.SSLContext] = {}
_lock = threading.Lock()


def context(*, trust_env: bool = False) -> ssl.SSLContext:
    """The process's default client context for ``trust_env``."""
    import httpx  # imported where used (see the module docstring)
    key = trust_env and _environment_names_ca()
    found = _contexts.get(key)
    if found is None:
        with _lock:
            found = _contexts.get(key)
            if found is None:
                found = _contexts[key] = httpx.create_ssl_context(trust_env=key)
    return found


def _environment_names_ca() -> bool:
    """Whether ``trust_env`` changes the context: httpx reads a CA bundle from these, and nothing else."""
    return bool(os.environ.get("SSL_CERT_FILE") or os.environ.get("SSL_CERT_DIR"))


def preload() -> None:
    """Import httpx and build both contexts now (the execution supervisor, before it forks runtimes), and import what a
    first request would: the transport's modules (httpcore, h11), its trio network backend and IDNA host encoding."""
    import httpx

    context(trust_env=True)
    httpx.AsyncHTTPTransport(verify=context(trust_env=False))  # imports httpcore and h11; holds no connection yet
    for name in _FIRST_REQUEST_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:  # another httpcore layout: the first request imports what it needs, as before
            pass


_FIRST_REQUEST_MODULES = ("httpcore._backends.trio", "httpcore._backends.auto", "anyio", "encodings.idna")


__all__ = ["context", "preload"]
