"""What ``ouroactors demo`` sets up before anything runs: the agent tree, the workspace, the script, the sandbox.

Kept apart from the narration (:mod:`.demo`) so each stays readable. Everything here is plain data and files:
no actor is started and no LMDB environment is opened in this process (the demo's system is forked from it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..runtime.demo_setup import AGENT_TOML, Workspace, agent_tree, prepare_workspace, workspace_for
from ..runtime.execution.providers.scripted import DEFAULT_SCRIPT_DATA

SLOW_CALL = "call_demo_slow"
SLOW_SECONDS = 3
SLOW_COMMAND = f"sleep {SLOW_SECONDS}; echo done >> demo.log"


def kill_script(data_dir: Path) -> Path:
    """The embedded default script with one more shell call before its last turn: a command slow enough
    (``sleep 3``) for the demo to SIGKILL the runtime while it runs. The last turn answers after the tool's result or
    after the user's steer the demo sends while the command runs (delivered before that call). Written into the
    data dir."""
    turns: list[Any] = list(DEFAULT_SCRIPT_DATA["turns"])
    slow = {"expect": {"last_role": "tool"}, "events": [
        {"kind": "text", "text": "And let me log that in demo.log."},
        {"kind": "tool_call", "id": SLOW_CALL, "name": "shell", "arguments": {"command": SLOW_COMMAND}},
    ]}
    # after the steer (delivered before the last model call) — or the tool's result, if the demo skipped its kill
    last = {key: value for key, value in turns[-1].items() if key != "expect"}
    script = {"name": "demo with a slow command", "turns": [*turns[:-1], slow, last]}
    path = data_dir / "demo-script.json"
    path.write_text(json.dumps(script, indent=1))
    return path


@dataclass(frozen=True)
class Boundary:
    mode: str  # "bwrap" | "none"
    why: str


def choose_sandbox() -> Boundary:
    """bwrap if it really works here (probed by running it), else the explicit, unsandboxed ``none`` mode."""
    from ..runtime.sandbox import probe

    found = probe()
    if found.available:
        return Boundary("bwrap", f"bubblewrap {found.version or ''} works here: shell commands run in a "
                                 "read-only view of the system, writable workspace only, no network")
    return Boundary("none", f"bubblewrap is not usable here ({found.failure_kind}: {found.failure}); "
                            "shell commands run UNSANDBOXED, as this user, in the workspace — the explicit "
                            "`none` boundary, chosen by the session's config, never a silent fallback")


__all__ = [
    "AGENT_TOML",
    "SLOW_CALL",
    "Boundary",
    "Workspace",
    "agent_tree",
    "choose_sandbox",
    "kill_script",
    "prepare_workspace",
    "workspace_for",
]
