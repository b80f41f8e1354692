"""Fixtures for the execution tests: a real OpenAI-compatible server (``llmock serve``) on 127.0.0.1, and ``env``
(the node's LMDB environment in a fresh data dir, for the journal, replay and loop tests).

llmock (PyPI, pinned 0.2.2) is a server this project did not write; the ``openai`` provider is tested against it so
that "speaks Chat Completions" means what a third party implements, not what we think it means. It is scripted
over its own HTTP control API (``POST /_llmock/scenario``), which is also how its faults are triggered:
``stream_fault`` (disconnect / truncate / stall / malformed after N chunks), ``fail`` (a status, with
``retry_after``), ``slow_first_token``, ``reply`` (text and tool calls) and ``tool_fault``.

One server per test session (it takes about a second to start), reset before every test. It runs as a
subprocess in its own session, is waited for by polling ``/health`` with a deadline, and is killed by its pid at
teardown, with a check that its port is closed. Note: llmock registers a pytest plugin with a fixture named
``llmock`` (it points SDK environment variables at an in-process server); ours is ``llmock_server`` on purpose.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import lmdb
import pytest

from ouroactors.authorities.storage.env import StorageConfig, close_env, open_env
from ouroactors.system.handle import free_port
from ouroactors.testing.leaks import port_listening

LLMOCK_VERSION = "0.2.2"
_START_DEADLINE_S = 30.0


@dataclass
class LLMockServer:
    """A running ``llmock serve``: its OpenAI base URL and its control API."""

    port: int
    pid: int
    log: Path

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """What a provider's ``base_url`` is set to: llmock serves Chat Completions under ``/v1``."""
        return f"{self.root}/v1"

    def script(self, *behaviors: dict[str, Any]) -> None:
        """Queue behaviours for the next requests, e.g. ``{"type": "fail", "status": 429, "retry_after": 0.1}``."""
        answer = httpx.post(f"{self.root}/_llmock/scenario", json={"behaviors": list(behaviors)}, timeout=5)
        answer.raise_for_status()

    def reset(self) -> None:
        httpx.post(f"{self.root}/_llmock/reset", timeout=5).raise_for_status()

    def requests(self) -> list[dict[str, Any]]:
        """Every request served since the last reset, oldest first, with its JSON body."""
        answer = httpx.get(f"{self.root}/_llmock/requests", timeout=10)
        answer.raise_for_status()
        return list(answer.json()["requests"])


def _llmock_command(port: int) -> list[str]:
    script = Path(sys.executable).with_name("llmock")
    head = [str(script)] if script.exists() else [sys.executable, "-c", "from llmock.cli import app; app()"]
    return [*head, "serve", "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
            "--tool-mode", "off"]


@pytest.fixture(scope="session")
def _llmock_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LLMockServer]:
    try:
        import llmock
    except ImportError as exc:
        pytest.skip(f"llmock=={LLMOCK_VERSION} is not installed ({exc}); `pip install llmock=={LLMOCK_VERSION}`")
    version = getattr(llmock, "__version__", LLMOCK_VERSION)
    if version != LLMOCK_VERSION:
        pytest.skip(f"these tests are written against llmock=={LLMOCK_VERSION}, found {version}")
    port = free_port()
    log = tmp_path_factory.mktemp("llmock") / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(_llmock_command(port), stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    server = LLMockServer(port=port, pid=process.pid, log=log)
    try:
        deadline = time.monotonic() + _START_DEADLINE_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"llmock exited with {process.returncode}: {log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{server.root}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llmock not ready on port {port} after {_START_DEADLINE_S} s: "
                                   f"{log.read_text()[-2000:]}")
            time.sleep(0.05)  # bounded poll of the readiness condition
        yield server
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.wait(timeout=5)
        deadline = time.monotonic() + 5
        while port_listening(port) and time.monotonic() < deadline:
            time.sleep(0.02)  # bounded poll for the kernel to close the listener
        assert not port_listening(port), f"llmock left port {port} listening"


@pytest.fixture
def llmock_server(_llmock_process: LLMockServer) -> LLMockServer:
    """The session's llmock server, with no queued behaviour and no recorded request."""
    _llmock_process.reset()
    return _llmock_process


@pytest.fixture
def env(tmp_path: Path) -> Iterator[lmdb.Environment]:
    """The node's LMDB environment in a fresh data dir, opened in this process, closed after the test."""
    config = StorageConfig.under(tmp_path)
    handle = open_env(config)
    try:
        yield handle
    finally:
        close_env(config)


@pytest.fixture
def faults_disarmed() -> Iterator[None]:
    """No fault plan armed in this process before or after the test (a test that arms one cannot leak it)."""
    from ouroactors.core import faults

    faults.disarm()
    yield
    faults.disarm()


def each_record_stored_or_counted_once(env: lmdb.Environment, journal: Any, staged: list[str]) -> None:
    """The journal property tests' verdict: after one more append that commits, every ``prompt`` text in ``staged``
    is stored (in order) or counted by a ``gap`` record, once, and the chain verifies."""
    from ouroactors.runtime.execution import reading

    assert journal.append("prompt", {"text": "last"}, at=999).committed
    staged = [*staged, "last"]
    assert reading.verify(env, "s1").ok
    records = reading.records(env, "s1")
    present = [r.fields["text"] for r in records if r.kind == "prompt"]
    lost = sum(int(r.fields["lost_records"]) for r in records if r.kind == "gap")
    assert present == [t for t in staged if t in set(present)]  # order kept
    assert len(present) + lost == len(staged), (staged, present, lost)
