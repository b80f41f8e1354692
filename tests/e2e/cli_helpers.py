"""Running the CLI as a user would: real subprocesses, their output, exit codes and leftovers."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CLI = [sys.executable, "-c", "from ouroactors.cli import main; main()"]
ENV = {**os.environ, "COLUMNS": "200"}


def cli(*args: str, cwd: Path, timeout: float = 60, env: dict[str, str] | None = None,
        input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**ENV, **(env or {})}, input=input)


def agent_tree(directory: Path, allowed_root: Path) -> str:
    """The repository's agent tree, written to ``directory/agent.toml`` with ``allowed_root`` as the one root the
    workspace may lease (the file's own list is empty: every lease refused); its name, for ``Served``."""
    tree = (Path(__file__).resolve().parents[2] / "supervision_trees" / "agent.toml").read_text()
    made = tree.replace("allowed_roots = []", f"allowed_roots = [{json.dumps(str(allowed_root))}]")
    assert made != tree, "the agent tree's allowed_roots line changed: update this helper"
    (directory / "agent.toml").write_text(made)
    return "agent.toml"


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

    def stop(self, data_dir: Path, *, found_from_cwd: bool = False) -> tuple[int, str]:
        """``ouroactors stop`` as a second terminal would, then this run's exit code and output.

        The command gets longer than its own ``--timeout`` so that a slow stop reports itself rather
        than being cut off. With ``found_from_cwd`` it names no data dir and finds ``data_dir`` from where
        the run was started, as the README's second terminal does. When it fails, the failure carries what
        shows where it stuck: the run's Python stacks (``run`` dumps them on SIGUSR1), its output, and the
        tails of the system's logs; the run is killed either way, so nothing is left behind.
        """
        stop_args = [] if found_from_cwd else ["--data-dir", str(data_dir)]
        try:
            stopped = cli("stop", *stop_args, "--timeout", "60", cwd=self.cwd, timeout=120)
        except subprocess.TimeoutExpired as exc:
            stopped = subprocess.CompletedProcess(exc.cmd, -1, str(exc.stdout or ""), "timed out after 120 s")
        if stopped.returncode == 0:
            return self.finish()
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGUSR1)
        try:
            out, _ = self.proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate(timeout=30)
        logs = "".join(f"\n--- {name} (tail) ---\n{_tail(Path(data_dir) / name)}"
                       for name in ("admin.out", "actors.log"))
        raise AssertionError(f"stop exited {stopped.returncode}: {stopped.stdout}{stopped.stderr}\n"
                             f"--- the run's output ---\n{''.join(self.lines)}{out or ''}{logs}")


def _tail(path: Path, limit: int = 6000) -> str:
    try:
        return path.read_text(errors="replace")[-limit:]
    except OSError as exc:
        return f"({exc})"


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


def holding(path: Path) -> list[int]:
    """The processes that have ``path`` open: a multiproc system's processes all hold its ``admin.out`` (their
    output), so after a stop none may be left."""
    try:
        wanted = os.stat(path)
    except FileNotFoundError:
        return []
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{entry}/fd"):
                with contextlib.suppress(OSError):
                    st = os.stat(f"/proc/{entry}/fd/{fd}")
                    if (st.st_dev, st.st_ino) == (wanted.st_dev, wanted.st_ino):
                        found.append(int(entry))
                        break
    return found

