"""Running the CLI as a user would: real subprocesses, their output, exit codes and leftovers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CLI = [sys.executable, "-c", "from ouroactors.cli import main; main()"]
ENV = {**os.environ, "COLUMNS": "200"}


def cli(*args: str, cwd: Path, timeout: float = 60, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**ENV, **(env or {})})


class Served:
    """``ouroactors run`` in the background, like a first terminal."""

    def __init__(self, cwd: Path, *args: str) -> None:
        self.cwd = cwd
        self.proc = subprocess.Popen([*CLI, "run", *args], cwd=cwd, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env=ENV)
        self.lines: list[str] = []
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if "serving" in line or ("started" in line and "detached" in line):
                return
        raise AssertionError("run ended before serving:\n" + "".join(self.lines))

    def finish(self, timeout: float = 60) -> tuple[int, str]:
        out, _ = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, "".join(self.lines) + out

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate(timeout=30)


def events(data_dir: Path) -> list[dict[str, Any]]:
    path = data_dir / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def wait_event(data_dir: Path, kind: str, path: str, after: int = 0, timeout: float = 20) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for event in events(data_dir)[after:]:
            if event["kind"] == kind and event["path"] == path:
                return event
        time.sleep(0.02)  # polling a file another process writes
    raise AssertionError(f"no {kind} event for {path} within {timeout}s")


def write_tree(path: Path, body: str) -> Path:
    path.write_text(body)
    return path


SIMPLE_TREE = """
[tree]
id = "r"
strategy = "one_for_one"
intensity = 5

[[tree.children]]
id = "e"
actor = "ouroactors.examples.workers:Echo"

[[tree.children]]
id = "c"
actor = "ouroactors.examples.workers:Counter"
"""
