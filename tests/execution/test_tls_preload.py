"""httpx and its TLS contexts are made in the execution supervisor, before it forks runtimes (:mod:`...tls`).

A session's runtime is a process started per message, so what a runtime's first model call builds for itself —
httpx and its transport imported, a TLS context with its CA bundle loaded — was paid on every message (170-260 ms
against a local server, where later calls took 6-7 ms). The tests run the supervisor's preload in a fresh
interpreter, fork a child as the supervisor forks a runtime, and make the child's first model call against a real
OpenAI-compatible server (llmock): no context is built there and none of httpx's modules is imported there.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ouroactors.runtime.execution import tls

from .conftest import LLMockServer

_CHILD = r"""
import json, os, sys
import trio
from ouroactors.runtime.execution import runtime  # the module the execution supervisor imports (its worker's)
from ouroactors.runtime.execution import warming
from ouroactors.runtime.execution.model import Message, ModelRequest
from ouroactors.runtime.execution.providers import make_provider

if sys.argv[2] == "preload":
    warming.preload()
parent_has_httpx = "httpx" in sys.modules
r, w = os.pipe()
pid = os.fork()
if pid == 0:  # a runtime, forked after the preload
    os.close(r)
    report = {"parent_has_httpx": parent_has_httpx}
    try:
        built = []
        if parent_has_httpx:
            import httpx
            real = httpx.create_ssl_context
            httpx.create_ssl_context = lambda *a, **k: built.append(k) or real(*a, **k)
        before = set(sys.modules)
        provider = make_provider({"kind": "openai", "base_url": sys.argv[1], "model": "m"})

        async def call():
            return [type(e).__name__ async for e in provider.stream(
                ModelRequest(model="m", messages=(Message(role="user", content="hi"),)))]

        report.update(events=trio.run(call), built=built,
                      imported=sorted(m for m in set(sys.modules) - before if m.split(".")[0] in
                                      ("httpx", "httpcore", "h11", "anyio", "certifi")))
    except BaseException as exc:
        report["error"] = repr(exc)
    os.write(w, json.dumps(report).encode())
    os._exit(0)
os.close(w)
data = b""
while chunk := os.read(r, 65536):
    data += chunk
os.waitpid(pid, 0)
print(data.decode())
"""


def _first_call_in_a_forked_runtime(server: LLMockServer, variant: str) -> dict:
    server.script({"type": "reply", "text": "ok"})
    out = subprocess.run([sys.executable, "-c", _CHILD, server.base_url, variant], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert "error" not in report, report
    assert report["events"][-1] == "Finished"
    return report


def test_a_runtime_forked_after_the_preload_builds_no_context_and_imports_no_http_module(llmock_server):
    report = _first_call_in_a_forked_runtime(llmock_server, "preload")
    assert report["parent_has_httpx"] is True
    assert report["built"] == []  # the context the supervisor built is the one used
    assert report["imported"] == []  # httpx, httpcore, h11, its trio backend: all inherited


def test_without_the_preload_the_runtime_pays_both_itself(llmock_server):
    report = _first_call_in_a_forked_runtime(llmock_server, "bare")
    assert report["parent_has_httpx"] is False
    assert {"httpx", "httpcore", "h11"} <= {m.split(".")[0] for m in report["imported"]}


def test_trust_env_shares_the_default_context_unless_the_environment_names_a_ca(monkeypatch, tmp_path):
    monkeypatch.setattr(tls, "_contexts", {})
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    tls.preload()
    assert tls.context(trust_env=True) is tls.context(trust_env=False)  # httpx would build the very same one
    assert len(tls._contexts) == 1

    import certifi

    monkeypatch.setattr(tls, "_contexts", {})
    monkeypatch.setenv("SSL_CERT_FILE", certifi.where())
    assert tls.context(trust_env=True) is not tls.context(trust_env=False)  # the environment's CA bundle: its own
    assert tls.context(trust_env=True) is tls.context(trust_env=True)


@pytest.mark.parametrize("name", tls._FIRST_REQUEST_MODULES)
def test_the_modules_a_first_request_imports_exist_here(name):
    import importlib

    importlib.import_module(name)  # a renamed module would make the preload silently miss it
