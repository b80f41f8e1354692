"""The agent tree for the session-door attacks, what they read before and after, and a coordinator with the door.

* :func:`agent_tree` — agent.toml's order (storage … workspace, execution, coordinator, sessions) with the
  coordinator class chosen;
* :class:`DooredCoordinator` — the real coordinator plus a test-only way to make it send a forged nudge; the
  attacks run against it and against the real one;
* :func:`durable` — a digest of every LMDB database of the node, read in another process (an environment is
  never used across a fork: the actors are forked from the test's process);
* :func:`liveness` — pid, generation and restarts of every actor of the tree.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ouroactors import supervisor, worker
from ouroactors.core.errors import BadRequest
from ouroactors.runtime.coordinator.actor import Coordinator
from ouroactors.runtime.coordinator.messages import Committed

REAL = "ouroactors.runtime.coordinator.actor:Coordinator"
DOORED = "tests.security.session_door_support:DooredCoordinator"
RULES = {"user": ["allow:Read(**)"]}
CRASHES = ("restarting", "escalated", "generation_changed")


def agent_tree(root: str, coordinator: str = REAL) -> Any:
    return supervisor("agent", strategy="rest_for_one", intensity=10, children=[
        worker("storage", "ouroactors.authorities.storage.actor:Storage"),
        worker("ledger", "ouroactors.authorities.ledger.actor:Ledger"),
        worker("grants", "ouroactors.authorities.grants.actor:Grants", kwargs={"rules": RULES}),
        worker("workspace", "ouroactors.authorities.workspace.actor:Workspace", kwargs={"allowed_roots": [root]}),
        supervisor("execution", [worker("runtime", "ouroactors.runtime.execution.runtime:Runtime",
                                        restart="transient")], strategy="simple_one_for_one", intensity=10),
        supervisor("coordinator", [worker("session", coordinator, restart="transient")],
                   strategy="simple_one_for_one", intensity=10),
        worker("sessions", "ouroactors.runtime.coordinator.directory:Sessions"),
    ])


@dataclass(frozen=True)
class Nudge:
    """Test only: make this coordinator send ``nudge`` to its directory and relay the refusal to the asker."""

    nudge: Committed


class DooredCoordinator(Coordinator):
    """The real coordinator (whose door is in ``actor.py`` and the Worker base: ``protocol``, the sender of a push,
    a timer only from the actor itself) plus the tests' own :class:`Nudge`: a way to make it send a forged nudge."""

    def on_message(self, message: Any, sender: Any) -> Any:
        if isinstance(message, Nudge):
            self.nudge_asker = sender
            self.send(self.directory, message.nudge)
            return None
        if isinstance(message, BadRequest) and getattr(self, "nudge_asker", None) is not None \
                and sender == self.directory:
            asker, self.nudge_asker = self.nudge_asker, None
            self.send(asker, message)
            return None
        return super().on_message(message, sender)


_DUMP = """
import hashlib, json, sys
from ouroactors.authorities.storage.env import KNOWN_DBS, StorageConfig, db, open_env
env = open_env(StorageConfig.under(sys.argv[1]))
out = {}
with env.begin() as txn:
    for name in KNOWN_DBS:
        digest, count = hashlib.sha256(), 0
        for key, value in txn.cursor(db=db(env, name)):
            digest.update(len(key).to_bytes(4, "big") + bytes(key) + len(value).to_bytes(8, "big") + bytes(value))
            count += 1
        out[name.decode()] = [count, digest.hexdigest()]
print(json.dumps(out))
"""


def durable(data_dir: Path | str) -> dict[str, Any]:
    """Every database of the node's LMDB environment: its record count and a digest of its keys and values."""
    out = subprocess.run([sys.executable, "-c", _DUMP, str(data_dir)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    found: dict[str, Any] = json.loads(out.stdout)
    return found


def liveness(system: Any) -> dict[str, tuple[Any, ...]]:
    """Every actor of the tree: pid, generation, restarts, status (a crash changes them)."""
    return {path: (info.pid, info.generation, info.restarts, info.status) for path, info in system.walk("agent")}


def crashes(system: Any, after: int) -> list[Any]:
    """Supervision events since ``after`` that a crash or a restart leaves (a runtime closed normally is not one)."""
    out = []
    for event in system.events.all()[after:]:
        reason = event.reason or {}
        if event.kind in CRASHES or (event.kind == "exited" and reason.get("kind") not in ("normal", "shutdown")):
            out.append(event)
    return out


def coordinator_path(system: Any, session_id: str) -> str:
    """The tree path of the coordinator serving ``session_id``."""
    from ouroactors.runtime.coordinator.messages import Serving, WhichSession

    for child in system.which_children("agent/coordinator"):
        if child.status != "running":
            continue
        path = f"agent/coordinator/{child.id}"
        serving = system.ask(path, WhichSession(), timeout=10.0)
        if isinstance(serving, Serving) and serving.session_id == session_id:
            return path
    raise AssertionError(f"no running coordinator serves {session_id!r}")


def runtime_path(system: Any, generation: int) -> str:
    """The tree path of the runtime child of ``generation``."""
    for child in system.which_children("agent/execution"):
        if child.generation == generation and child.status == "running":
            return f"agent/execution/{child.id}"
    raise AssertionError(f"no running runtime of generation {generation}")


def script(path: Path, *, words: int = 1, pace_ms: int = 0, turns: int = 4) -> dict[str, Any]:
    """A scripted session config: ``turns`` turns of ``words`` text chunks ``pace_ms`` apart."""
    chunks = ", ".join(f'{{ kind = "text", text = "w{i} " }}' for i in range(words))
    path.write_text("".join(f"[[turns]]\npace_ms = {pace_ms}\nevents = [{chunks}]\n\n" for _ in range(turns)))
    return {"sandbox": {"mode": "none"}, "model": {"kind": "scripted", "script": str(path)}}


_SPRAY = """
import sys, time
from datetime import timedelta
from thespian.actors import WakeupMessage
from ouroactors.runtime.coordinator.calls import _AskTimer
from ouroactors.system.handle import ActorSystem
system = ActorSystem.connect(sys.argv[1])
address = system.resolve(sys.argv[2])
print("ready", flush=True)
deadline = time.monotonic() + float(sys.argv[3])
while time.monotonic() < deadline:
    for token in range(1, 60):
        system._endpoint.tell(address, WakeupMessage(timedelta(0), _AskTimer(token)))
system._close_endpoints()
"""


def spray_ask_timers(data_dir: Path | str, path: str, seconds: float) -> subprocess.Popen[str]:
    """Another process that sends ``path`` forged ask timers (tokens 1..59, over and over) for ``seconds``;
    returns once it is sending."""
    proc = subprocess.Popen([sys.executable, "-c", _SPRAY, str(data_dir), path, str(seconds)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc
