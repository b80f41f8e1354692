"""A worker that starts a subprocess in ``on_start`` and answers its pid; ``"crash"`` crashes it. With
``stop_own=True`` its ``on_stop`` stops the subprocess itself (SIGTERM, then waits), recording that it did."""

from __future__ import annotations

import subprocess
from typing import Any

from ouroactors.supervision.worker import Worker

SPAWNER = "tests.actor.leftover_workers:Spawner"


class Spawner(Worker):
    def on_start(self, stop_own: bool = False) -> None:
        self.stop_own = stop_own
        self.proc = subprocess.Popen(["sleep", "300"], start_new_session=True)  # even in a session of its own

    def on_message(self, message: Any, sender: Any) -> Any:
        if message == "crash":
            raise RuntimeError("asked to crash")
        return self.proc.pid

    def on_stop(self, reason: Any) -> None:
        if self.stop_own:
            self.proc.terminate()
            self.proc.wait(10)


STARTER = "tests.actor.leftover_workers:Starter"


class Starter(Worker):
    """Starts, in ``on_start``, a child in its own process group (plain ``Popen``) and a daemon that leaves the
    process tree at once (``cmd &`` whose shell exits: the daemon is reparented, out of reach of a tree walk);
    answers both pids. Neither started a session of its own."""

    def on_start(self) -> None:
        self.child = subprocess.Popen(["sleep", "300"])
        shell = subprocess.run(["sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $!"], capture_output=True, text=True,
                               check=True, timeout=10)
        self.daemon = int(shell.stdout.strip())

    def on_message(self, message: Any, sender: Any) -> Any:
        if message == "crash":
            raise RuntimeError("asked to crash")
        return [self.child.pid, self.daemon]


FAILING_STARTER = "tests.actor.leftover_workers:FailingStarter"


class FailingStarter(Worker):
    """Starts a subprocess in a session of its own, writes its pid to ``pid_file``, then fails its start."""

    def on_start(self, pid_file: str) -> None:
        proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
        with open(pid_file, "w") as out:
            out.write(str(proc.pid))
        raise RuntimeError("on_start failed after starting a subprocess")


SESSION_STARTER = "tests.actor.leftover_workers:SessionStarter"


class SessionStarter(Worker):
    """Starts, in ``on_start``, programs that leave both its process group and the system's session: a ``Popen``
    with ``start_new_session=True`` and a daemon that calls ``setsid`` and leaves the process tree (its shell
    exits); answers both pids; ``"crash"`` crashes it."""

    def on_start(self) -> None:
        self.child = subprocess.Popen(["sleep", "300"], start_new_session=True)
        shell = subprocess.run(["sh", "-c", "setsid sleep 300 >/dev/null 2>&1 & echo $!"], capture_output=True,
                               text=True, check=True, timeout=10)
        self.daemon = int(shell.stdout.strip())

    def on_message(self, message: Any, sender: Any) -> Any:
        if message == "crash":
            raise RuntimeError("asked to crash")
        return [self.child.pid, self.daemon]
